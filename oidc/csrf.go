// csrf.go: tokens against cross-site request forgery for state-changing
// forms. A token is an HMAC of the session ID under a server key: the web
// package puts it in a hidden field and checks it on submit. It needs no
// storage, and a page from another site cannot compute it (it knows neither
// the key nor the victim's session ID).

package oidc

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
)

// MinCSRFKeySize is the shortest key CSRFToken and CheckCSRF accept.
const MinCSRFKeySize = 32

// CSRFToken returns the CSRF token for a session: an HMAC-SHA256 of
// sessionID under a key derived from key (so the key may be shared with
// other purposes, e.g. Options.CookieKey). The token is valid as long as the
// session is; rotate the session ID at login and logout. It returns "" when
// key is shorter than MinCSRFKeySize or sessionID is empty, which no check
// accepts.
func CSRFToken(key []byte, sessionID string) string {
	if len(key) < MinCSRFKeySize || sessionID == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(csrfMAC(key, sessionID))
}

// CheckCSRF reports whether token is the CSRF token of sessionID, in
// constant time.
func CheckCSRF(key []byte, sessionID, token string) bool {
	if len(key) < MinCSRFKeySize || sessionID == "" || token == "" {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return false
	}
	return hmac.Equal(got, csrfMAC(key, sessionID))
}

func csrfMAC(key []byte, sessionID string) []byte {
	m := hmac.New(sha256.New, deriveKey(key, "kith/oidc csrf v1"))
	m.Write([]byte(sessionID))
	return m.Sum(nil)
}
