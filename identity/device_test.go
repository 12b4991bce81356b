package identity_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/ssh"
)

// deviceLogin returns a device login of account name (no nonce) whose
// token carries groups, which the verifier accepts.
func (e *env) deviceLogin(name string, groups ...string) identity.Login {
	l := identity.Login{Account: identity.OIDCFactor("https://id.example.org", name), Provider: "example",
		ClientID: "kith", AuthTime: e.clock, IDToken: "device-token-" + name + "-" + strings.Join(groups, ","),
		SigningKey: []byte("jwk"), Claims: map[string][]string{"groups": groups}, PublicToken: true}
	e.v.AddLogin(l)
	return l
}

// certifyApproved asks for a certificate for key f as h, approved by the
// device login l.
func (e *env) certifyApproved(h string, f identity.Factor, l identity.Login, principals ...string) (*identity.Certificate, error) {
	c, err := e.svc.IssueChallenge(e.ctx, identity.PurposeCertificate, h, f)
	if err != nil {
		return nil, err
	}
	return e.svc.IssueCertificate(e.ctx, identity.CertificateRequest{Statement: c.Statement,
		Signature: sign(f, c.Statement).Signature, Principals: principals, Approval: &l})
}

var groupRules = []identity.ClaimPrincipal{
	{Claim: "groups", Value: "admins", Principal: "root-ops"},
	{Claim: "groups", Value: "web team", Principal: "www"},
}

// TestDeviceLoginApprovesACertificateForAnUnprovenKey: a key that is not
// linked at all gets a certificate when a device login by an account
// proven for the identity approves it; the approval is recorded right
// before the certificate, naming the request, the key, the account and
// the principals its claims granted; a group the login has yields its
// principal, one it lacks does not.
func TestDeviceLoginApprovesACertificateForAnUnprovenKey(t *testing.T) {
	e := newCAEnv(t, identity.CertificatePolicy{ClaimPrincipals: groupRules})
	alice := e.login("alice")
	e.claimLogin("alice", alice)
	got, err := e.certifyApproved("alice", k1, e.deviceLogin("alice", "admins", "staff"))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ssh.ParseUserCertificate(got.Certificate)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cert.ValidPrincipals, []string{"alice", "root-ops"}) {
		t.Errorf("principals %q, want alice and root-ops (admins), not www (web team)", cert.ValidPrincipals)
	}
	if want := []identity.PrincipalGrant{{Principal: "root-ops", Claim: "groups", Value: "admins"}}; !slices.Equal(got.Grants, want) {
		t.Errorf("grants %+v", got.Grants)
	}
	log := e.log()
	ap, rec := log[len(log)-2], log[len(log)-1]
	if rec.Seq != got.Record.Seq || rec.Method != identity.MethodSSHCertificate || !rec.From.Same(k1) || !rec.To.Same(alice.Account) {
		t.Fatalf("certificate record %+v", rec)
	}
	if ap.Method != identity.MethodOIDCDeviceApproval || !ap.From.Same(alice.Account) || !ap.To.Same(k1) || ap.Handle != "alice" {
		t.Fatalf("approval record %+v", ap)
	}
	d, err := identity.ParseDeviceApproval(ap.Statement)
	if err != nil {
		t.Fatal(err)
	}
	if d.Request != identity.RequestHash(rec.Statement) || d.Key != k1.Value || len(d.Grants) != 1 || d.Grants[0].Principal != "root-ops" {
		t.Errorf("approval %+v", d)
	}
	if !ap.Committed(identity.ArtifactIDToken) {
		t.Error("the approval's ID token is in its public entry")
	}
	e.wantLevel("alice", k1, identity.LevelNone)

	// Without the group: the handle only.
	got, err = e.certifyApproved("alice", k2, e.deviceLogin("alice", "staff"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Principals, []string{"alice"}) || len(got.Grants) != 0 {
		t.Errorf("a login without the group: principals %q, grants %v", got.Principals, got.Grants)
	}
	// Asking for a principal of a group the login lacks is refused.
	_, err = e.certifyApproved("alice", k2, e.deviceLogin("alice", "web"), "www")
	wantCode(t, err, identity.CodePrincipalNotAllowed)
}

// TestDeviceApprovalRefusals: an account not proven for the identity, a
// login older than the request, and claims the token does not carry
// approve nothing; revoking the approving account's link revokes the
// certificate.
func TestDeviceApprovalRefusals(t *testing.T) {
	e := newCAEnv(t, identity.CertificatePolicy{ClaimPrincipals: groupRules})
	e.claimLogin("alice", e.login("alice"))
	e.claimLogin("mallory", e.login("mallory"))

	_, err := e.certifyApproved("alice", k1, e.deviceLogin("mallory"))
	wantCode(t, err, identity.CodeNotProven)

	old := e.deviceLogin("alice")
	e.clock = e.clock.Add(time.Hour)
	_, err = e.certifyApproved("alice", k1, old)
	wantCode(t, err, identity.CodeExpired)

	once := e.deviceLogin("alice", "admins")
	one, err := e.certifyApproved("alice", k1, once)
	if err != nil {
		t.Fatal(err)
	}
	forged := once
	forged.Claims = map[string][]string{"groups": {"admins", "web team"}}
	_, err = e.certifyApproved("alice", k2, forged)
	wantCode(t, err, identity.CodeBadSignature)

	if r := e.revoked(); len(r) != 0 {
		t.Fatalf("revoked before any revocation: %v", r)
	}
	e.revokeLogin("alice", e.login("alice"))
	if r := e.revoked(); !slices.Equal(r, []int64{one.Record.Seq}) {
		t.Errorf("after revoking the approving account: %v, want [%d]", r, one.Record.Seq)
	}
}

// TestDeviceApprovalStatementRoundTrips: what Marshal writes, Parse
// reads, values with spaces and quotes included.
func TestDeviceApprovalStatementRoundTrips(t *testing.T) {
	d := identity.DeviceApproval{Server: "Kith <https://keys.example.org>", Handle: "alice", Key: k1.Value,
		Request: identity.RequestHash([]byte("x")), Signer: "oidc https://id.example.org alice", Provider: "example",
		ClientID: "kith", Authenticated: time.Unix(1700000000, 0).UTC(), Recorded: time.Unix(1700000060, 0).UTC(),
		Grants: []identity.PrincipalGrant{{Principal: "www", Claim: "groups", Value: `web "team"`}}}
	got, err := identity.ParseDeviceApproval(d.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if got.Handle != d.Handle || got.Request != d.Request || !got.Recorded.Equal(d.Recorded) || !slices.Equal(got.Grants, d.Grants) {
		t.Errorf("parsed %+v, want %+v", got, d)
	}
	for _, bad := range []identity.ClaimPrincipal{{Claim: "gr oups", Value: "a", Principal: "p"}, {Claim: "groups", Value: "", Principal: "p"}, {Claim: "groups", Value: "a", Principal: "p,q"}} {
		if bad.Check() == nil {
			t.Errorf("%+v passes Check", bad)
		}
	}
}

// revokeLogin unlinks l's account from h, approved by a consent login of
// that account.
func (e *env) revokeLogin(h string, l identity.Login) {
	e.t.Helper()
	c := e.issue(identity.PurposeRevoke, h, l.Account)
	if err := e.svc.RevokeWithSession(e.ctx, c.Statement, e.consentOf(l, c.Statement)); err != nil {
		e.t.Fatal(err)
	}
}
