package web_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/ssh"
)

// keyStatement asks a key form (/claim or /login/key) for a statement
// and returns the sign page.
func (b *browser) keyStatement(action, handle, key string) page {
	t := b.s.t
	t.Helper()
	form := b.get(action)
	p := b.post(action, url.Values{"csrf": {form.csrf(t)}, "handle": {handle}, "key": {key}})
	if p.status != http.StatusOK || !strings.Contains(p.body, `id="statement"`) {
		t.Fatalf("POST %s: %d:\n%s", action, p.status, p.body)
	}
	return p
}

// statementOf is the statement a sign page sends back.
func statementOf(t *testing.T, p page) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(p.field(t, "statement"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// answer sends a sign page's form back with the signatures.
func (b *browser) answer(action string, p page, sig, bySig string) page {
	t := b.s.t
	t.Helper()
	form := url.Values{"csrf": {p.csrf(t)}, "statement": {p.field(t, "statement")}, "label": {p.field(t, "label")}, "signature": {sig}}
	if bySig != "" {
		form.Set("by_signature", bySig)
	}
	return b.post(action, form)
}

// claimByKey claims handle with the SSH key at path on the pages.
func (b *browser) claimByKey(handle, path, pub string) page {
	p := b.keyStatement("/claim", handle, pub)
	return b.answer("/claim/verify", p, sshSign(b.s.t, path, statementOf(b.s.t, p)), "")
}

// loginByKey logs in as handle with the SSH key at path.
func (b *browser) loginByKey(handle, path, pub string) page {
	p := b.keyStatement("/login/key", handle, pub)
	return b.answer("/login/key/verify", p, sshSign(b.s.t, path, statementOf(b.s.t, p)), "")
}

// TestClaimLinkAndLoginByKeyWithoutProvider: with no OpenID provider, a
// person claims a handle with an SSH key, logs in by signing a login
// statement, links a second key (signed by it and by the login key), and
// the session ends once the login key is revoked.
func TestClaimLinkAndLoginByKeyWithoutProvider(t *testing.T) {
	s := newKeySite(t)
	b := s.browser()
	k1, pub1 := sshKey(t)
	k2, pub2 := sshKey(t)

	if p := b.get("/"); !strings.Contains(p.body, `href="/login"`) || !strings.Contains(p.body, `href="/claim"`) {
		t.Errorf("home page offers no login or claim:\n%s", p.body)
	}
	if p := b.get("/login"); !strings.Contains(p.body, `href="/login/key"`) {
		t.Errorf("login page without providers offers no key login:\n%s", p.body)
	}
	p := b.claimByKey("nora", k1, pub1)
	if p.status != http.StatusOK || p.url.Path != "/claim/done" || !strings.Contains(p.body, "You now own") {
		t.Fatalf("claim: %d at %s:\n%s", p.status, p.url, p.body)
	}
	// The claim logged this browser in; a login statement logs in too.
	if b.cookie("kith-session") == nil {
		t.Fatal("the claim opened no session")
	}
	b.post("/logout", url.Values{"csrf": {p.csrf(t)}})
	if b.cookie("kith-session") != nil {
		t.Fatal("logout kept the session")
	}
	p = b.loginByKey("nora", k1, pub1)
	if p.status != http.StatusOK || p.url.Path != "/account" || !strings.Contains(p.body, `id="key-session-note"`) {
		t.Fatalf("login by key: %d at %s:\n%s", p.status, p.url, p.body)
	}

	// Link k2: the page asks for k1's signature too.
	acct := b.get("/account")
	sp := b.post("/account/challenge", url.Values{"csrf": {acct.csrf(t)}, "kind": {"ssh"}, "key": {pub2}})
	if !strings.Contains(sp.body, `name="by_signature"`) {
		t.Fatalf("a key session's sign page asks for no co-signature:\n%s", sp.body)
	}
	st := statementOf(t, sp)
	before := s.logLen()
	if p := b.answer("/account/verify", sp, sshSign(t, k2, st), ""); p.status != http.StatusBadRequest {
		t.Errorf("link without the login key's signature: %d", p.status)
	}
	if p := b.answer("/account/verify", sp, sshSign(t, k2, st), sshSign(t, k2, st)); p.status == http.StatusOK && p.url.Path == "/account" {
		t.Errorf("link co-signed by the new key itself was accepted")
	}
	if n := s.logLen(); n != before {
		t.Fatalf("refused links appended %d records", n-before)
	}
	if p := b.answer("/account/verify", sp, sshSign(t, k2, st), sshSign(t, k1, st)); p.url.Path != "/account" || !strings.Contains(p.body, "The key is linked") {
		t.Fatalf("link co-signed by the login key: %d at %s:\n%s", p.status, p.url, p.body)
	}
	_, a, _, err := s.svc.Lookup(t.Context(), "nora")
	if err != nil {
		t.Fatal(err)
	}
	var f2 identity.Factor
	for _, st := range a.Factors {
		if st.Factor.Kind == identity.KindSSH && st.Level == identity.LevelProven && !strings.Contains(pub1, base64.StdEncoding.EncodeToString(st.Factor.Data)) {
			f2 = st.Factor
		}
	}
	if f2.IsZero() {
		t.Fatalf("k2 not proven for nora: %+v", a.Factors)
	}

	// Revoke k1 with k2 through the service (as the API or kith id
	// would): the session opened with k1 is no one's any more.
	var f1 identity.Factor
	for _, st := range a.Factors {
		if st.Factor.Kind == identity.KindSSH && !st.Factor.Same(f2) {
			f1 = st.Factor
		}
	}
	c, err := s.svc.IssueChallenge(t.Context(), identity.PurposeRevoke, "nora", f1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.svc.Revoke(t.Context(), identity.RevokeRequest{Statement: c.Statement,
		By: identity.Proof{Factor: f2, Signature: []byte(sshSign(t, k2, c.Statement))}}); err != nil {
		t.Fatal(err)
	}
	if p := b.get("/account"); p.url.Path != "/login" {
		t.Errorf("after revoking the login key the account page is at %s", p.url)
	}
	if p := b.loginByKey("nora", k2, pub2); p.url.Path != "/account" {
		t.Errorf("login with the remaining key: %d at %s", p.status, p.url)
	}
}

// sshFactor is the factor of an SSH public key line.
func sshFactor(t *testing.T, pub string) identity.Factor {
	t.Helper()
	k, err := ssh.ParseAuthorizedKey([]byte(pub))
	if err != nil {
		t.Fatal(err)
	}
	return identity.SSHFactor(k.Fingerprint().String(), k.Underlying().Marshal())
}

// TestKeyLoginAttacks: a login needs a proven key's own signature over a
// fresh login statement, from a form of this site.
func TestKeyLoginAttacks(t *testing.T) {
	s := newKeySite(t)
	victim, victimPub := sshKey(t)
	mallory, malloryPub := sshKey(t)
	claimed, claimedPub := sshKey(t)
	b := s.browser()
	b.claimByKey("nora", victim, victimPub)
	b.claimByKey("mallory", mallory, malloryPub)
	// claimedPub is only claimed for nora: her key consented, it never
	// signed.
	ap := b.loginByKey("nora", victim, victimPub)
	acct := b.get("/account")
	sp := b.post("/account/challenge", url.Values{"csrf": {acct.csrf(t)}, "kind": {"ssh"}, "key": {claimedPub}})
	st := statementOf(t, sp)
	if err := s.svc.Add(t.Context(), identity.AddRequest{Statement: st, By: &identity.Proof{Factor: sshFactor(t, victimPub), Signature: []byte(sshSign(t, victim, st))}}); err != nil {
		t.Fatalf("claim a key for nora (at %s): %v", ap.url, err)
	}

	m := s.browser()
	cases := []struct {
		name string
		run  func() page
	}{
		{"mallory signs a login statement for nora's key", func() page {
			p := m.keyStatement("/login/key", "nora", victimPub)
			return m.answer("/login/key/verify", p, sshSign(t, mallory, statementOf(t, p)), "")
		}},
		{"mallory's own key for nora", func() page {
			p := m.keyStatement("/login/key", "nora", malloryPub)
			return m.answer("/login/key/verify", p, sshSign(t, mallory, statementOf(t, p)), "")
		}},
		{"a key nobody proved", func() page {
			p := m.keyStatement("/login/key", "nora", claimedPub)
			return m.answer("/login/key/verify", p, sshSign(t, claimed, statementOf(t, p)), "")
		}},
		{"a claim statement as a login", func() page {
			p := m.keyStatement("/claim", "fresh-handle", victimPub)
			return m.answer("/login/key/verify", p, sshSign(t, victim, statementOf(t, p)), "")
		}},
		{"no CSRF token", func() page {
			p := m.keyStatement("/login/key", "mallory", malloryPub)
			return m.post("/login/key/verify", url.Values{"statement": {p.field(t, "statement")}, "signature": {sshSign(t, mallory, statementOf(t, p))}})
		}},
		{"an empty signature", func() page {
			p := m.keyStatement("/login/key", "mallory", malloryPub)
			return m.answer("/login/key/verify", p, "", "")
		}},
	}
	before := s.logLen()
	for _, tc := range cases {
		p := tc.run()
		if p.status < 400 || m.cookie("kith-session") != nil {
			t.Errorf("%s: %d at %s, session %v", tc.name, p.status, p.url, m.cookie("kith-session") != nil)
		}
	}
	// A statement answered once does not log in again.
	p := m.keyStatement("/login/key", "mallory", malloryPub)
	sig := sshSign(t, mallory, statementOf(t, p))
	if r := m.answer("/login/key/verify", p, sig, ""); r.url.Path != "/account" {
		t.Fatalf("mallory's own login: %d at %s:\n%s", r.status, r.url, r.body)
	}
	replay := s.browser()
	replay.get("/login/key")
	form := url.Values{"csrf": {replay.get("/login/key").csrf(t)}, "statement": {p.field(t, "statement")}, "signature": {sig}}
	if r := replay.post("/login/key/verify", form); r.status != http.StatusConflict || replay.cookie("kith-session") != nil {
		t.Errorf("replayed login: %d at %s", r.status, r.url)
	}
	if n := s.logLen(); n != before {
		t.Errorf("logins appended %d records", n-before)
	}
	// A key session cannot unlink or delete without a signature.
	acct = m.get("/account")
	if r := m.post("/account/delete", url.Values{"csrf": {acct.csrf(t)}, "confirm": {"mallory"}}); r.status != http.StatusForbidden {
		t.Errorf("delete from a key session: %d", r.status)
	}
	if _, _, _, err := s.svc.Lookup(t.Context(), "mallory"); err != nil {
		t.Errorf("mallory after a refused delete: %v", err)
	}
}

// TestClaimHostByKeyOnThePages: the claim page takes a host handle like
// any other, under the same rules (only listed names, signed by the host
// key), and sends the host to its known_hosts answer, not to a login.
func TestClaimHostByKeyOnThePages(t *testing.T) {
	s := newKeySite(t)
	b := s.browser()
	k, pub := sshKey(t)
	form := b.get("/claim")
	if p := b.post("/claim", url.Values{"csrf": {form.csrf(t)}, "handle": {"host:github.com"}, "key": {pub}}); p.status == http.StatusOK && strings.Contains(p.body, `id="statement"`) {
		t.Fatalf("the claim page issued a statement for an unlisted host:\n%s", p.body)
	}
	p := b.claimByKey("host:web.example.test", k, pub)
	if p.url.Path != "/hosts/web.example.test.known_hosts" {
		t.Fatalf("host claim: %d at %s:\n%s", p.status, p.url, p.body)
	}
	if b.cookie("kith-session") != nil {
		t.Fatal("a host claim opened a session")
	}
	_, a, _, err := s.svc.LookupHost(t.Context(), "web.example.test")
	if err != nil || len(a.Of(identity.KindSSH, identity.LevelProven)) != 1 {
		t.Fatalf("after the claim: %v, %+v", err, a)
	}
}
