// attacks_test.go: every way a callback can be wrong, each refused with its
// own error and no Login.

package oidc

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/oidc/oidctest"
)

// flowCookieOf returns the browser's flow cookie for Kith.
func (h *harness) flowCookieOf(b *http.Client) *http.Cookie {
	h.t.Helper()
	u, _ := url.Parse(h.rp.URL)
	for _, c := range b.Jar.Cookies(u) {
		if strings.Contains(c.Name, "kith-oidc-") {
			return c
		}
	}
	h.t.Fatal("no flow cookie in the browser")
	return nil
}

// setFlowCookie puts a flow cookie into the browser.
func (h *harness) setFlowCookie(b *http.Client, c *http.Cookie) {
	u, _ := url.Parse(h.rp.URL)
	b.Jar.SetCookies(u, []*http.Cookie{{Name: c.Name, Value: c.Value, Path: "/", Secure: true, HttpOnly: true}})
}

func withQuery(u *url.URL, key, value string) *url.URL {
	v := *u
	q := v.Query()
	if value == "" {
		q.Del(key)
	} else {
		q.Set(key, value)
	}
	v.RawQuery = q.Encode()
	return &v
}

func TestFinishRefusesMissingOrWrongState(t *testing.T) {
	h := defaultHarness(t)
	for _, tc := range []struct{ name, state string }{
		{"missing", ""},
		{"wrong", "c3RhdGUtb2YtYW5vdGhlci1sb2dpbg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := h.browser()
			cb := h.authorize(b, clientID, "/", alice)
			_, err := h.callback(b, withQuery(cb, "state", tc.state))
			wantErr(t, err, ErrState)
			// The cookie is spent: the genuine callback now fails too.
			_, err = h.callback(b, cb)
			wantErr(t, err, ErrNoLogin)
		})
	}
}

func TestFinishRefusesCallbackWithoutLogin(t *testing.T) {
	// A callback in a browser that never began this login (an attacker
	// sending a victim his own callback URL: login CSRF).
	h := defaultHarness(t)
	cb := h.authorize(h.browser(), clientID, "/", alice)
	_, err := h.callback(h.browser(), cb)
	wantErr(t, err, ErrNoLogin)
}

func TestFinishRefusesReplayedCallback(t *testing.T) {
	h := defaultHarness(t)
	b := h.browser()
	cb := h.authorize(b, clientID, "/", alice)
	cookie := h.flowCookieOf(b)
	if _, err := h.callback(b, cb); err != nil {
		t.Fatal(err)
	}
	// The same callback again: the cookie was deleted.
	_, err := h.callback(b, cb)
	wantErr(t, err, ErrNoLogin)
	// Again with a copy of the cookie kept from before: the provider
	// refuses the code it already exchanged.
	h.setFlowCookie(b, cookie)
	_, err = h.callback(b, cb)
	wantErr(t, err, ErrExchange)
	if !strings.Contains(err.Error(), "invalid_grant") {
		t.Errorf("replayed code: %v, want the provider's invalid_grant", err)
	}
}

func TestFinishRefusesSwappedCookies(t *testing.T) {
	h := defaultHarness(t)
	a, b := h.browser(), h.browser()
	cbA := h.authorize(a, clientID, "/", alice)
	cbB := h.authorize(b, clientID, "/", bob)
	cookieA, cookieB := h.flowCookieOf(a), h.flowCookieOf(b)

	t.Run("StateCatchesSwap", func(t *testing.T) {
		// B's callback with A's cookie: the state differs.
		h.setFlowCookie(b, cookieA)
		_, err := h.callback(b, cbB)
		wantErr(t, err, ErrState)
	})
	t.Run("NonceCatchesSubstitutedToken", func(t *testing.T) {
		// A's cookie with B's nonce, as if an attacker had made A's state
		// and verifier carry B's login: the code exchanges (state and PKCE
		// match), but the ID token's nonce is A's.
		p := h.provider(clientID)
		fa, err := p.sealer.open(cookieA.Name, cookieA.Value, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		fb, err := p.sealer.open(cookieB.Name, cookieB.Value, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		fa.Nonce = fb.Nonce
		v, err := p.sealer.seal(cookieA.Name, fa)
		if err != nil {
			t.Fatal(err)
		}
		h.setFlowCookie(a, &http.Cookie{Name: cookieA.Name, Value: v})
		_, err = h.callback(a, cbA)
		wantErr(t, err, ErrIDToken, ErrNonce)
	})
}

func TestFinishRefusesBadCookies(t *testing.T) {
	h := defaultHarness(t)
	t.Run("Tampered", func(t *testing.T) {
		b := h.browser()
		cb := h.authorize(b, clientID, "/", alice)
		c := h.flowCookieOf(b)
		v := []byte(c.Value)
		v[len(v)/2] ^= 0x01
		h.setFlowCookie(b, &http.Cookie{Name: c.Name, Value: string(v)})
		_, err := h.callback(b, cb)
		wantErr(t, err, ErrNoLogin)
	})
	t.Run("Expired", func(t *testing.T) {
		b := h.browser()
		cb := h.authorize(b, clientID, "/", alice)
		h.clock.advance(FlowLifetime + time.Second)
		defer h.clock.advance(-FlowLifetime - time.Second)
		_, err := h.callback(b, cb)
		wantErr(t, err, ErrNoLogin)
	})
	t.Run("OtherKey", func(t *testing.T) {
		b := h.browser()
		cb := h.authorize(b, clientID, "/", alice)
		c := h.flowCookieOf(b)
		other, _ := newSealer(make([]byte, CookieKeySize))
		f := flowState{Provider: clientID, State: cb.Query().Get("state"), Nonce: "n", Verifier: "v", Next: "/", Expires: time.Now().Add(time.Minute).Unix()}
		v, _ := other.seal(c.Name, f)
		h.setFlowCookie(b, &http.Cookie{Name: c.Name, Value: v})
		_, err := h.callback(b, cb)
		wantErr(t, err, ErrNoLogin)
	})
}

func TestFinishReportsProviderError(t *testing.T) {
	h := defaultHarness(t)
	b := h.browser()
	cb := h.authorize(b, clientID, "/", alice)
	denied := withQuery(withQuery(cb, "code", ""), "error", "access_denied")
	_, err := h.callback(b, denied)
	wantErr(t, err, ErrDenied)
	if !strings.Contains(err.Error(), "access_denied") {
		t.Errorf("error %q does not say access_denied", err)
	}
}

func TestTokenForAnotherAudience(t *testing.T) {
	h := newHarness(t, []oidctest.Client{
		{ID: clientID, Secret: clientSecret},
		{ID: "other", Secret: clientSecret},
		{ID: "crooked", Secret: clientSecret, Audience: []string{"someone-else"}},
	},
		ProviderConfig{Name: clientID, ClientID: clientID},
		ProviderConfig{Name: "other", ClientID: "other"},
		ProviderConfig{Name: "crooked", ClientID: "crooked"},
	)
	t.Run("ExtraAudienceWithAuthorizedParty", func(t *testing.T) {
		// The provider adds an audience but names Kith as the authorized
		// party (OpenID Connect Core 3.1.3.7): acceptable.
		login, err := h.login(h.browser(), "crooked", "/", alice)
		if err != nil {
			t.Fatalf("aud [someone-else crooked], azp crooked: %v", err)
		}
		c, err := VerifyEvidence(login.RawIDToken, login.SigningKey, h.op.Issuer, "crooked")
		if err != nil || len(c.Audience) != 2 || c.AuthorizedParty != "crooked" {
			t.Errorf("VerifyEvidence = %+v, %v", c, err)
		}
	})
	t.Run("TokenOfAnotherClientSubstituted", func(t *testing.T) {
		// A token the provider really issued, but to the client "other":
		// Kith's client must not accept it.
		login, err := h.login(h.browser(), "other", "/", alice)
		if err != nil {
			t.Fatal(err)
		}
		p := h.provider(clientID)
		d, err := p.discover(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = p.verifyIDToken(t.Context(), d, login.RawIDToken, "")
		wantErr(t, err, ErrIDToken, ErrAudience)
	})
}

func TestExpiredTokenRefused(t *testing.T) {
	h := newHarness(t, []oidctest.Client{{ID: "stale", Secret: clientSecret, IDTokenLifetime: -time.Hour}},
		ProviderConfig{Name: "stale", ClientID: "stale"})
	_, err := h.login(h.browser(), "stale", "/", alice)
	wantErr(t, err, ErrIDToken, ErrExpired)

	// As evidence, an expired token is still good.
	key := rsaKey(t)
	raw := signJWT(t, key, "k1", idClaims("https://idp.example", "kith", time.Now().Add(-24*time.Hour)))
	jwk := jwkOf(t, key, "k1")
	if _, err := VerifyEvidence(raw, jwk, "https://idp.example", "kith"); err != nil {
		t.Errorf("VerifyEvidence refuses an expired token: %v", err)
	}
}

func TestTokenSignedByUnknownKey(t *testing.T) {
	h := defaultHarness(t)
	t.Run("ProviderSignsWithUnpublishedKey", func(t *testing.T) {
		if err := h.op.SignWithUnpublishedKey(true); err != nil {
			t.Fatal(err)
		}
		defer h.op.SignWithUnpublishedKey(false)
		_, err := h.login(h.browser(), clientID, "/", alice)
		wantErr(t, err, ErrIDToken, ErrUnknownKey)
	})

	// Forged tokens fed straight to the verifier.
	p := h.provider(clientID)
	d, err := p.discover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	keys, err := d.keys.current(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	realKID := keys[0].key.KeyID
	forger := rsaKey(t)
	good := idClaims(h.op.Issuer, clientID, time.Now().Add(time.Hour))
	t.Run("ForgedWithNewKeyID", func(t *testing.T) {
		_, _, err := p.verifyIDToken(t.Context(), d, signJWT(t, forger, "forged", good), "")
		wantErr(t, err, ErrIDToken, ErrUnknownKey)
	})
	t.Run("ForgedWithProvidersKeyID", func(t *testing.T) {
		_, _, err := p.verifyIDToken(t.Context(), d, signJWT(t, forger, realKID, good), "")
		wantErr(t, err, ErrIDToken, ErrSignature)
	})
	t.Run("Unsigned", func(t *testing.T) {
		parts := strings.Split(signJWT(t, forger, realKID, good), ".")
		_, _, err := p.verifyIDToken(t.Context(), d, "eyJhbGciOiJub25lIn0."+parts[1]+".", "")
		wantErr(t, err, ErrIDToken, ErrSignature)
	})
}

func TestIssuerMismatch(t *testing.T) {
	h := defaultHarness(t)
	// The same provider configured with a trailing slash: its discovery
	// document names another issuer.
	cfg := ProviderConfig{Name: "slash", ClientID: clientID, Issuer: h.op.Issuer + "/"}
	h.fill(&cfg)
	_, err := NewProvider(t.Context(), cfg, h.options())
	wantErr(t, err, ErrProviderUnavailable, ErrIssuer)

	opts := h.options()
	opts.RequireDiscovery = false
	p, err := NewProvider(t.Context(), cfg, opts)
	if err != nil {
		t.Fatalf("NewProvider without RequireDiscovery: %v", err)
	}
	err = p.Begin(newRecorder(), httpRequest(h.rp.URL+"/login/slash"), "/")
	wantErr(t, err, ErrProviderUnavailable, ErrIssuer)

	// A token of another issuer, signed by a key the provider publishes,
	// is checked too (checkIssuerAudience runs on every token).
	c := &Claims{Issuer: "https://idp.example", Audience: []string{clientID}}
	wantErr(t, checkIssuerAudience(c, h.op.Issuer, clientID), ErrIDToken, ErrIssuer)
	c = &Claims{Issuer: h.op.Issuer, Audience: []string{clientID, "other"}, AuthorizedParty: "other"}
	wantErr(t, checkIssuerAudience(c, h.op.Issuer, clientID), ErrIDToken, ErrAudience)
	c.AuthorizedParty = clientID
	if err := checkIssuerAudience(c, h.op.Issuer, clientID); err != nil {
		t.Errorf("two audiences with azp = client: %v", err)
	}
}
