package web_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/session"
	"github.com/kith-keyserver/kith/web"
)

// TestSessionCookieIsOpaqueSecureHttpOnlyLax checks the cookie a login
// sets and that the store keeps only the token's hash.
func TestSessionCookieIsOpaqueSecureHttpOnlyLax(t *testing.T) {
	s := newSite(t, web.Options{SessionLifetime: 48 * time.Hour})
	b := s.browser()
	p := b.login("kith", "/", alice)
	// Choosing the handle sends the browser to approve the claim at the
	// provider; the session's cookie comes with the callback.
	cb := b.approve(b.atProvider(b.post("/login/choose-handle", url.Values{"csrf": {p.csrf(t)}, "handle": {"alice"}})), alice)
	stop := *b.c
	stop.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := stop.Get(cb.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var c *http.Cookie
	for _, sc := range resp.Cookies() {
		if sc.Name == "__Host-kith-session" && sc.Value != "" {
			c = sc
		}
	}
	if c == nil {
		t.Fatalf("no __Host-kith-session cookie set: %v", resp.Header["Set-Cookie"])
	}
	raw, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil || len(raw) < 32 {
		t.Errorf("token %d bytes, want at least 32 random bytes", len(raw))
	}
	if !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Domain != "" {
		t.Errorf("cookie %+v: want Secure, HttpOnly, SameSite=Lax, Path=/, no Domain", c)
	}
	if c.MaxAge != int((48 * time.Hour).Seconds()) {
		t.Errorf("MaxAge %d, want 48h", c.MaxAge)
	}
	ss, err := s.store.Session(t.Context(), session.Hash(c.Value), time.Now())
	if err != nil || ss.Handle != "alice" {
		t.Fatalf("the store does not hold the session under the token's hash: %v", err)
	}
	if strings.Contains(string(ss.TokenHash), c.Value) || strings.Contains(string(ss.Login), c.Value) {
		t.Errorf("the store holds the token itself")
	}
}

// TestIdleSessionEnds: with an idle timeout, a session unused for longer
// ends.
func TestIdleSessionEnds(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := newSite(t, web.Options{SessionIdle: time.Hour, Now: clock})
	b := s.browser()
	b.signUp(alice, "alice")
	mu.Lock()
	now = now.Add(50 * time.Minute)
	mu.Unlock()
	if p := b.get("/account"); p.url.Path != "/account" {
		t.Fatalf("session ended before its idle timeout")
	}
	mu.Lock()
	now = now.Add(59 * time.Minute) // used 59 minutes ago
	mu.Unlock()
	if p := b.get("/account"); p.url.Path != "/account" {
		t.Fatalf("use did not extend the idle timeout")
	}
	mu.Lock()
	now = now.Add(61 * time.Minute)
	mu.Unlock()
	if p := b.get("/account"); p.url.Path != "/login" {
		t.Fatalf("an idle session still works")
	}
}

// TestUnlinkAndLogOutEverywhere unlinks an SSH key and then ends every
// session of the identity.
func TestUnlinkAndLogOutEverywhere(t *testing.T) {
	s := newSite(t, web.Options{})
	b := s.browser()
	b.signUp(alice, "alice")
	keyPath, pub := sshKey(t)
	b.linkSSHKey(keyPath, pub)
	other := s.browser()
	other.login("kith", "/account", alice)

	acct := b.get("/account")
	_, a, _, _ := s.svc.Lookup(t.Context(), "alice")
	keys := a.Of(identity.KindSSH, identity.LevelProven)
	if len(keys) != 1 {
		t.Fatalf("proven keys: %+v", keys)
	}
	// The account the session logged in with cannot be unlinked from it.
	if p := b.post("/account/unlink", url.Values{"csrf": {acct.csrf(t)}, "kind": {"oidc"}, "value": {s.op.Issuer + " " + alice.Subject}}); p.status != http.StatusConflict {
		t.Errorf("unlinking the session's own account: %d", p.status)
	}
	p := b.consent(b.post("/account/unlink", url.Values{"csrf": {acct.csrf(t)}, "kind": {"ssh"}, "value": {keys[0].Factor.Value}}))
	if p.url.Path != "/account" || !strings.Contains(p.body, "The factor is unlinked") {
		t.Fatalf("unlink: %d at %s:\n%s", p.status, p.url, p.body)
	}
	_, a, _, _ = s.svc.Lookup(t.Context(), "alice")
	if st, _ := a.Status(keys[0].Factor); st.Level != identity.LevelRevoked {
		t.Errorf("the SSH key is %s after unlinking", st.Level)
	}
	if n := strings.Count(p.body, `<td data-label="Logged in with">kith`); n != 2 {
		t.Errorf("the account page lists %d sessions, want 2", n)
	}
	if p := b.post("/account/sessions/end", url.Values{"csrf": {p.csrf(t)}}); p.url.Path != "/" {
		t.Fatalf("log out everywhere ended at %s", p.url)
	}
	for _, br := range []*browser{b, other} {
		if p := br.get("/account"); p.url.Path != "/login" {
			t.Errorf("a session survived logging out everywhere")
		}
	}
}

// TestSessionEndsWhenItsAccountIsUnlinked: a session acts for its
// identity only while the account it was opened with is proven for it.
// Once another of the identity's sessions unlinks that account, the
// session can neither end the others nor reach the account page, and its
// row is gone.
func TestSessionEndsWhenItsAccountIsUnlinked(t *testing.T) {
	s := newSite(t, web.Options{})
	a := s.browser()
	a.signUp(alice, "alice")
	// Link carol's account to alice, and log in with it elsewhere.
	form := a.get("/account")
	begin := a.post("/login/other", url.Values{"csrf": {form.csrf(t)}, "next": {"/account"}})
	if p := a.consent(a.get(a.approve(begin.url.Query().Get("authRequestID"), carol).String())); !strings.Contains(p.body, "The account is linked") {
		t.Fatalf("link carol's account: %d at %s:\n%s", p.status, p.url, p.body)
	}
	c := s.browser()
	if p := c.login("other", "/account", carol); !strings.Contains(p.body, `<span id="handle">alice</span>`) {
		t.Fatalf("login with carol's account:\n%s", p.body)
	}
	stale := a.get("/account")
	token := a.cookie("kith-session").Value

	// Carol's session unlinks alice's account (say it was stolen).
	p := c.consent(c.post("/account/unlink", url.Values{"csrf": {c.get("/account").csrf(t)}, "kind": {"oidc"}, "value": {s.op.Issuer + " " + alice.Subject}}))
	if p.url.Path != "/account" || !strings.Contains(p.body, "The factor is unlinked") {
		t.Fatalf("unlink alice's account: %d at %s:\n%s", p.status, p.url, p.body)
	}

	// The session opened with the unlinked account cannot act.
	before := s.logLen()
	if p := a.post("/account/sessions/end", url.Values{"csrf": {stale.csrf(t)}}); p.status != http.StatusForbidden {
		t.Errorf("the unlinked account's session ended the identity's sessions: %d at %s", p.status, p.url)
	}
	if p := c.get("/account"); p.url.Path != "/account" {
		t.Errorf("carol's session was ended by the unlinked account's session: at %s", p.url)
	}
	if p := a.get("/account"); p.url.Path != "/login" {
		t.Errorf("the unlinked account's session still reaches %s", p.url)
	}
	if _, err := s.store.Session(t.Context(), session.Hash(token), time.Now()); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("the unlinked account's session is still stored: %v", err)
	}
	if s.logLen() != before {
		t.Errorf("the unlinked account's session wrote evidence")
	}
}

// TestSessionsEndWhenTheAccountIsRevokedElsewhere: revoking the session's
// account outside the web pages (with another factor's signature, as the
// API does) ends every session opened with that account, at its next
// request.
func TestSessionsEndWhenTheAccountIsRevokedElsewhere(t *testing.T) {
	s := newSite(t, web.Options{})
	a := s.browser()
	a.signUp(alice, "alice")
	keyPath, pub := sshKey(t)
	if p := a.linkSSHKey(keyPath, pub); !strings.Contains(p.body, "The key is linked") {
		t.Fatalf("link SSH key: %d:\n%s", p.status, p.body)
	}
	b := s.browser()
	b.login("kith", "/account", alice)
	stale := b.get("/account")

	_, as, _, err := s.svc.Lookup(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	keys := as.Of(identity.KindSSH, identity.LevelProven)
	if len(keys) != 1 {
		t.Fatalf("proven SSH keys: %+v", keys)
	}
	account := identity.OIDCFactor(s.op.Issuer, alice.Subject)
	c, err := s.svc.IssueChallenge(t.Context(), identity.PurposeRevoke, "alice", account)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.svc.Revoke(t.Context(), identity.RevokeRequest{Statement: c.Statement,
		By: identity.Proof{Factor: keys[0].Factor, Signature: []byte(sshSign(t, keyPath, c.Statement))}}); err != nil {
		t.Fatalf("revoke alice's account with the SSH key: %v", err)
	}

	if p := a.get("/account"); p.url.Path != "/login" {
		t.Errorf("a session of the revoked account still reaches %s", p.url)
	}
	if p := b.post("/account/sessions/end", url.Values{"csrf": {stale.csrf(t)}}); p.status != http.StatusForbidden {
		t.Errorf("a session of the revoked account ended sessions: %d at %s", p.status, p.url)
	}
	if p := b.get("/account"); p.url.Path != "/login" {
		t.Errorf("a session of the revoked account still reaches %s", p.url)
	}
	if list, err := s.store.IdentitySessions(t.Context(), "alice", time.Now()); err != nil || len(list) != 0 {
		t.Errorf("sessions of the revoked account still stored: %d, %v", len(list), err)
	}
}
