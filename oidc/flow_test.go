package oidc

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/kith-keyserver/kith/oidc/oidctest"
)

func TestLoginThroughRealProvider(t *testing.T) {
	h := defaultHarness(t)
	b := h.browser()
	start := time.Now().Add(-time.Minute)
	login, err := h.login(b, clientID, "/account?tab=keys", alice)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ name, got, want string }{
		{"Provider", login.Provider, clientID},
		{"Issuer", login.Issuer, h.op.Issuer},
		{"Subject", login.Subject, alice.Subject},
		{"Email", login.Email, alice.Email},
		{"PreferredUsername", login.PreferredUsername, alice.Username},
		{"Name", login.Name, alice.Name},
		{"ProposedHandle", login.ProposedHandle, "alice-liddell"},
		{"Next", login.Next, "/account?tab=keys"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if !login.EmailVerified {
		t.Error("EmailVerified = false")
	}
	for name, tm := range map[string]time.Time{"AuthTime": login.AuthTime, "IssuedAt": login.IssuedAt} {
		if tm.Before(start) || tm.After(time.Now().Add(time.Minute)) {
			t.Errorf("%s = %v, not now", name, tm)
		}
	}
	if !login.Expiry.After(time.Now()) {
		t.Errorf("Expiry = %v, in the past", login.Expiry)
	}

	// The raw token is a JWS whose header names the stored JWK, which is
	// the public key only.
	jws, err := jose.ParseSignedCompact(login.RawIDToken, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatalf("RawIDToken: %v", err)
	}
	var jwk map[string]any
	if err := json.Unmarshal(login.SigningKey, &jwk); err != nil {
		t.Fatalf("SigningKey: %v: %s", err, login.SigningKey)
	}
	if jwk["kid"] != jws.Signatures[0].Header.KeyID || jwk["kty"] != "RSA" {
		t.Errorf("SigningKey %s does not match the token's key %q", login.SigningKey, jws.Signatures[0].Header.KeyID)
	}
	if _, ok := jwk["d"]; ok {
		t.Error("SigningKey holds a private key")
	}

	// The flow cookie is gone.
	u, _ := url.Parse(h.rp.URL)
	for _, c := range b.Jar.Cookies(u) {
		if strings.Contains(c.Name, "kith-oidc") {
			t.Errorf("flow cookie %s left after Finish", c.Name)
		}
	}

	// The evidence verifies offline, and not with a byte changed.
	claims, err := VerifyEvidence(login.RawIDToken, login.SigningKey, h.op.Issuer, clientID)
	if err != nil {
		t.Fatalf("VerifyEvidence: %v", err)
	}
	if claims.Subject != alice.Subject || claims.Email != alice.Email || claims.KeyID == "" || claims.Algorithm != "RS256" {
		t.Errorf("VerifyEvidence claims = %+v", claims)
	}
	t.Run("EvidenceRefusesFlippedByte", func(t *testing.T) {
		raw := []byte(login.RawIDToken)
		for _, i := range []int{strings.IndexByte(login.RawIDToken, '.') + 5, strings.LastIndexByte(login.RawIDToken, '.') + 5, len(raw) - 3} {
			bad := append([]byte(nil), raw...)
			bad[i] ^= 0x01
			if bad[i] == '.' {
				bad[i] = 'A'
			}
			if _, err := VerifyEvidence(string(bad), login.SigningKey, h.op.Issuer, clientID); err == nil {
				t.Errorf("a token with byte %d flipped verifies", i)
			}
		}
	})
	t.Run("EvidenceRefusesOtherIssuerAudienceKey", func(t *testing.T) {
		_, err := VerifyEvidence(login.RawIDToken, login.SigningKey, h.op.Issuer+"/", clientID)
		wantErr(t, err, ErrIDToken, ErrIssuer)
		_, err = VerifyEvidence(login.RawIDToken, login.SigningKey, h.op.Issuer, "someone-else")
		wantErr(t, err, ErrIDToken, ErrAudience)
		other := rsaJWK(t, jwk["kid"].(string))
		_, err = VerifyEvidence(login.RawIDToken, other, h.op.Issuer, clientID)
		wantErr(t, err, ErrIDToken, ErrSignature)
	})
}

func TestBeginCookie(t *testing.T) {
	h := defaultHarness(t)
	resp := beginResponse(t, h, "/x")
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("Begin answered %s", resp.Status)
	}
	loc, _ := resp.Location()
	q := loc.Query()
	for _, k := range []string{"state", "nonce", "code_challenge", "redirect_uri", "client_id"} {
		if q.Get(k) == "" {
			t.Errorf("authorization URL has no %s: %s", k, loc)
		}
	}
	if q.Get("code_challenge_method") != "S256" || q.Get("response_type") != "code" || !strings.Contains(q.Get("scope"), "openid") {
		t.Errorf("authorization URL %s", loc)
	}
	cs := resp.Cookies()
	if len(cs) != 1 {
		t.Fatalf("Begin set %d cookies", len(cs))
	}
	c := cs[0]
	if c.Name != "__Host-kith-oidc-kith" || !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.MaxAge != 600 || c.Domain != "" {
		t.Errorf("flow cookie %+v", c)
	}
	for _, secret := range []string{q.Get("state"), q.Get("nonce"), "/x"} {
		if strings.Contains(c.Value, secret) {
			t.Errorf("flow cookie shows %q in the clear", secret)
		}
	}
}

func TestBeginCookieNotSecureOnPlainHTTP(t *testing.T) {
	h := defaultHarness(t)
	cfg := ProviderConfig{Name: "plain", ClientID: clientID, RedirectURL: "http://127.0.0.1:9/login/plain/callback"}
	h.fill(&cfg)
	p, err := NewProvider(t.Context(), cfg, h.options())
	if err != nil {
		t.Fatal(err)
	}
	w := newRecorder()
	if err := p.Begin(w, httpRequest("http://127.0.0.1:9/login/plain"), ""); err != nil {
		t.Fatal(err)
	}
	c := w.Result().Cookies()[0]
	if c.Name != "kith-oidc-plain" || c.Secure || !c.HttpOnly {
		t.Errorf("plain-http flow cookie %+v", c)
	}
}

func TestOpenRedirectRefusedInFlow(t *testing.T) {
	h := defaultHarness(t)
	for _, next := range []string{"//evil.example/x", "https://evil.example/", "/\\evil.example", "javascript:alert(1)", "/%2F%2Fevil.example"} {
		login, err := h.login(h.browser(), clientID, next, alice)
		if err != nil {
			t.Fatal(err)
		}
		if login.Next != "/" {
			t.Errorf("next %q became %q, want /", next, login.Next)
		}
	}
}

func TestEmailDomains(t *testing.T) {
	h := newHarness(t, []oidctest.Client{{ID: "corp", Secret: clientSecret}},
		ProviderConfig{Name: "corp", ClientID: "corp", AllowedEmailDomains: []string{"Example.ORG"}, HandleClaim: HandleClaimEmail})
	login, err := h.login(h.browser(), "corp", "/", alice)
	if err != nil {
		t.Fatalf("alice@example.org refused: %v", err)
	}
	if login.ProposedHandle != "alice" {
		t.Errorf("ProposedHandle from email = %q, want alice", login.ProposedHandle)
	}
	// bob@example.com is in another domain, and not verified.
	_, err = h.login(h.browser(), "corp", "/", bob)
	wantErr(t, err, ErrEmailDomain)
}
