package oidc

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func httpRequest(target string) *http.Request {
	return httptest.NewRequest(http.MethodGet, target, nil)
}

// beginResponse GETs Kith's Begin for the default provider without
// following the redirect.
func beginResponse(t *testing.T, h *harness, next string) *http.Response {
	t.Helper()
	c := h.browser()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(h.rp.URL + "/login/" + clientID + "?next=" + next)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// rsaKey makes an RSA key: a stranger's key, never published by the
// provider.
func rsaKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// rsaJWK returns the public JWK JSON of a fresh RSA key.
func rsaJWK(t *testing.T, kid string) []byte {
	t.Helper()
	b, err := json.Marshal(jose.JSONWebKey{Key: &rsaKey(t).PublicKey, KeyID: kid, Algorithm: "RS256", Use: "sig"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signJWT signs claims as a JWT with key under kid.
func signJWT(t *testing.T, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// idClaims are plausible ID token claims.
func idClaims(issuer, aud string, exp time.Time) map[string]any {
	return map[string]any{
		"iss": issuer, "sub": "u-1001", "aud": aud, "azp": aud,
		"iat": time.Now().Unix(), "exp": exp.Unix(), "nonce": "n",
		"email": "alice@example.org", "email_verified": true,
	}
}

// jwkOf returns the public JWK JSON of key.
func jwkOf(t *testing.T, key *rsa.PrivateKey, kid string) []byte {
	t.Helper()
	b, err := json.Marshal(jose.JSONWebKey{Key: &key.PublicKey, KeyID: kid, Algorithm: "RS256", Use: "sig"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
