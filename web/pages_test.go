package web_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/pgp/gpgtest"
	"github.com/kith-keyserver/kith/web"
)

// gnupg is a throwaway GnuPG home whose output the page tests read as
// text.
type gnupg struct{ *gpgtest.Home }

func newGnuPG(t *testing.T) *gnupg { return &gnupg{gpgtest.New(t)} }

// run is Home.Run, its output as a string.
func (g *gnupg) run(stdin string, args ...string) string { return string(g.Run(stdin, args...)) }

// newKey makes an Ed25519 key with an encryption subkey and returns its
// fingerprint.
func (g *gnupg) newKey(uid string) string {
	fpr := g.NewKey(uid, "sign,cert")
	g.run("", "--quick-add-key", fpr, "cv25519", "encr", "0")
	return fpr
}

// upload pastes gpg's armored export into the upload form.
func (b *browser) upload(armored string) page {
	t := b.s.t
	t.Helper()
	form := b.get("/upload")
	return b.post("/upload", url.Values{"csrf": {form.csrf(t)}, "keytext": {armored}})
}

// TestPublicPagesShowStoredKeys uploads a gpg key through the form and
// finds it by email, key ID, fingerprint and words, on its page and in
// the statistics.
func TestPublicPagesShowStoredKeys(t *testing.T) {
	s := newSite(t, web.Options{MaxResults: 1})
	g := newGnuPG(t)
	fpr := g.newKey("Dana Scully <dana@example.org>")
	other := g.newKey("Fox Mulder <fox@example.org>")
	b := s.browser()
	up := b.upload(g.run("", "--armor", "--export", fpr))
	if up.status != http.StatusOK || !strings.Contains(up.body, "inserted") || !strings.Contains(up.body, fpr) {
		t.Fatalf("upload: %d:\n%s", up.status, up.body)
	}
	if again := b.upload(g.run("", "--armor", "--export", fpr)); !strings.Contains(again.body, "unchanged") {
		t.Errorf("second upload:\n%s", again.body)
	}
	if junk := b.upload("not a key"); junk.status != http.StatusUnprocessableEntity || !strings.Contains(junk.body, "rejected") {
		t.Errorf("junk upload: %d:\n%s", junk.status, junk.body)
	}

	for _, q := range []string{"dana@example.org", "0x" + fpr[24:], "0x" + fpr[32:], fpr, "scully dana"} {
		p := b.get("/search?q=" + url.QueryEscape(q))
		// An exact fingerprint jumps to the key's page.
		found := strings.Contains(p.body, "/keys/"+fpr) || p.url.Path == "/keys/"+fpr
		if p.status != http.StatusOK || !found || !strings.Contains(p.body, "Dana Scully &lt;dana@example.org&gt;") {
			t.Errorf("search %q: %d:\n%s", q, p.status, p.body)
		}
	}
	// Two keys match "example": one is shown, with a note.
	b.upload(g.run("", "--armor", "--export", other))
	if p := b.get("/search?q=example"); strings.Count(p.body, `class="fp mono" href="/keys/`) != 1 || !strings.Contains(p.body, "More than 1 keys match") {
		t.Errorf("capped search:\n%s", p.body)
	}
	if p := b.get("/search?q=nobody-here"); !strings.Contains(p.body, "No key matches") {
		t.Errorf("empty search:\n%s", p.body)
	}
	if p := b.get("/search?q=0x12"); p.status != http.StatusBadRequest {
		t.Errorf("bad key ID search: %d", p.status)
	}

	k := b.get("/keys/" + fpr)
	for _, want := range []string{
		"Dana Scully &lt;dana@example.org&gt;", "claim", "encrypt", "certify, sign",
		"/pks/lookup?op=get&amp;options=mr&amp;search=0x" + fpr, "BEGIN PGP PUBLIC KEY BLOCK",
	} {
		if !strings.Contains(k.body, want) {
			t.Errorf("key page lacks %q:\n%s", want, k.body)
		}
	}
	if p := b.get("/keys/" + strings.Repeat("A", 40)); p.status != http.StatusNotFound {
		t.Errorf("missing key: %d", p.status)
	}
	if p := b.get("/keys/xyz"); p.status != http.StatusBadRequest {
		t.Errorf("bad fingerprint: %d", p.status)
	}
	if p := b.get("/stats"); !strings.Contains(p.body, `<strong id="key-count">2</strong>`) || !strings.Contains(p.body, "/pks/lookup?op=stats") {
		t.Errorf("stats:\n%s", p.body)
	}
	if p := b.get("/u/nobody"); p.status != http.StatusNotFound {
		t.Errorf("unknown profile: %d", p.status)
	}
}

// TestLinkedKeyEmailVerifiedByProviderIsCorroborated links a gpg key
// whose user ID names the email alice's provider verified: the page shows
// it corroborated, while its assurance stays claimed; another user ID's
// email stays a plain claim.
func TestLinkedKeyEmailVerifiedByProviderIsCorroborated(t *testing.T) {
	s := newSite(t, web.Options{})
	g := newGnuPG(t)
	fpr := g.newKey("Alice Liddell <alice@example.org>")
	g.run("", "--quick-add-uid", fpr, "Alice at work <alice@work.example>")
	b := s.browser()
	b.signUp(alice, "alice")
	b.upload(g.run("", "--armor", "--export", fpr))

	acct := b.get("/account")
	p := b.post("/account/challenge", url.Values{"csrf": {acct.csrf(t)}, "kind": {"pgp"}, "fingerprint": {fpr}})
	if !strings.Contains(p.body, "gpg --clearsign kith-statement.txt") {
		t.Fatalf("pgp challenge:\n%s", p.body)
	}
	statement, _ := base64.StdEncoding.DecodeString(p.field(t, "statement"))
	signed := g.run(string(statement), "--local-user", fpr, "--clearsign", "--output", "-")
	done := b.consent(b.post("/account/verify", url.Values{"csrf": {p.csrf(t)}, "statement": {p.field(t, "statement")}, "signature": {signed}}))
	if done.url.Path != "/account" || !strings.Contains(done.body, "The key is linked") {
		t.Fatalf("link pgp key: %d at %s:\n%s", done.status, done.url, done.body)
	}

	_, a, _, err := s.svc.Lookup(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := a.Status(identity.EmailFactor("alice@example.org")); st.Level != identity.LevelClaimed {
		t.Errorf("alice@example.org is %s, want claimed: corroboration must not upgrade it", st.Level)
	}
	key := s.browser().get("/keys/" + fpr)
	if n := strings.Count(key.body, `<span class="badge corroborated">`); n != 1 {
		t.Errorf("key page shows %d corroborated emails, want 1:\n%s", n, key.body)
	}
	i := strings.Index(key.body, "alice@work.example")
	if i < 0 || strings.Contains(key.body[i:min(i+400, len(key.body))], "corroborated") {
		t.Errorf("the work email is shown corroborated")
	}
	prof := s.browser().get("/u/alice")
	if !strings.Contains(prof.body, "corroborated") || !strings.Contains(prof.body, "alice@example.org") {
		t.Errorf("profile does not show the corroborated email:\n%s", prof.body)
	}
}

// TestDeleteAccountRevokesLinksAndEndsSessions deletes an identity with
// an SSH key, approved at the real provider by a consent login: its
// factors are revoked (each record keeps the delete statement and the
// consent token, whose nonce commits to it, and no email), every session
// ends, and the whole log still verifies offline.
func TestDeleteAccountRevokesLinksAndEndsSessions(t *testing.T) {
	s := newSite(t, web.Options{})
	b := s.browser()
	b.signUp(alice, "alice")
	keyPath, pub := sshKey(t)
	b.linkSSHKey(keyPath, pub)
	second := s.browser()
	second.login("kith", "/account", alice)

	acct := b.get("/account")
	if p := b.post("/account/delete", url.Values{"csrf": {acct.csrf(t)}, "confirm": {"not-alice"}}); p.status != http.StatusBadRequest {
		t.Fatalf("delete without confirmation: %d", p.status)
	}
	before := s.logLen()
	p := b.consent(b.post("/account/delete", url.Values{"csrf": {acct.csrf(t)}, "confirm": {"alice"}}))
	if p.status != http.StatusOK || !strings.Contains(p.body, "Account deleted") {
		t.Fatalf("delete: %d:\n%s", p.status, p.body)
	}
	_, a, _, err := s.svc.Lookup(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range a.Factors {
		if st.Level >= identity.LevelClaimed {
			t.Errorf("%s is still %s", st.Factor, st.Level)
		}
	}
	recs, _ := s.store.Log(t.Context(), int64(before), 100)
	if len(recs) != 2 {
		t.Fatalf("%d revocations, want 2 (the SSH key, then the account)", len(recs))
	}
	for _, e := range recs {
		if e.Method != identity.MethodRevocation || e.Purpose != identity.PurposeDelete || bytes.Contains(e.Statement, []byte("@")) || len(e.Commitments) != 0 {
			t.Errorf("revocation record %d: %s %s, statement %q, commitments %v", e.Seq, e.Method, e.Purpose, e.Statement, e.Commitments)
		}
		if c, err := verify.SessionConsent(&e); err != nil || c.Nonce != identity.ConsentNonce(e.Statement, e.Consent) || bytes.Contains(e.Signature, []byte("@")) {
			t.Errorf("revocation record %d: its consent does not verify: %v", e.Seq, err)
		}
	}
	if !bytes.Equal(recs[0].Statement, recs[1].Statement) || !bytes.Equal(recs[0].Signature, recs[1].Signature) {
		t.Errorf("the revocations keep different approvals: one deletion, one statement")
	}
	all, err := s.store.Log(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var lv verify.LogVerifier
	for i := range all {
		for _, f := range lv.Add(&all[i]) {
			if f.Unchecked && len(all[i].Commitments) > 0 {
				continue // an erased email or login token
			}
			t.Errorf("after the deletion, record %d: %s", f.Seq, f.Reason)
		}
	}
	for _, br := range []*browser{b, second} {
		if p := br.get("/account"); p.url.Path != "/login" {
			t.Errorf("a session survived the deletion: at %s", p.url)
		}
	}
	// The account can start afresh.
	again := s.browser().login("kith", "/", alice)
	if again.url.Path != "/login/choose-handle" {
		t.Errorf("login after deletion ended at %s", again.url)
	}
}

// TestDeleteApprovedByAnotherAccountIsRefused: deleting alice's identity
// needs alice's approval at the provider; bob's login there deletes
// nothing, writes nothing and ends no session.
func TestDeleteApprovedByAnotherAccountIsRefused(t *testing.T) {
	s := newSite(t, web.Options{})
	s.browser().signUp(bob, "bob")
	b := s.browser()
	b.signUp(alice, "alice")
	before := s.logLen()
	acct := b.get("/account")
	begin := b.post("/account/delete", url.Values{"csrf": {acct.csrf(t)}, "confirm": {"alice"}})
	p := b.get(b.approve(b.atProvider(begin), bob).String())
	if p.status != http.StatusForbidden || !strings.Contains(p.body, "another account") {
		t.Fatalf("alice's deletion approved by bob: %d at %s:\n%s", p.status, p.url, p.body)
	}
	if s.logLen() != before {
		t.Errorf("the refused deletion wrote evidence")
	}
	if p := b.get("/account"); p.url.Path != "/account" {
		t.Errorf("the refused deletion ended the session: at %s", p.url)
	}
	_, a, _, err := s.svc.Lookup(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Of(identity.KindOIDC, identity.LevelProven)) != 1 {
		t.Errorf("alice's account after the refused deletion: %+v", a.Factors)
	}
}
