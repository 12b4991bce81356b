package identity_test

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/ssh"
)

// newCAEnv is newEnv with a Service that issues certificates with a real
// CA, under policy.
func newCAEnv(t *testing.T, policy identity.CertificatePolicy) *env {
	t.Helper()
	e := newEnv(t)
	ca, err := ssh.NewCA(bytes.Repeat([]byte{7}, ssh.CASeedSize))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := identity.NewService(e.st, e.v, identity.ServiceOptions{
		Server: server, Now: func() time.Time { return e.clock }, Rand: rand.NewChaCha8([32]byte{2}),
		CA: verify.CertificateAuthority{CA: ca}, Certificates: policy,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	return e
}

// certify asks for a certificate for f as h, signed by signer.
func (e *env) certify(h string, f, signer identity.Factor, validity time.Duration, principals ...string) (*identity.Certificate, error) {
	c, err := e.svc.IssueChallenge(e.ctx, identity.PurposeCertificate, h, f)
	if err != nil {
		return nil, err
	}
	return e.svc.IssueCertificate(e.ctx, identity.CertificateRequest{Statement: c.Statement,
		Signature: sign(signer, c.Statement).Signature, Validity: validity, Principals: principals})
}

// revoked returns the serials RevokedCertificates lists.
func (e *env) revoked() []int64 {
	e.t.Helper()
	recs, err := e.svc.RevokedCertificates(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []int64
	for _, r := range recs {
		out = append(out, r.Seq)
	}
	return out
}

// TestIssueCertificateForProvenKey: a proven key gets a certificate whose
// serial is the record that publishes it, for the handle and the
// operator's extra principals, valid 16 hours by default; the CA key is
// on record before the first certificate, once.
func TestIssueCertificateForProvenKey(t *testing.T) {
	e := newCAEnv(t, identity.CertificatePolicy{
		Principals: func(h identity.Handle) []string {
			if h == "alice" {
				return []string{"deploy", "alice"}
			}
			return nil
		},
		Extensions: map[string]string{"permit-pty": ""},
	})
	e.claim("alice", k1)
	before := len(e.log())
	got, err := e.certify("alice", k1, k1, 0)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ssh.ParseUserCertificate(got.Certificate)
	if err != nil {
		t.Fatal(err)
	}
	log := e.log()
	if len(log) != before+2 || log[before].Method != identity.MethodSSHCAKey || log[before+1].Method != identity.MethodSSHCertificate {
		t.Fatalf("the log grew by %d records", len(log)-before)
	}
	rec := log[before+1]
	if cert.Serial != uint64(rec.Seq) || got.Record.Seq != rec.Seq || !bytes.Equal(rec.SignerKey, got.Certificate) {
		t.Errorf("serial %d, record %d", cert.Serial, rec.Seq)
	}
	if !slices.Equal(cert.ValidPrincipals, []string{"alice", "deploy"}) {
		t.Errorf("principals %v", cert.ValidPrincipals)
	}
	if cert.KeyId != identity.CertificateKeyID("alice", rec.Seq) || rec.Label != cert.KeyId {
		t.Errorf("key ID %q, label %q", cert.KeyId, rec.Label)
	}
	if _, ok := cert.Extensions["permit-pty"]; !ok || len(cert.CriticalOptions) != 0 {
		t.Errorf("options %v, extensions %v", cert.CriticalOptions, cert.Extensions)
	}
	after, end := ssh.CertificateValidity(cert)
	if !end.Equal(e.clock.Add(16*time.Hour)) || after.After(e.clock) || !rec.Expires.Equal(end) {
		t.Errorf("valid %s to %s (record: %s)", after, end, rec.Expires)
	}
	if !bytes.Equal(cert.SignatureKey.Marshal(), e.svc.CAPublicKey()) || !bytes.Equal(log[before].SignerKey, e.svc.CAPublicKey()) {
		t.Error("the certificate is not signed by the recorded CA key")
	}
	again, err := e.certify("alice", k1, k1, time.Hour, "deploy")
	if err != nil {
		t.Fatal(err)
	}
	if again.Record.Seq != rec.Seq+1 || !slices.Equal(again.Principals, []string{"deploy"}) {
		t.Errorf("second certificate: record %d, principals %v", again.Record.Seq, again.Principals)
	}
	if r := e.revoked(); len(r) != 0 {
		t.Errorf("revoked: %v", r)
	}
}

// TestCertificateRefusals: every refusal of issuance has its code, and
// writes nothing.
func TestCertificateRefusals(t *testing.T) {
	e := newCAEnv(t, identity.CertificatePolicy{PerHour: 2, MaxValidity: 2 * time.Hour})
	e.claim("alice", k1)
	e.add("alice", k2, false, k1) // claimed only: k1 consented, k2 never signed
	e.claim("bob", k3)
	count := len(e.log())
	for _, tt := range []struct {
		name string
		run  func() error
		code identity.Code
	}{
		{"unknown handle", func() error { _, err := e.certify("nobody", k1, k1, 0); return err }, identity.CodeUnknownIdentity},
		{"claimed key", func() error { _, err := e.certify("alice", k2, k2, 0); return err }, identity.CodeNotProven},
		{"another identity's key", func() error { _, err := e.certify("bob", k1, k1, 0); return err }, identity.CodeNotProven},
		{"signed by another key", func() error { _, err := e.certify("alice", k1, k3, 0); return err }, identity.CodeWrongKey},
		{"too long", func() error { _, err := e.certify("alice", k1, k1, 3*time.Hour); return err }, identity.CodeBadValidity},
		{"negative", func() error { _, err := e.certify("alice", k1, k1, -time.Hour); return err }, identity.CodeBadValidity},
		{"principal not had", func() error { _, err := e.certify("alice", k1, k1, 0, "root"); return err }, identity.CodePrincipalNotAllowed},
		{"OpenPGP key", func() error { _, err := e.certify("alice", pA, pA, 0); return err }, identity.CodeUnsupported},
		{"bad signature", func() error {
			c := e.issue(identity.PurposeCertificate, "alice", k1)
			_, err := e.svc.IssueCertificate(e.ctx, identity.CertificateRequest{Statement: c.Statement, Signature: sign(k1, []byte("other")).Signature})
			return err
		}, identity.CodeBadSignature},
		{"add statement", func() error {
			c := e.issue(identity.PurposeAdd, "alice", k3)
			_, err := e.svc.IssueCertificate(e.ctx, identity.CertificateRequest{Statement: c.Statement, Signature: sign(k3, c.Statement).Signature})
			return err
		}, identity.CodeWrongPurpose},
		{"expired challenge", func() error {
			c := e.issue(identity.PurposeCertificate, "alice", k1)
			e.clock = e.clock.Add(identity.ChallengeTTL + time.Second)
			defer func() { e.clock = e.clock.Add(-identity.ChallengeTTL - time.Second) }()
			_, err := e.svc.IssueCertificate(e.ctx, identity.CertificateRequest{Statement: c.Statement, Signature: sign(k1, c.Statement).Signature})
			return err
		}, identity.CodeExpired},
	} {
		err := tt.run()
		wantCode(t, err, tt.code)
		if n := len(e.log()); n != count {
			t.Errorf("%s: the log grew from %d to %d records", tt.name, count, n)
		}
	}

	// A replayed request: the same statement and signature twice.
	c := e.issue(identity.PurposeCertificate, "alice", k1)
	req := identity.CertificateRequest{Statement: c.Statement, Signature: sign(k1, c.Statement).Signature}
	if _, err := e.svc.IssueCertificate(e.ctx, req); err != nil {
		t.Fatal(err)
	}
	count = len(e.log())
	_, err := e.svc.IssueCertificate(e.ctx, req)
	wantCode(t, err, identity.CodeNonceUsed)
	if n := len(e.log()); n != count {
		t.Errorf("the replay grew the log from %d to %d records", count, n)
	}

	// Over the rate: two an hour; the third waits for the hour to pass.
	if _, err := e.certify("alice", k1, k1, 0); err != nil {
		t.Fatal(err)
	}
	count = len(e.log())
	_, err = e.certify("alice", k1, k1, 0)
	wantCode(t, err, identity.CodeRateLimited)
	if n := len(e.log()); n != count {
		t.Errorf("over the rate: the log grew from %d to %d records", count, n)
	}
	if _, err := e.certify("bob", k3, k3, 0); err != nil {
		t.Errorf("bob is limited by alice's certificates: %v", err)
	}
	e.clock = e.clock.Add(time.Hour)
	if _, err := e.certify("alice", k1, k1, 0); err != nil {
		t.Errorf("an hour later: %v", err)
	}

	// A server without a CA refuses at the challenge.
	plain := newEnv(t)
	plain.claim("alice", k1)
	_, err = plain.svc.IssueChallenge(plain.ctx, identity.PurposeCertificate, "alice", k1)
	wantCode(t, err, identity.CodeCADisabled)
	_, err = plain.svc.IssueCertificate(plain.ctx, req)
	wantCode(t, err, identity.CodeCADisabled)
}

// TestStrangersBindingGetsNoCertificate: mallory binds alice's SSH key
// into his own, proven OpenPGP key (an auth subkey without the SSH key's
// back-signature): the key is claimed for him. Even holding a signature
// by the key over his own certificate statement, he gets no
// certificate; alice, whose key it is, still does.
func TestStrangersBindingGetsNoCertificate(t *testing.T) {
	e := newCAEnv(t, identity.CertificatePolicy{})
	e.claim("alice", k1)
	e.storeKey(pM, authSub(k1))
	e.claim("mallory", pM)
	e.wantLevel("mallory", k1, identity.LevelClaimed)
	_, err := e.certify("mallory", k1, k1, 0)
	wantCode(t, err, identity.CodeNotProven)
	for _, r := range e.log() {
		if r.Method == identity.MethodSSHCertificate {
			t.Fatalf("a certificate was issued: record %d for %s", r.Seq, r.Handle)
		}
	}
	if _, err := e.certify("alice", k1, k1, 0); err != nil {
		t.Errorf("alice: %v", err)
	}
}

// TestRevokingTheLinkRevokesItsCertificates: revoking the key's link, or
// every factor (deleting the identity), revokes the certificates issued
// for it; linking the key again does not bring them back; expired ones
// drop out of the list.
func TestRevokingTheLinkRevokesItsCertificates(t *testing.T) {
	e := newCAEnv(t, identity.CertificatePolicy{})
	e.claim("alice", k1)
	e.add("alice", k2, true, k1)
	one, err := e.certify("alice", k2, k2, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	two, err := e.certify("alice", k1, k1, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	e.revoke("alice", k2, k1)
	if r := e.revoked(); !slices.Equal(r, []int64{one.Record.Seq}) {
		t.Errorf("after revoking k2: %v, want [%d]", r, one.Record.Seq)
	}
	e.add("alice", k2, true, k1)
	e.wantLevel("alice", k2, identity.LevelProven)
	if r := e.revoked(); !slices.Equal(r, []int64{one.Record.Seq}) {
		t.Errorf("after linking k2 again: %v, want [%d]", r, one.Record.Seq)
	}
	_, a, recs, err := e.svc.Lookup(e.ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	states := map[int64]string{}
	for i := range recs {
		if recs[i].Method == identity.MethodSSHCertificate {
			states[recs[i].Seq] = identity.CertificateState(a, &recs[i], e.clock)
		}
	}
	if states[one.Record.Seq] != "revoked" || states[two.Record.Seq] != "valid" {
		t.Errorf("states %v", states)
	}
	// Deleting the identity revokes every factor, the signer's last.
	e.revoke("alice", k2, k1)
	e.revoke("alice", k1, k1)
	if r := e.revoked(); !slices.Equal(r, []int64{one.Record.Seq, two.Record.Seq}) {
		t.Errorf("after revoking every key: %v", r)
	}
	e.clock = e.clock.Add(time.Hour + time.Second)
	if r := e.revoked(); !slices.Equal(r, []int64{two.Record.Seq}) {
		t.Errorf("an hour later: %v, want only the unexpired [%d]", r, two.Record.Seq)
	}
}

// TestDeletingTheIdentityRevokesItsCertificates: an identity made by an
// OpenID login, with an SSH key it consented to in its session, is
// deleted by its holder: the key's certificate is revoked.
func TestDeletingTheIdentityRevokesItsCertificates(t *testing.T) {
	e := newCAEnv(t, identity.CertificatePolicy{})
	l := e.login("carol")
	e.claimLogin("carol", l)
	if err := e.addWithSessionErr("carol", k1, true, l); err != nil {
		t.Fatal(err)
	}
	cert, err := e.certify("carol", k1, k1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r := e.revoked(); len(r) != 0 {
		t.Fatalf("revoked before the deletion: %v", r)
	}
	if _, err := e.deleteErr("carol", l); err != nil {
		t.Fatal(err)
	}
	if r := e.revoked(); !slices.Equal(r, []int64{cert.Record.Seq}) {
		t.Errorf("after the deletion: %v, want [%d]", r, cert.Record.Seq)
	}
	_, err = e.certify("carol", k1, k1, 0)
	wantCode(t, err, identity.CodeNotProven)
}
