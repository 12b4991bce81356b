package identity_test

import (
	"context"
	"slices"
	"testing"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/ssh"
)

// TestStrangerCannotClaimASystemAccount: issue 31's attack on the SSH
// CA. A fresh key claims the name of an account that stock images create
// (ubuntu has passwordless sudo on cloud images) to get certificates an
// sshd without AuthorizedPrincipalsFile accepts as that account: the
// claim is refused, at the challenge and at the claim.
func TestStrangerCannotClaimASystemAccount(t *testing.T) {
	e := newCAEnv(t, identity.CertificatePolicy{})
	for _, name := range []string{"ubuntu", "ec2-user", "cloud-user", "centos", "debian", "fedora", "admin",
		"root", "daemon", "www-data", "postgres", "nobody", "systemd-network", "vagrant", "git"} {
		if err := e.claimErr(name, sshKey("stranger-"+name)); identity.CodeOf(err) != identity.CodeReservedHandle {
			t.Errorf("claim %q: %v, want %s", name, err, identity.CodeReservedHandle)
		}
	}
	// A statement for such a claim, however it was issued, is refused.
	f := sshKey("stranger")
	c, err := identity.NewChallenge(server, identity.PurposeClaim, "ubuntu", f, make([]byte, identity.NonceSize), e.clock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: c.Statement, Proof: *sign(f, c.Statement)}); identity.CodeOf(err) != identity.CodeReservedHandle {
		t.Errorf("claim by a statement naming ubuntu: %v", err)
	}
	// Other handles are claimed as ever.
	e.claim("nora", k1)
}

// TestSystemAccountHandleIsNoPrincipal: an identity that holds a system
// account's name from before it was kept gets no certificate naming it;
// the operator grants the account by the principals file.
func TestSystemAccountHandleIsNoPrincipal(t *testing.T) {
	for _, granted := range []bool{false, true} {
		e := newCAEnv(t, identity.CertificatePolicy{Principals: func(h identity.Handle) []string {
			if granted && h == "ubuntu" {
				return []string{"ubuntu"}
			}
			return nil
		}})
		holdFromBefore(t, e, "ubuntu", k1)
		if lvl := e.level("ubuntu", k1); lvl != identity.LevelProven {
			t.Fatalf("the old identity's key is %v", lvl)
		}
		got, err := e.certify("ubuntu", k1, k1, 0)
		if !granted {
			if identity.CodeOf(err) != identity.CodePrincipalNotAllowed {
				t.Errorf("certificate for ubuntu's key: %v, want %s", err, identity.CodePrincipalNotAllowed)
			}
			if _, err := e.certify("ubuntu", k1, k1, 0, "ubuntu"); identity.CodeOf(err) != identity.CodePrincipalNotAllowed {
				t.Errorf("certificate asking for principal ubuntu: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("certificate with ubuntu granted: %v", err)
		}
		cert, err := ssh.ParseUserCertificate(got.Certificate)
		if err != nil || !slices.Equal(cert.ValidPrincipals, []string{"ubuntu"}) {
			t.Errorf("granted: principals %v (%v)", cert.ValidPrincipals, err)
		}
	}
}

// holdFromBefore makes h an identity with f proven, as a claim made
// before h's name was kept would have: written to the store directly.
func holdFromBefore(t *testing.T, e *env, h identity.Handle, f identity.Factor) {
	t.Helper()
	c, err := identity.NewChallenge(server, identity.PurposeClaim, h, f, make([]byte, identity.NonceSize), e.clock)
	if err != nil {
		t.Fatal(err)
	}
	err = e.st.Update(e.ctx, func(ctx context.Context, tx identity.Tx) error {
		if _, err := tx.CreateIdentity(ctx, h, e.clock); err != nil {
			return err
		}
		return tx.Append(ctx, &identity.Evidence{Method: identity.MethodSSHChallenge, Purpose: identity.PurposeClaim,
			Handle: h, From: f, Statement: c.Statement, Signature: sign(f, c.Statement).Signature, Created: e.clock})
	})
	if err != nil {
		t.Fatal(err)
	}
}
