package api_test

import (
	"net/http"
	"testing"

	"github.com/kith-keyserver/kith/web/api"
)

// TestHandleLookupsFoldCase: /users/NORA.keys is nora's, as code-hosting
// sites do it, and /users/nora sends a browser to the profile; a claim
// does not fold (the statement names the handle as it will be).
func TestHandleLookupsFoldCase(t *testing.T) {
	k := newKith(t)
	key := newSSHKey(t, t.TempDir(), "ed25519")
	st := k.challenge("nora", key.pub, "claim")
	if s, code := k.call("POST", "/api/v1/identities", api.ClaimRequest{SignedStatement: api.SignedStatement{Statement: st, Signature: key.sign(t, st, "kith")}}, nil); s != http.StatusCreated {
		t.Fatalf("claim: %d %s", s, code)
	}
	_, want := k.get("/users/nora.keys")
	if want == "" {
		t.Fatal("nora serves no key")
	}
	for _, p := range []string{"/users/NORA.keys", "/users/Nora.keys"} {
		if s, got := k.get(p); s != http.StatusOK || got != want {
			t.Errorf("GET %s: %d %q, want %q", p, s, got, want)
		}
	}
	if s, _ := k.get("/users/%E2%84%AAora.keys"); s != http.StatusNotFound {
		t.Errorf("a Kelvin sign folded into a handle: %d", s)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{"/users/nora", "/users/NORA"} {
		resp, err := noRedirect.Get(k.url + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/u/nora" {
			t.Errorf("GET %s: %d to %q, want 301 to /u/nora", p, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if s, code := k.call("POST", "/api/v1/challenges", api.ChallengeRequest{Handle: "Other", Factor: key.pub, Purpose: "claim"}, nil); s != http.StatusBadRequest || code != "bad_handle" {
		t.Errorf("claim of an upper-case handle: %d %s", s, code)
	}
}
