package identity_test

import (
	"testing"

	"github.com/kith-keyserver/kith/identity"
)

// TestLoginWithKey: a proven key's signature over a login statement logs
// in to its identity, once; a key that is only claimed, revoked, or
// another identity's, does not; a login statement is no claim, add or
// revoke, nor they a login; and a login writes nothing to the log.
func TestLoginWithKey(t *testing.T) {
	e := newEnv(t)
	e.claim("alice", k1)
	e.add("alice", k2, false, k1) // k2 only claimed: no signature of its own
	e.claim("mallory", k3)
	before := len(e.log())

	login := func(h string, f identity.Factor) (*identity.Challenge, identity.Handle, error) {
		t.Helper()
		c := e.issue(identity.PurposeLogin, h, f)
		got, by, err := e.svc.LoginWithKey(e.ctx, c.Statement, *sign(f, c.Statement))
		if err == nil && !by.Same(f) {
			t.Errorf("login by %s reports %s", f, by)
		}
		return c, got, err
	}
	c, h, err := login("alice", k1)
	if err != nil || h != "alice" {
		t.Fatalf("login of alice with k1: %q, %v", h, err)
	}
	if _, _, err := e.svc.LoginWithKey(e.ctx, c.Statement, *sign(k1, c.Statement)); identity.CodeOf(err) != identity.CodeNonceUsed {
		t.Errorf("replayed login: %v, want %s", err, identity.CodeNonceUsed)
	}
	if _, _, err := login("alice", k2); identity.CodeOf(err) != identity.CodeNotProven {
		t.Errorf("login with a claimed key: %v, want %s", err, identity.CodeNotProven)
	}
	if _, _, err := login("alice", k3); identity.CodeOf(err) != identity.CodeNotProven {
		t.Errorf("login to alice with mallory's key: %v, want %s", err, identity.CodeNotProven)
	}
	// k3 signs a statement naming k1: the signature is not k1's.
	c = e.issue(identity.PurposeLogin, "alice", k1)
	if _, _, err := e.svc.LoginWithKey(e.ctx, c.Statement, *sign(k3, c.Statement)); identity.CodeOf(err) != identity.CodeWrongKey {
		t.Errorf("login signed by another key: %v, want %s", err, identity.CodeWrongKey)
	}
	// A claim statement does not log in, and a login statement claims,
	// adds and revokes nothing.
	cl := e.issue(identity.PurposeClaim, "carol", k1)
	if _, _, err := e.svc.LoginWithKey(e.ctx, cl.Statement, *sign(k1, cl.Statement)); identity.CodeOf(err) != identity.CodeWrongPurpose {
		t.Errorf("claim statement as login: %v, want %s", err, identity.CodeWrongPurpose)
	}
	lg := e.issue(identity.PurposeLogin, "alice", k1)
	if err := e.svc.Add(e.ctx, identity.AddRequest{Statement: lg.Statement, New: sign(k1, lg.Statement)}); identity.CodeOf(err) != identity.CodeWrongPurpose {
		t.Errorf("login statement as add: %v, want %s", err, identity.CodeWrongPurpose)
	}
	if err := e.svc.Revoke(e.ctx, identity.RevokeRequest{Statement: lg.Statement, By: *sign(k1, lg.Statement)}); identity.CodeOf(err) != identity.CodeWrongPurpose {
		t.Errorf("login statement as revoke: %v, want %s", err, identity.CodeWrongPurpose)
	}
	if _, err := e.svc.IssueChallenge(e.ctx, identity.PurposeLogin, "nobody", k1); identity.CodeOf(err) != identity.CodeUnknownIdentity {
		t.Errorf("login challenge for no identity: %v", err)
	}
	if n := len(e.log()); n != before {
		t.Errorf("logins appended %d records", n-before)
	}

	e.revoke("alice", k1, k1)
	if _, _, err := login("alice", k1); identity.CodeOf(err) != identity.CodeNotProven {
		t.Errorf("login with a revoked key: %v, want %s", err, identity.CodeNotProven)
	}
}
