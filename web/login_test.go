package web_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/web"
)

// TestLoginChooseHandleReturnAndLinkSSHKey is the whole flow against the
// real provider: a first login chooses a handle, a second login reaches
// the same identity, an SSH key is linked with a real ssh-keygen
// signature, a second provider account is linked, and logout ends the
// session.
func TestLoginChooseHandleReturnAndLinkSSHKey(t *testing.T) {
	s := newSite(t, web.Options{})
	b := s.browser()

	p := b.login("kith", "/", alice)
	if p.url.Path != "/login/choose-handle" {
		t.Fatalf("first login ended at %s", p.url)
	}
	if got := p.field(t, "handle"); got != "alice-liddell" {
		t.Errorf("proposed handle %q, want alice-liddell (from preferred_username Alice.Liddell)", got)
	}
	if s.logLen() != 0 {
		t.Fatalf("a first login wrote evidence before a handle was chosen")
	}
	// A bad handle is refused with the rules, and nothing is written.
	bad := b.post("/login/choose-handle", url.Values{"csrf": {p.csrf(t)}, "handle": {"-Alice"}})
	if bad.status != http.StatusBadRequest || !strings.Contains(bad.body, "lower-case letters") || s.logLen() != 0 {
		t.Fatalf("bad handle: %d, log %d:\n%s", bad.status, s.logLen(), bad.body)
	}
	acct := b.consent(b.post("/login/choose-handle", url.Values{"csrf": {p.csrf(t)}, "handle": {"alice"}}))
	if acct.status != http.StatusOK || acct.url.Path != "/account" || !strings.Contains(acct.body, `<span id="handle">alice</span>`) {
		t.Fatalf("claim: %d at %s:\n%s", acct.status, acct.url, acct.body)
	}

	// The evidence: the provider key that verified the login, then an
	// oidc.login claim and the verified email, each re-verifiable offline.
	recs, err := s.store.Log(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || recs[0].Method != identity.MethodOIDCKeySet || !bytes.Equal(recs[0].SignerKey, recs[1].SignerKey) ||
		recs[1].Method != identity.MethodOIDCLogin || recs[1].Purpose != identity.PurposeClaim ||
		recs[2].Method != identity.MethodOIDCEmailVerified || recs[2].To.Kind != identity.KindEmail || recs[2].To.Value != "" {
		t.Fatalf("log after the claim: %+v", recs)
	}
	// The email and its login's ID token are private artifacts: the log
	// commits to them, and the owner's artifacts open the record.
	if _, err := verify.LoginRecord(&recs[2]); !errors.Is(err, verify.ErrWithheld) {
		t.Errorf("the email record without its artifacts: %v, want ErrWithheld", err)
	}
	arts, err := s.store.IdentityArtifacts(t.Context(), "alice")
	if err != nil || len(arts) != 1 || arts[0].Seq != 3 {
		t.Fatalf("artifacts: %+v, %v", arts, err)
	}
	if err := recs[2].Reveal(arts[0].Artifacts); err != nil || recs[2].To.Value != "alice@example.org" {
		t.Fatalf("reveal: %v, %+v", err, recs[2].To)
	}
	// The claim is approved by a consent login: its ID token's nonce
	// commits to the claim statement with the salt the record keeps.
	if len(recs[1].Consent) == 0 {
		t.Errorf("the claim record keeps no consent salt")
	}
	for i, e := range recs[1:] {
		check := verify.LoginRecord
		if i == 0 {
			check = verify.SessionConsent
		}
		c, err := check(&e)
		if err != nil {
			t.Errorf("record %d does not re-verify: %v", e.Seq, err)
		} else if c.Subject != alice.Subject {
			t.Errorf("record %d: subject %q", e.Seq, c.Subject)
		}
	}
	account := identity.OIDCFactor(s.op.Issuer, alice.Subject)
	if h, err := s.svc.WhoProves(t.Context(), account); err != nil || h != "alice" {
		t.Fatalf("WhoProves(alice's account) = %q, %v", h, err)
	}

	// Logout, then log in again (in another browser too): the same identity.
	out := b.post("/logout", url.Values{"csrf": {acct.csrf(t)}})
	if out.url.Path != "/" || b.get("/account").url.Path != "/login" {
		t.Fatalf("after logout: at %s; /account did not ask to log in", out.url)
	}
	for _, br := range []*browser{b, s.browser()} {
		back := br.login("kith", "/account", alice)
		if back.url.Path != "/account" || !strings.Contains(back.body, `<span id="handle">alice</span>`) {
			t.Fatalf("second login ended at %s:\n%s", back.url, back.body)
		}
	}
	if n := s.logLen(); n != 3 {
		t.Errorf("a returning login appended records: %d", n)
	}

	// Link an SSH key with a real signature.
	keyPath, pub := sshKey(t)
	linked := b.linkSSHKey(keyPath, pub)
	if linked.url.Path != "/account" || !strings.Contains(linked.body, "The key is linked") {
		t.Fatalf("link SSH key: %d at %s:\n%s", linked.status, linked.url, linked.body)
	}
	_, a, _, err := s.svc.Lookup(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if keys := a.Of(identity.KindSSH, identity.LevelProven); len(keys) != 1 || keys[0].Label != "alice@laptop" {
		t.Fatalf("proven SSH keys of alice: %+v", keys)
	}
	if !strings.Contains(linked.body, strings.Fields(pub)[1]) {
		t.Errorf("the account page does not show the linked key")
	}

	// Log in at another provider while logged in: the account is linked,
	// not switched to.
	form := b.get("/account")
	linkedOIDC := b.post("/login/other", url.Values{"csrf": {form.csrf(t)}, "next": {"/account"}})
	if linkedOIDC.url.Path != "/login" {
		t.Fatalf("link begin: at %s", linkedOIDC.url)
	}
	done := b.consent(b.get(b.approve(linkedOIDC.url.Query().Get("authRequestID"), carol).String()))
	if done.url.Path != "/account" || !strings.Contains(done.body, "The account is linked") {
		t.Fatalf("link carol's account: %d at %s:\n%s", done.status, done.url, done.body)
	}
	if h, err := s.svc.WhoProves(t.Context(), identity.OIDCFactor(s.op.Issuer, carol.Subject)); err != nil || h != "alice" {
		t.Fatalf("WhoProves(carol's account) = %q, %v", h, err)
	}
	// Logging in with the linked account reaches the same identity.
	viaCarol := s.browser().login("other", "/account", carol)
	if !strings.Contains(viaCarol.body, `<span id="handle">alice</span>`) {
		t.Fatalf("login with the linked account:\n%s", viaCarol.body)
	}
	recs, _ = s.store.Log(t.Context(), 0, 100)
	s.reveal("alice", recs)
	for _, e := range recs {
		if e.Method == identity.MethodOIDCLogin || e.Method == identity.MethodOIDCEmailVerified {
			if err := verify.Record(&e); err != nil {
				t.Errorf("record %d (%s) does not re-verify: %v", e.Seq, e.Method, err)
			}
		}
	}

	// The public profile shows the factors.
	prof := s.browser().get("/u/alice")
	if prof.status != http.StatusOK || !strings.Contains(prof.body, "SSH key") || !strings.Contains(prof.body, "proven") {
		t.Fatalf("profile: %d:\n%s", prof.status, prof.body)
	}
	if strings.Contains(prof.body, "alice@example.org") {
		t.Errorf("the public profile shows the email only the provider knew")
	}

	// Logout: the old cookie opens nothing any more.
	old := b.cookie("kith-session")
	form = b.get("/account")
	b.post("/logout", url.Values{"csrf": {form.csrf(t)}})
	replay := s.browser()
	u, _ := url.Parse(s.srv.URL)
	replay.c.Jar.SetCookies(u, []*http.Cookie{{Name: old.Name, Value: old.Value, Path: "/", Secure: true}})
	if p := replay.get("/account"); p.url.Path != "/login" {
		t.Errorf("a logged-out session's cookie reached %s", p.url)
	}
	before := s.logLen()
	if p := replay.post("/account/sessions/end", url.Values{"csrf": {form.csrf(t)}}); p.status != http.StatusForbidden || !strings.Contains(p.body, "Nothing was changed") {
		t.Errorf("a POST with a logged-out session: %d:\n%s", p.status, p.body)
	}
	if s.logLen() != before {
		t.Errorf("a logged-out session's POST wrote evidence")
	}

	// The whole log verifies as kith verify-log checks it: every token
	// with a provider key an earlier oidc.jwks record published.
	all, err := s.store.Log(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	s.reveal("alice", all)
	var v verify.LogVerifier
	keySets := 0
	for i := range all {
		if all[i].Method == identity.MethodOIDCKeySet {
			keySets++
		}
		for _, f := range v.Add(&all[i]) {
			t.Errorf("verify-log: record %d (%s): %s", f.Seq, all[i].Method, f.Reason)
		}
	}
	if keySets != 1 {
		t.Errorf("%d oidc.jwks records for one provider key, want 1", keySets)
	}
}

// TestLinkingAnAccountOfAnotherIdentityIsRefused: an account that is
// another identity's factor cannot be linked.
func TestLinkingAnAccountOfAnotherIdentityIsRefused(t *testing.T) {
	s := newSite(t, web.Options{})
	s.browser().signUp(bob, "bob")
	a := s.browser()
	a.signUp(alice, "alice")
	before := s.logLen()
	form := a.get("/account")
	p := a.post("/login/kith", url.Values{"csrf": {form.csrf(t)}})
	p = a.get(a.approve(p.url.Query().Get("authRequestID"), bob).String())
	if p.status != http.StatusConflict || !strings.Contains(p.body, "linked to another identity") {
		t.Fatalf("linking bob's account to alice: %d:\n%s", p.status, p.body)
	}
	if s.logLen() != before {
		t.Errorf("the refused link wrote evidence")
	}
}

// TestGetLoginWhileLoggedInOnlyAsksToConfirm: a link from another site to
// /login/{provider} does not start linking by itself.
func TestGetLoginWhileLoggedInOnlyAsksToConfirm(t *testing.T) {
	s := newSite(t, web.Options{})
	b := s.browser()
	b.signUp(alice, "alice")
	p := b.get("/login/other")
	if p.url.Host != strings.TrimPrefix(s.srv.URL, "https://") || !strings.Contains(p.body, "Link an account at other") {
		t.Fatalf("GET /login/other while logged in: at %s:\n%s", p.url, p.body)
	}
}

// TestHandleTakenIsRefused: a second person cannot take a claimed handle.
func TestHandleTakenIsRefused(t *testing.T) {
	s := newSite(t, web.Options{})
	s.browser().signUp(alice, "alice")
	b := s.browser()
	p := b.login("kith", "/", bob)
	p = b.post("/login/choose-handle", url.Values{"csrf": {p.csrf(t)}, "handle": {"alice"}})
	if p.status != http.StatusConflict || !strings.Contains(p.body, "taken") {
		t.Fatalf("taken handle: %d:\n%s", p.status, p.body)
	}
	if p = b.post("/login/choose-handle", url.Values{"csrf": {p.csrf(t)}, "handle": {"admin"}}); p.status != http.StatusBadRequest || !strings.Contains(p.body, "reserved") {
		t.Fatalf("reserved handle: %d:\n%s", p.status, p.body)
	}
	// A system account's name (issue 31): a certificate for it would log
	// in as that account.
	if p = b.post("/login/choose-handle", url.Values{"csrf": {p.csrf(t)}, "handle": {"ubuntu"}}); p.status != http.StatusBadRequest || !strings.Contains(p.body, "system account") {
		t.Fatalf("system account's name: %d:\n%s", p.status, p.body)
	}
}

// TestCallbackStartedInAnotherBrowserIsRefused: a login is bound to the
// browser that began it (its state, nonce and PKCE verifier live in that
// browser's sealed flow cookie). An attacker who begins a login, approves
// it with their own account and sends the callback URL to a victim gets
// neither a session in the victim's browser nor their account linked to
// the victim's identity, whether the victim has a login of their own in
// progress or not.
func TestCallbackStartedInAnotherBrowserIsRefused(t *testing.T) {
	s := newSite(t, web.Options{})
	victim := s.browser()
	victim.signUp(alice, "alice")
	fresh := s.browser()
	mallory := carol // the attacker's own account at the provider

	for _, tc := range []struct {
		name string
		// prepare readies the victim's browser; it returns the browser
		// and the handle it must still be logged in as ("" for none).
		prepare func() (*browser, string)
		want    string
	}{
		{"LoggedInWithoutFlow", func() (*browser, string) { return victim, "alice" }, "not started in this browser"},
		{"LoggedInLinking", func() (*browser, string) {
			form := victim.get("/account")
			if p := victim.post("/login/other", url.Values{"csrf": {form.csrf(t)}, "next": {"/account"}}); p.url.Path != "/login" {
				t.Fatalf("the victim's link begin: at %s", p.url)
			}
			return victim, "alice"
		}, "state mismatch"},
		{"VisitorLoggingIn", func() (*browser, string) {
			fresh.beginAtProvider("other", "/")
			return fresh, ""
		}, "state mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attacker := s.browser()
			cb := attacker.approve(attacker.beginAtProvider("other", "/account"), mallory)
			b, handle := tc.prepare()
			before := s.logLen()
			p := b.get(cb.String())
			if p.status != http.StatusForbidden || !strings.Contains(p.body, tc.want) || !strings.Contains(p.body, "Nothing was stored") {
				t.Errorf("the attacker's callback in the victim's browser: %d at %s, want 403 saying %q:\n%s", p.status, p.url, tc.want, p.body)
			}
			if n := s.logLen(); n != before {
				t.Errorf("the attacker's callback wrote %d evidence records", n-before)
			}
			if h, err := s.svc.WhoProves(t.Context(), identity.OIDCFactor(s.op.Issuer, mallory.Subject)); identity.CodeOf(err) != identity.CodeNotLinked {
				t.Errorf("the attacker's account is linked to %q (%v)", h, err)
			}
			acct := b.get("/account")
			switch {
			case handle == "" && acct.url.Path != "/login":
				t.Errorf("the victim's browser holds a session: at %s", acct.url)
			case handle != "" && !strings.Contains(acct.body, `<span id="handle">`+handle+`</span>`):
				t.Errorf("the victim is no longer logged in as %s: at %s", handle, acct.url)
			}
			// The attacker's own browser can still finish its login.
			if p := attacker.get(cb.String()); p.url.Path != "/login/choose-handle" {
				t.Errorf("the attacker's own callback ended at %s", p.url)
			}
		})
	}
}

// reveal opens the records' commitments with the private artifacts of
// the identity h, as its owner can (kith verify-log --artifacts).
func (s *site) reveal(h identity.Handle, recs []identity.Evidence) {
	s.t.Helper()
	arts, err := s.store.IdentityArtifacts(s.t.Context(), h)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, a := range arts {
		for i := range recs {
			if recs[i].Seq == a.Seq {
				if err := recs[i].Reveal(a.Artifacts); err != nil {
					s.t.Fatal(err)
				}
			}
		}
	}
}
