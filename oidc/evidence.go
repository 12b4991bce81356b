// evidence.go: re-checking a stored login. An oidc.login evidence record
// keeps the ID token and the provider's JWK that verified it; this checks
// them again, offline, long after the token expired.

package oidc

import (
	"context"
	"crypto"
	"encoding/base64"
	"fmt"
	"slices"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
)

// CheckSigningJWK reports whether jwk is a valid public signing key.
func CheckSigningJWK(jwk []byte) error {
	if _, err := parseSigningJWK(jwk); err != nil {
		return fmt.Errorf("oidc: %w", err)
	}
	return nil
}

// JWKThumbprint returns the RFC 7638 SHA-256 thumbprint of a public
// signing JWK, base64url without padding: what names a provider key
// whatever the JSON it was written in (member order, white space, extra
// members such as "kid" or "alg").
func JWKThumbprint(jwk []byte) (string, error) {
	key, err := parseSigningJWK(jwk)
	if err != nil {
		return "", fmt.Errorf("oidc: %w", err)
	}
	t, err := key.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("oidc: JWK thumbprint: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(t), nil
}

// parseSigningJWK parses a JWK that must be a public key for signatures.
func parseSigningJWK(jwk []byte) (jose.JSONWebKey, error) {
	var key jose.JSONWebKey
	if err := key.UnmarshalJSON(jwk); err != nil {
		return key, fmt.Errorf("JWK: %w", err)
	}
	if !key.IsPublic() || !key.Valid() {
		return key, fmt.Errorf("the JWK is not a valid public key")
	}
	if key.Use != "" && key.Use != "sig" {
		return key, fmt.Errorf("the JWK is for %q, not signing", key.Use)
	}
	return key, nil
}

// VerifyEvidence re-verifies a stored ID token with the stored JWK, without
// any network access: the signature (by that key, with a public-key
// algorithm the key allows), the issuer and the audience (and the
// authorized party). It ignores expiry: the token is evidence of a login in
// the past, not a credential. It returns the token's claims, with the
// header's key ID and algorithm.
//
// What this proves is that the key signed the token; that the key was the
// provider's at the time is what Kith recorded when it fetched the key from
// the provider's key set (a verifier who distrusts that can compare the
// JWK with the provider's published keys or a transparency log).
func VerifyEvidence(rawIDToken string, jwk []byte, issuer, audience string) (*Claims, error) {
	key, err := parseSigningJWK(jwk)
	if err != nil {
		return nil, fmt.Errorf("oidc: verify evidence: %w", err)
	}
	algs := asymmetricAlgs
	if key.Algorithm != "" {
		if !slices.Contains(asymmetricAlgs, jose.SignatureAlgorithm(key.Algorithm)) {
			return nil, fmt.Errorf("oidc: verify evidence: the JWK's algorithm %q is not accepted", key.Algorithm)
		}
		algs = []jose.SignatureAlgorithm{jose.SignatureAlgorithm(key.Algorithm)}
	}
	jws, err := jose.ParseSignedCompact(rawIDToken, algs)
	if err != nil {
		return nil, fmt.Errorf("oidc: verify evidence: %w: %w: %v", ErrIDToken, ErrSignature, err)
	}
	if len(jws.Signatures) != 1 {
		return nil, fmt.Errorf("oidc: verify evidence: %w: %w: %d signatures", ErrIDToken, ErrSignature, len(jws.Signatures))
	}
	h := jws.Signatures[0].Header
	if h.KeyID != "" && key.KeyID != "" && h.KeyID != key.KeyID {
		return nil, fmt.Errorf("oidc: verify evidence: %w: %w: the token names key %q, the JWK is %q", ErrIDToken, ErrUnknownKey, h.KeyID, key.KeyID)
	}
	payload, err := jws.Verify(key.Key)
	if err != nil {
		return nil, fmt.Errorf("oidc: verify evidence: %w: %w", ErrIDToken, ErrSignature)
	}
	claims, err := parseClaims(payload)
	if err != nil {
		return nil, fmt.Errorf("oidc: verify evidence: %w", err)
	}
	if err := checkIssuerAudience(claims, issuer, audience); err != nil {
		return nil, fmt.Errorf("oidc: verify evidence: %w", err)
	}
	// go-oidc's verifier over a static key set (no network) as the second,
	// authoritative check of the same token.
	v := gooidc.NewVerifier(issuer, &gooidc.StaticKeySet{PublicKeys: []crypto.PublicKey{key.Key}}, &gooidc.Config{
		ClientID:             audience,
		SupportedSigningAlgs: []string{h.Algorithm},
		SkipExpiryCheck:      true,
	})
	if _, err := v.Verify(context.Background(), rawIDToken); err != nil {
		return nil, fmt.Errorf("oidc: verify evidence: %w: %v", ErrIDToken, err)
	}
	claims.KeyID, claims.Algorithm = h.KeyID, h.Algorithm
	return claims, nil
}
