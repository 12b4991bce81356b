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

// TestConsentLoginsCoverTheirStatements runs every change a session
// approves (a claim, an SSH key, another account, an unlinking) through
// the real provider and checks the log they leave: each approval is an ID
// token whose nonce commits to the record's statement, public (a consent
// login asks for scope openid only, so the token holds nothing private),
// and the whole log re-verifies offline, provider keys included.
func TestConsentLoginsCoverTheirStatements(t *testing.T) {
	s := newSite(t, web.Options{})
	b := s.browser()
	b.signUp(alice, "alice")
	keyPath, pub := sshKey(t)
	if p := b.linkSSHKey(keyPath, pub); !strings.Contains(p.body, "The key is linked") {
		t.Fatalf("link SSH key: %d at %s:\n%s", p.status, p.url, p.body)
	}
	form := b.get("/account")
	begin := b.post("/login/other", url.Values{"csrf": {form.csrf(t)}, "next": {"/account"}})
	if p := b.consent(b.get(b.approve(b.atProvider(begin), carol).String())); !strings.Contains(p.body, "The account is linked") {
		t.Fatalf("link carol's account: %d at %s:\n%s", p.status, p.url, p.body)
	}
	_, a, _, err := s.svc.Lookup(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	keys := a.Of(identity.KindSSH, identity.LevelProven)
	if len(keys) != 1 {
		t.Fatalf("proven SSH keys: %+v", keys)
	}
	acct := b.get("/account")
	if p := b.consent(b.post("/account/unlink", url.Values{"csrf": {acct.csrf(t)}, "kind": {"ssh"}, "value": {keys[0].Factor.Value}})); !strings.Contains(p.body, "The factor is unlinked") {
		t.Fatalf("unlink: %d at %s:\n%s", p.status, p.url, p.body)
	}

	recs, err := s.store.Log(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var lv verify.LogVerifier
	consents := map[identity.Purpose]int{}
	var sshConsent *identity.Evidence
	for i := range recs {
		e := &recs[i]
		for _, f := range lv.Add(e) {
			// The records with emails (and carol's possession login,
			// whose token has them) keep their proofs private: see
			// TestLogKeepsEmailsAndTokensPrivate.
			if f.Unchecked && len(e.Commitments) > 0 {
				continue
			}
			t.Errorf("record %d (%s %s): %s", f.Seq, e.Method, e.Purpose, f.Reason)
		}
		if e.From.Kind != identity.KindOIDC {
			continue
		}
		if _, perr := identity.ParseStatement(e.Statement); perr != nil {
			if len(e.Consent) != 0 {
				t.Errorf("record %d: a login statement record with a consent salt", e.Seq)
			}
			continue
		}
		c, err := verify.SessionConsent(e)
		if err != nil {
			t.Errorf("record %d: %v", e.Seq, err)
			continue
		}
		if c.Nonce != identity.ConsentNonce(e.Statement, e.Consent) {
			t.Errorf("record %d: nonce %q does not commit to its statement", e.Seq, c.Nonce)
		}
		consents[e.Purpose]++
		if e.Purpose == identity.PurposeAdd && e.To.Kind == identity.KindSSH {
			sshConsent = e
		}
	}
	if consents[identity.PurposeClaim] != 1 || consents[identity.PurposeAdd] != 2 || consents[identity.PurposeRevoke] != 1 {
		t.Errorf("consent records by purpose: %v; want a claim, two adds (the key, carol's account), a revocation", consents)
	}
	if sshConsent == nil {
		t.Fatal("no consent record for the SSH key")
	}

	// The provider's signature covers the statement: the same token and
	// salt under another statement (another key) do not verify, and a
	// record that drops the salt proves no consent at all.
	forged := *sshConsent
	forged.Statement = bytes.Replace(forged.Statement, []byte("handle: alice"), []byte("handle: alicf"), 1)
	forged.Handle = "alicf"
	if _, err := verify.SessionConsent(&forged); !errors.Is(err, verify.ErrNoConsent) {
		t.Errorf("the consent token under another statement: %v, want ErrNoConsent", err)
	}
	forged = *sshConsent
	forged.Consent = nil
	if _, err := verify.SessionConsent(&forged); !errors.Is(err, verify.ErrNoConsent) {
		t.Errorf("the consent token without its salt: %v, want ErrNoConsent", err)
	}
}

// TestConsentByAnotherAccountIsRefused: the approval must come from the
// session's own account; logging in at the provider as someone else
// changes nothing.
func TestConsentByAnotherAccountIsRefused(t *testing.T) {
	s := newSite(t, web.Options{})
	s.browser().signUp(bob, "bob")
	b := s.browser()
	b.signUp(alice, "alice")
	before := s.logLen()
	keyPath, pub := sshKey(t)
	b.as = bob
	p := b.linkSSHKey(keyPath, pub)
	if p.status != http.StatusForbidden || !strings.Contains(p.body, "another account") {
		t.Fatalf("a key approved by bob's login for alice: %d at %s:\n%s", p.status, p.url, p.body)
	}
	if s.logLen() != before {
		t.Errorf("the refused approval wrote evidence")
	}
}
