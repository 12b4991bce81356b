package oidc

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

// TestSecretsNeverLogged runs logins, good and refused, with debug logging,
// and searches the log for every secret that passed through.
func TestSecretsNeverLogged(t *testing.T) {
	h := defaultHarness(t)
	b := h.browser()
	cb := h.authorize(b, clientID, "/account", alice)
	cookie := h.flowCookieOf(b)
	login, err := h.login(h.browser(), clientID, "/", alice) // a second, complete login
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.callback(b, cb); err != nil {
		t.Fatal(err)
	}
	// Refused ones: a replayed code and a wrong state.
	h.setFlowCookie(b, cookie)
	_, errReplay := h.callback(b, cb)
	wantErr(t, errReplay, ErrExchange)
	b2 := h.browser()
	cb2 := h.authorize(b2, clientID, "/", bob)
	_, errState := h.callback(b2, withQuery(cb2, "state", "forged"))
	wantErr(t, errState, ErrState)

	logs := h.logText()
	if !strings.Contains(logs, `"level":"DEBUG"`) || !strings.Contains(logs, "login verified") || !strings.Contains(logs, "login refused") {
		t.Fatalf("the log does not show the logins:\n%s", logs)
	}
	secrets := map[string]string{
		"client secret":          clientSecret,
		"cookie key (hex)":       hex.EncodeToString(h.key),
		"cookie key (base64)":    base64.StdEncoding.EncodeToString(h.key),
		"cookie key (base64url)": base64.RawURLEncoding.EncodeToString(h.key),
		"cookie key (raw)":       string(h.key),
		"authorization code":     cb.Query().Get("code"),
		"second code":            cb2.Query().Get("code"),
		"state":                  cb.Query().Get("state"),
		"flow cookie":            cookie.Value,
		"raw ID token":           login.RawIDToken,
		"ID token signature":     login.RawIDToken[strings.LastIndexByte(login.RawIDToken, '.')+1:],
	}
	for name, s := range secrets {
		if len(s) < 8 {
			t.Fatalf("%s %q is too short to search for", name, s)
		}
		if strings.Contains(logs, s) {
			t.Errorf("the log contains the %s", name)
		}
	}
	// Nor do the errors a caller may log or show.
	for _, e := range []error{errReplay, errState} {
		for name, s := range secrets {
			if strings.Contains(e.Error(), s) {
				t.Errorf("an error contains the %s", name)
			}
		}
	}
}
