package web_test

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/web"
)

// withQuery returns u with key set to value, or removed when value is "".
func withQuery(u *url.URL, key, value string) string {
	v := *u
	q := v.Query()
	if value == "" {
		q.Del(key)
	} else {
		q.Set(key, value)
	}
	v.RawQuery = q.Encode()
	return v.String()
}

// TestRefusedCallbacksSayWhyAndStoreNothing drives forged and broken
// callbacks through the web handler: each page says why, no session
// cookie is set and no evidence is written.
func TestRefusedCallbacksSayWhyAndStoreNothing(t *testing.T) {
	s := newSite(t, web.Options{})
	for _, tc := range []struct {
		name string
		run  func(b *browser) page
		want string
	}{
		{"MissingState", func(b *browser) page {
			cb := b.approve(b.beginAtProvider("kith", "/"), alice)
			return b.get(withQuery(cb, "state", ""))
		}, "state mismatch"},
		{"WrongState", func(b *browser) page {
			cb := b.approve(b.beginAtProvider("kith", "/"), alice)
			return b.get(withQuery(cb, "state", "c3RhdGUtb2YtYW5vdGhlci1sb2dpbg"))
		}, "state mismatch"},
		{"CallbackOfAnotherBrowser", func(b *browser) page {
			other := s.browser()
			cb := other.approve(other.beginAtProvider("kith", "/"), alice)
			return b.get(cb.String())
		}, "not started in this browser"},
		{"ReplayedCode", func(b *browser) page {
			cb := b.approve(b.beginAtProvider("kith", "/"), alice)
			flow := b.cookie("kith-oidc-kith")
			if first := b.get(cb.String()); first.url.Path != "/login/choose-handle" {
				t.Fatalf("the genuine callback ended at %s", first.url)
			}
			// A fresh browser, with the flow cookie kept from before and
			// the same callback: the provider refuses the spent code.
			thief := s.browser()
			u, _ := url.Parse(s.srv.URL)
			thief.c.Jar.SetCookies(u, []*http.Cookie{{Name: flow.Name, Value: flow.Value, Path: "/", Secure: true}})
			return thief.get(cb.String())
		}, "authorization code was already used"},
		{"UnknownSigningKey", func(b *browser) page {
			if err := s.op.SignWithUnpublishedKey(true); err != nil {
				t.Fatal(err)
			}
			defer s.op.SignWithUnpublishedKey(false)
			return b.login("kith", "/", alice)
		}, "signed by a key the provider does not publish"},
		{"ExpiredIDToken", func(b *browser) page {
			return b.login("stale", "/", alice)
		}, "ID token has expired"},
		{"ProviderDenied", func(b *browser) page {
			cb := b.approve(b.beginAtProvider("kith", "/"), alice)
			u, _ := url.Parse(withQuery(cb, "code", ""))
			return b.get(withQuery(u, "error", "access_denied"))
		}, "did not complete the login"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := s.browser()
			p := tc.run(b)
			if p.status != http.StatusForbidden || !strings.Contains(p.body, tc.want) || !strings.Contains(p.body, "Nothing was stored") {
				t.Errorf("status %d, want 403 saying %q:\n%s", p.status, tc.want, p.body)
			}
			if c := b.cookie("kith-session"); c != nil && tc.name != "ReplayedCode" {
				t.Errorf("a session cookie was set")
			}
			if n := s.logLen(); n != 0 {
				t.Errorf("%d evidence records written", n)
			}
		})
	}
}

// TestPOSTWithoutValidCSRFTokenChangesNothing sends every state-changing
// form without its token, with a token of another session, and with a
// garbled one: each is refused with 403 and changes nothing.
func TestPOSTWithoutValidCSRFTokenChangesNothing(t *testing.T) {
	s := newSite(t, web.Options{})
	b := s.browser()
	acct := b.signUp(alice, "alice")
	other := s.browser()
	otherToken := other.signUp(bob, "bob").csrf(t)
	good := acct.csrf(t)
	garbled := []byte(good)
	garbled[3] ^= 1
	keyPath, pub := sshKey(t)
	_ = keyPath
	armored := "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmDMEZ\n-----END PGP PUBLIC KEY BLOCK-----\n"
	forms := []struct {
		path string
		form url.Values
	}{
		{"/logout", url.Values{}},
		{"/account/challenge", url.Values{"kind": {"ssh"}, "key": {pub}}},
		{"/account/unlink", url.Values{"kind": {"oidc"}, "value": {s.op.Issuer + " " + alice.Subject}}},
		{"/account/sessions/end", url.Values{}},
		{"/account/delete", url.Values{"confirm": {"alice"}}},
		{"/login/other", url.Values{"next": {"/account"}}},
		{"/upload", url.Values{"keytext": {armored}}},
	}
	before := s.logLen()
	for _, f := range forms {
		for _, tok := range []string{"", otherToken, string(garbled), base64.RawURLEncoding.EncodeToString([]byte("x"))} {
			form := url.Values{}
			for k, v := range f.form {
				form[k] = v
			}
			if tok != "" {
				form.Set("csrf", tok)
			}
			p := b.post(f.path, form)
			if p.status != http.StatusForbidden || !strings.Contains(p.body, "Nothing was changed") {
				t.Errorf("POST %s with token %q: %d at %s", f.path, tok, p.status, p.url)
			}
		}
	}
	if s.logLen() != before {
		t.Errorf("refused POSTs wrote evidence")
	}
	if p := b.get("/account"); p.url.Path != "/account" {
		t.Errorf("the session did not survive refused POSTs: at %s", p.url)
	}
	// A visitor's upload needs the token of the visitor cookie.
	v := s.browser()
	form := v.get("/upload")
	if p := v.post("/upload", url.Values{"keytext": {armored}}); p.status != http.StatusForbidden {
		t.Errorf("visitor upload without token: %d", p.status)
	}
	if p := v.post("/upload", url.Values{"keytext": {armored}, "csrf": {form.csrf(t)}}); p.status == http.StatusForbidden {
		t.Errorf("visitor upload with its token refused")
	}
}

// TestLoginRefusesOpenRedirects: a next parameter that leaves the site
// ends at the home page.
func TestLoginRefusesOpenRedirects(t *testing.T) {
	s := newSite(t, web.Options{})
	s.browser().signUp(alice, "alice")
	for _, next := range []string{"//evil.example/", "https://evil.example/", "/\\evil.example", "/%2F%2Fevil.example", "javascript:alert(1)"} {
		b := s.browser()
		p := b.login("kith", next, alice)
		if p.url.Host != strings.TrimPrefix(s.srv.URL, "https://") || p.url.Path != "/" {
			t.Errorf("next=%q ended at %s", next, p.url)
		}
	}
	b := s.browser()
	if p := b.login("kith", "/u/alice", alice); p.url.Path != "/u/alice" {
		t.Errorf("a same-site next ended at %s", p.url)
	}
}

// TestSecretsNeverLogged runs logins, a link, refused callbacks and a
// logout with debug logging and searches the log for every secret.
func TestSecretsNeverLogged(t *testing.T) {
	s := newSite(t, web.Options{})
	b := s.browser()
	cb := b.approve(b.beginAtProvider("kith", "/"), alice)
	p := b.get(cb.String())
	pendingToken := b.cookie("kith-session").Value
	b.as = alice
	p = b.consent(b.post("/login/choose-handle", url.Values{"csrf": {p.csrf(t)}, "handle": {"alice"}}))
	token := b.cookie("kith-session").Value
	csrf := p.csrf(t)
	keyPath, pub := sshKey(t)
	b.linkSSHKey(keyPath, pub)
	bad := s.browser()
	cb2 := bad.approve(bad.beginAtProvider("kith", "/"), bob)
	bad.get(withQuery(cb2, "state", "forged"))
	b.post("/logout", url.Values{"csrf": {csrf}})

	recs, err := s.store.Log(t.Context(), 0, 10)
	if err != nil || len(recs) < 2 || recs[1].Method != identity.MethodOIDCLogin {
		t.Fatal(err)
	}
	idToken := string(recs[1].Signature)
	logs := s.logs.String()
	if !strings.Contains(logs, `"level":"DEBUG"`) || !strings.Contains(logs, "identity created") || !strings.Contains(logs, "login refused") {
		t.Fatalf("the log does not show the flow:\n%s", logs)
	}
	secrets := map[string]string{
		"client secret":         clientSecret,
		"session token":         token,
		"pending session token": pendingToken,
		"CSRF token":            csrf,
		"authorization code":    cb.Query().Get("code"),
		"second code":           cb2.Query().Get("code"),
		"ID token":              idToken,
		"ID token signature":    idToken[strings.LastIndexByte(idToken, '.')+1:],
		"CSRF key (hex)":        hex.EncodeToString(s.key),
		"CSRF key (base64)":     base64.StdEncoding.EncodeToString(s.key),
	}
	for name, v := range secrets {
		if len(v) < 8 {
			t.Fatalf("%s %q is too short to search for", name, v)
		}
		if strings.Contains(logs, v) {
			t.Errorf("the log contains the %s", name)
		}
	}
}

// TestUnprefixedCookiesAreIgnoredOverTLS: over TLS only the __Host-
// cookie names count. A sibling subdomain (or a plain-HTTP response) can
// plant kith-session or kith-csrf, but not __Host- ones: were the plain
// names read, an attacker could log a victim into the attacker's
// identity, or forge the victim's visitor forms.
func TestUnprefixedCookiesAreIgnoredOverTLS(t *testing.T) {
	s := newSite(t, web.Options{})
	attacker := s.browser()
	attacker.signUp(bob, "bob")
	session := attacker.cookie("kith-session")
	if session == nil || session.Name != "__Host-kith-session" {
		t.Fatalf("the attacker's session cookie: %+v", session)
	}
	visitor := s.browser()
	upload := visitor.get("/upload")
	csrf := visitor.cookie("kith-csrf")
	if csrf == nil || csrf.Name != "__Host-kith-csrf" {
		t.Fatalf("the visitor cookie: %+v", csrf)
	}
	token := upload.csrf(t)

	u, _ := url.Parse(s.srv.URL)
	victim := s.browser()
	victim.c.Jar.SetCookies(u, []*http.Cookie{{Name: "kith-session", Value: session.Value, Path: "/"}})
	if p := victim.get("/account"); p.url.Path != "/login" || strings.Contains(p.body, `<span id="handle">bob</span>`) {
		t.Errorf("a planted kith-session cookie logged the victim in: at %s", p.url)
	}
	victim = s.browser()
	victim.c.Jar.SetCookies(u, []*http.Cookie{{Name: "kith-csrf", Value: csrf.Value, Path: "/"}})
	armored := "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmDMEZ\n-----END PGP PUBLIC KEY BLOCK-----\n"
	if p := victim.post("/upload", url.Values{"keytext": {armored}, "csrf": {token}}); p.status != http.StatusForbidden {
		t.Errorf("a form with the token of a planted kith-csrf cookie was accepted: %d", p.status)
	}
}

// TestUnprefixedCookiesAreIgnoredWithSecureCookies: behind a TLS proxy
// (SecureCookies, requests arriving over plain HTTP) the plain names do
// not count either.
func TestUnprefixedCookiesAreIgnoredWithSecureCookies(t *testing.T) {
	s := newSite(t, web.Options{SecureCookies: true})
	attacker := s.browser()
	attacker.signUp(bob, "bob")
	token := attacker.cookie("kith-session").Value
	for _, name := range []string{"__Host-kith-session", "kith-session"} {
		req := httptest.NewRequest(http.MethodGet, "http://keys.example.org/account", nil)
		req.AddCookie(&http.Cookie{Name: name, Value: token})
		w := httptest.NewRecorder()
		s.web.ServeHTTP(w, req)
		loggedIn := w.Code == http.StatusOK && strings.Contains(w.Body.String(), `<span id="handle">bob</span>`)
		if want := name == "__Host-kith-session"; loggedIn != want {
			t.Errorf("GET /account over plain HTTP with cookie %s: %d, logged in %v, want %v", name, w.Code, loggedIn, want)
		}
	}
}
