package oidc

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestBeginWithACallersNonce: a consent login sends the nonce its caller
// chose (a commitment to a statement), the provider signs it into the ID
// token, Finish checks it as any nonce, and the pending data comes back
// sealed; a nonce too short to hold 128 bits is refused before any
// redirect.
func TestBeginWithACallersNonce(t *testing.T) {
	h := defaultHarness(t)
	b := h.browser()
	const nonce = "bm9uY2UtY29tbWl0dGluZy10by1hLXN0YXRlbWVudA"
	const pending = `{"a":"add","s":"the statement"}`
	u := h.authorizeAt(b, h.rp.URL+"/login/"+clientID+"?next=/account&nonce="+nonce+"&pending="+url.QueryEscape(pending), alice)
	login, err := h.callback(b, u)
	if err != nil {
		t.Fatal(err)
	}
	if login.Nonce != nonce || login.Pending != pending {
		t.Errorf("Nonce %q, Pending %q; want %q, %q", login.Nonce, login.Pending, nonce, pending)
	}
	c, err := VerifyEvidence(login.RawIDToken, login.SigningKey, h.op.Issuer, clientID)
	if err != nil || c.Nonce != nonce {
		t.Errorf("the ID token's nonce: %v, %v", c, err)
	}

	c2 := h.browser()
	c2.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c2.Get(h.rp.URL + "/login/" + clientID + "?nonce=short")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a short nonce: %s, want the begin refused", resp.Status)
	}
	resp, err = c2.Get(h.rp.URL + "/login/" + clientID + "?pending=" + strings.Repeat("x", MaxPending+1))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("too much pending data: %s, want the begin refused", resp.Status)
	}
}
