// jwks.go: the provider's published signing keys. Kith fetches the JWK set
// itself (rather than through go-oidc's RemoteKeySet) so that it keeps each
// key's exact JSON: the key that verified a login is stored with the ID
// token as evidence.

package oidc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Limits of the key set fetch.
const (
	// maxJWKSBytes caps a JWK set; real ones are a few kilobytes.
	maxJWKSBytes = 1 << 20
	// jwksMinRefresh is the least time between two fetches of the key set
	// when a token names a key Kith does not know, so forged tokens with
	// random key IDs cannot make Kith hammer the provider.
	jwksMinRefresh = 30 * time.Second
)

// asymmetricAlgs are the signature algorithms Kith accepts on ID tokens:
// public-key ones only (a symmetric HS256 token is signed with the client
// secret, which a third party re-checking evidence cannot have).
var asymmetricAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// publicJWK is one key of the set: its JSON as published, and parsed.
type publicJWK struct {
	raw []byte
	key jose.JSONWebKey
}

// keySet is a provider's JWK set, cached and refreshed when a token names
// an unknown key. It implements go-oidc's KeySet.
type keySet struct {
	url    string
	client *http.Client
	algs   []jose.SignatureAlgorithm
	now    func() time.Time

	mu      sync.Mutex
	keys    []publicJWK
	fetched time.Time
}

// VerifySignature verifies jwt with the key it names and returns its
// payload (go-oidc's KeySet contract).
func (k *keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	payload, _, err := k.verify(ctx, jwt)
	return payload, err
}

// verify verifies jwt and returns its payload and the exact JSON of the key
// that verified it. Errors wrap ErrUnknownKey or ErrSignature.
func (k *keySet) verify(ctx context.Context, jwt string) (payload, jwk []byte, err error) {
	jws, err := jose.ParseSignedCompact(jwt, k.algs)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: malformed or unacceptable algorithm: %v", ErrSignature, err)
	}
	if len(jws.Signatures) != 1 {
		return nil, nil, fmt.Errorf("%w: %d signatures", ErrSignature, len(jws.Signatures))
	}
	h := jws.Signatures[0].Header
	keys, err := k.current(ctx, false)
	if err != nil {
		return nil, nil, err
	}
	payload, jwk, found := tryKeys(jws, h, keys)
	if payload != nil {
		return payload, jwk, nil
	}
	if !found {
		// The provider may have rotated its keys since the last fetch.
		keys, err = k.current(ctx, true)
		if err != nil {
			return nil, nil, err
		}
		payload, jwk, found = tryKeys(jws, h, keys)
		if payload != nil {
			return payload, jwk, nil
		}
	}
	if !found {
		return nil, nil, fmt.Errorf("%w: no published key has ID %q", ErrUnknownKey, h.KeyID)
	}
	return nil, nil, fmt.Errorf("%w: key %q does not verify it", ErrSignature, h.KeyID)
}

// tryKeys verifies jws with each candidate key: those with the header's key
// ID (all, when the token names none), meant for signing, and of the
// token's algorithm. found reports whether there was a candidate at all.
func tryKeys(jws *jose.JSONWebSignature, h jose.Header, keys []publicJWK) (payload, jwk []byte, found bool) {
	for _, k := range keys {
		if h.KeyID != "" && k.key.KeyID != h.KeyID {
			continue
		}
		if k.key.Use != "" && k.key.Use != "sig" {
			continue
		}
		if k.key.Algorithm != "" && k.key.Algorithm != h.Algorithm {
			continue
		}
		found = true
		if p, err := jws.Verify(k.key.Key); err == nil {
			return p, k.raw, true
		}
	}
	return nil, nil, found
}

// current returns the cached keys, fetching them when there are none, or
// when refresh is set and the last fetch is older than jwksMinRefresh.
func (k *keySet) current(ctx context.Context, refresh bool) ([]publicJWK, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys != nil && (!refresh || k.now().Sub(k.fetched) < jwksMinRefresh) {
		return k.keys, nil
	}
	keys, err := fetchJWKS(ctx, k.client, k.url)
	if err != nil {
		if k.keys != nil {
			return k.keys, nil // keep verifying with what we have
		}
		return nil, err
	}
	k.keys, k.fetched = keys, k.now()
	return keys, nil
}

// fetchJWKS gets and parses a JWK set, keeping only valid public keys.
func fetchJWKS(ctx context.Context, client *http.Client, url string) ([]publicJWK, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: key set %s: %v", ErrProviderUnavailable, url, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: key set: %v", ErrProviderUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: key set %s: %s", ErrProviderUnavailable, url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: key set: %v", ErrProviderUnavailable, err)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("%w: key set %s is larger than %d bytes", ErrProviderUnavailable, url, maxJWKSBytes)
	}
	return parseJWKS(body)
}

// parseJWKS parses a JWK set document. Keys that go-jose cannot parse (an
// unknown key type), private keys and invalid keys are skipped.
func parseJWKS(body []byte) ([]publicJWK, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("%w: key set: %v", ErrProviderUnavailable, err)
	}
	keys := make([]publicJWK, 0, len(set.Keys))
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil || !k.IsPublic() || !k.Valid() {
			continue
		}
		keys = append(keys, publicJWK{raw: append([]byte(nil), raw...), key: k})
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: key set has no usable public key", ErrProviderUnavailable)
	}
	return keys, nil
}
