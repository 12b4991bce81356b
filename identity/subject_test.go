package identity_test

import (
	"bytes"
	"testing"

	"github.com/kith-keyserver/kith/identity"
)

// TestOpaqueSubject tells the subjects that name no one from those that
// name a person, plainly or wrapped in base64 as some providers do.
func TestOpaqueSubject(t *testing.T) {
	for sub, want := range map[string]bool{
		"110169484474386276334":                true,  // a number
		"248289761001":                         true,  // a short number
		"u-1001":                               true,  // a test provider's
		"8d7c0a3e-4f1b-4c2a-9a6e-5c2d1f0b7e11": true,  // a UUID
		"AItOawmwtWwcT0k51BayewNvutrJUqsvl6qs": true,  // a random string
		"jane@corp.example":                    false, // an address
		"cn=Jane Doe,ou=people,dc=corp":        false, // a directory name
		"uid=jdoe,dc=corp":                     false,
		"CgtqYW5lQGNvcnAuZXgSBGxkYXA":          false, // base64 of a connector's record holding an address
		"Cgpjbj1qZG9lLGRjEgRsZGFw":             false, // base64 of one holding a directory name
		"jane doe":                             false,
	} {
		if got := identity.OpaqueSubject(sub); got != want {
			t.Errorf("OpaqueSubject(%q) = %v, want %v", sub, got, want)
		}
	}
}

// TestAccountWhoseSubjectIsAnAddressIsRecordedUnderAPseudonym: a
// provider whose subjects are addresses would put the address in every
// public record of its logins. The account is recorded under a
// pseudonym (one per account, the same at every login), its ID tokens
// stay private, the owner's artifacts open the subject, and deleting the
// identity forgets the pseudonym's salt, so a later login is a stranger.
func TestAccountWhoseSubjectIsAnAddressIsRecordedUnderAPseudonym(t *testing.T) {
	e := newEnv(t)
	const issuer, subject = "https://ldap-bridge.example.org", "jane@corp.example"
	acct, salt, err := e.svc.OIDCAccount(e.ctx, issuer, subject)
	if err != nil {
		t.Fatal(err)
	}
	if !acct.Pseudonymous() || len(salt) != identity.ArtifactSaltSize || bytes.Contains([]byte(acct.Value), []byte("jane")) {
		t.Fatalf("account %s, salt %x: want a pseudonym", acct, salt)
	}
	if again, _, _ := e.svc.OIDCAccount(e.ctx, issuer, subject); !again.Same(acct) {
		t.Errorf("the same account's second login is %s, first %s", again, acct)
	}
	if opaque, s, _ := e.svc.OIDCAccount(e.ctx, issuer, "248289761001"); opaque.Pseudonymous() || s != nil || opaque.Value != issuer+" 248289761001" {
		t.Errorf("an opaque subject is recorded as %s", opaque)
	}

	l := identity.Login{Account: acct, Subject: subject, SubjectSalt: salt, Provider: "bridge", ClientID: "kith",
		AuthTime: e.clock, IDToken: "token-jane", SigningKey: []byte("jwk"), PublicToken: true}
	e.v.AddLogin(l)
	e.claimLogin("jane", l)
	recs, err := e.svc.Log(e.ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if bytes.Contains(r.CanonicalBytes(), []byte("jane@")) || bytes.Contains(r.CanonicalBytes(), []byte("token-jane")) {
			t.Errorf("public record %d (%s) names the subject or holds its token", r.Seq, r.Method)
		}
	}
	arts, err := e.svc.IdentityArtifacts(e.ctx, "jane")
	if err != nil {
		t.Fatal(err)
	}
	opened := false
	for _, ra := range arts {
		for _, a := range ra.Artifacts {
			if a.Kind == identity.ArtifactSubject && string(a.Value) == subject && bytes.Equal(a.Salt, salt) {
				opened = true
			}
		}
	}
	if !opened {
		t.Errorf("the owner's artifacts do not open the subject: %+v", arts)
	}

	if _, err := e.deleteErr("jane", l); err != nil {
		t.Fatal(err)
	}
	after, _, err := e.svc.OIDCAccount(e.ctx, issuer, subject)
	if err != nil {
		t.Fatal(err)
	}
	if after.Same(acct) {
		t.Error("after the deletion the account is still recorded under its old pseudonym")
	}
}
