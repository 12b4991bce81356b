// cookie.go: the login-flow cookie. Between Begin and Finish the browser
// holds the flow's state, nonce, PKCE verifier and return path, sealed with
// AES-256-GCM under a server key: the browser can neither read nor change
// it, and a cookie made for one provider does not open for another. Kith
// keeps nothing server-side for a login in progress, so any node can finish
// a login another node began.

package oidc

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// FlowLifetime is how long a person has between Begin and Finish: long
// enough to log in at the provider (with a second factor), short enough
// that a stolen cookie is soon useless.
const FlowLifetime = 10 * time.Minute

// CookieKeySize is the length of Options.CookieKey.
const CookieKeySize = 32

// maxCookieLen caps what open will decode; a sealed flow is about 300
// bytes, and up to about 3,500 with what a consent login carries
// (BeginOptions.Pending), under the 4,096 bytes browsers keep of a
// cookie.
const maxCookieLen = 4000

// flowState is what the cookie carries. Short JSON names keep it small.
type flowState struct {
	Provider string `json:"p"`
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"x"`
	Pending  string `json:"d,omitempty"`
	Expires  int64  `json:"e"` // Unix seconds
}

// sealer encrypts and authenticates flow cookies.
type sealer struct {
	aead cipher.AEAD
}

// deriveKey derives a purpose-bound key from the server key, so the same
// configured key can serve several uses without one use's output helping
// to attack another.
func deriveKey(key []byte, purpose string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

func newSealer(key []byte) (*sealer, error) {
	if len(key) != CookieKeySize {
		return nil, &ConfigError{Field: "cookie_key", Reason: fmt.Sprintf("must be %d bytes (got %d)", CookieKeySize, len(key))}
	}
	block, err := aes.NewCipher(deriveKey(key, "kith/oidc flow cookie v1"))
	if err != nil {
		return nil, fmt.Errorf("oidc: cookie cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("oidc: cookie cipher: %w", err)
	}
	return &sealer{aead: aead}, nil
}

// seal encrypts f for the cookie named name; the name is authenticated too.
func (s *sealer) seal(name string, f flowState) (string, error) {
	return s.sealJSON(name, f)
}

// sealJSON encrypts v, as JSON, under the name, which is authenticated
// too: a value sealed under one name does not open under another.
func (s *sealer) sealJSON(name string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("oidc: seal flow: %w", err)
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("oidc: seal flow: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(name))), nil
}

// errBadCookie: the cookie does not decode or authenticate.
var errBadCookie = errors.New("cookie does not authenticate")

// open decrypts a cookie value sealed for name and checks its expiry.
func (s *sealer) open(name, value string, now time.Time) (flowState, error) {
	var f flowState
	if err := s.openJSON(name, value, &f); err != nil {
		return flowState{}, err
	}
	if !now.Before(time.Unix(f.Expires, 0)) {
		return flowState{}, errors.New("login took longer than " + FlowLifetime.String())
	}
	return f, nil
}

// openJSON decrypts a value sealed under name into v.
func (s *sealer) openJSON(name, value string, v any) error {
	if len(value) > maxCookieLen {
		return errBadCookie
	}
	b, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(b) < s.aead.NonceSize()+s.aead.Overhead() {
		return errBadCookie
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, b[:n], b[n:], []byte(name))
	if err != nil {
		return errBadCookie
	}
	if err := json.Unmarshal(plain, v); err != nil {
		return errBadCookie
	}
	return nil
}

// cookieName is the flow cookie's name for a provider. On https the
// __Host- prefix makes browsers insist on Secure, Path=/ and no Domain, so
// a sibling subdomain cannot plant its own.
func cookieName(provider string, secure bool) string {
	if secure {
		return "__Host-kith-oidc-" + provider
	}
	return "kith-oidc-" + provider
}

// flowCookie builds the Set-Cookie for a sealed flow.
func flowCookie(name, value string, secure bool, expires time.Time) *http.Cookie {
	return &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     "/",
		Expires:  expires,
		MaxAge:   int(FlowLifetime / time.Second),
		HttpOnly: true,
		Secure:   secure,
		// Lax: the callback is a top-level GET from the provider's site,
		// which Lax cookies accompany; cross-site subrequests and POSTs do
		// not carry it.
		SameSite: http.SameSiteLaxMode,
	}
}

// clearCookie builds the Set-Cookie that deletes a flow cookie.
func clearCookie(name string, secure bool) *http.Cookie {
	return &http.Cookie{
		Name:     name,
		Value:    "",
		Path:     "/",
		Expires:  time.Unix(1, 0),
		MaxAge:   -1,
		HttpOnly: true,
		Secure:   secure,
		SameSite: http.SameSiteLaxMode,
	}
}
