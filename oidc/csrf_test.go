package oidc

import (
	"bytes"
	"testing"
)

func TestCSRF(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	other := bytes.Repeat([]byte{8}, 32)
	tok := CSRFToken(key, "session-1")
	if tok == "" || !CheckCSRF(key, "session-1", tok) {
		t.Fatalf("own token %q refused", tok)
	}
	if CSRFToken(key, "session-1") != tok {
		t.Error("token is not stable for a session")
	}
	bad := []byte(tok)
	bad[0] ^= 1
	for name, ok := range map[string]bool{
		"other session": CheckCSRF(key, "session-2", tok),
		"other key":     CheckCSRF(other, "session-1", tok),
		"tampered":      CheckCSRF(key, "session-1", string(bad)),
		"truncated":     CheckCSRF(key, "session-1", tok[:len(tok)-2]),
		"empty token":   CheckCSRF(key, "session-1", ""),
		"no session":    CheckCSRF(key, "", CSRFToken(key, "")),
		"short key":     CheckCSRF(key[:16], "session-1", CSRFToken(key[:16], "session-1")),
		"not base64":    CheckCSRF(key, "session-1", "!!!"),
	} {
		if ok {
			t.Errorf("%s: accepted", name)
		}
	}
	if CSRFToken(key[:16], "s") != "" || CSRFToken(key, "") != "" {
		t.Error("a token is made from a short key or an empty session")
	}
}
