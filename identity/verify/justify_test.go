package verify_test

import (
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/verify"
)

// TestJustifiesFollowsLinksToTheHandle: records lead from a key to the
// handle through its own possession record, an authorisation by a
// factor that reaches the handle, or a binding an OpenPGP key carries;
// records of another handle, revocations and expired records do not.
func TestJustifiesFollowsLinksToTheHandle(t *testing.T) {
	now := time.Now()
	pgpKey := identity.Factor{Kind: identity.KindPGP, Value: "AB"}
	k1, k2 := identity.Factor{Kind: identity.KindSSH, Value: "k1"}, identity.Factor{Kind: identity.KindSSH, Value: "k2"}
	sub := identity.Factor{Kind: identity.KindSSH, Value: "sub"}
	claim := func(h identity.Handle, f identity.Factor) *identity.Evidence {
		return &identity.Evidence{Method: identity.MethodSSHChallenge, Purpose: identity.PurposeClaim, Handle: h, From: f}
	}
	pgpClaim := &identity.Evidence{Method: identity.MethodPGPChallenge, Purpose: identity.PurposeClaim, Handle: "alice", From: pgpKey}
	binding := &identity.Evidence{Method: identity.MethodPGPAuthSubkeySigned, From: pgpKey, To: sub}
	authz := &identity.Evidence{Method: identity.MethodSSHChallenge, Purpose: identity.PurposeAdd, Handle: "alice", From: k1, To: k2}
	expired := claim("alice", k1)
	expired.Expires = now.Add(-time.Minute)
	revocation := &identity.Evidence{Method: identity.MethodRevocation, Purpose: identity.PurposeRevoke, Handle: "alice", From: k1, To: k2}
	for _, tt := range []struct {
		name string
		f    identity.Factor
		recs []*identity.Evidence
		ok   bool
	}{
		{"its own claim", k1, []*identity.Evidence{claim("alice", k1)}, true},
		{"another handle's claim", k1, []*identity.Evidence{claim("bob", k1)}, false},
		{"an authorisation by a claimed key", k2, []*identity.Evidence{claim("alice", k1), authz}, true},
		{"an authorisation alone", k2, []*identity.Evidence{authz}, false},
		{"a subkey binding of a claimed OpenPGP key", sub, []*identity.Evidence{binding, pgpClaim}, true},
		{"a subkey binding alone", sub, []*identity.Evidence{binding}, false},
		{"an expired claim", k1, []*identity.Evidence{expired}, false},
		{"a revocation", k2, []*identity.Evidence{claim("alice", k1), revocation}, false},
		{"no record", k1, nil, false},
	} {
		err := verify.Justifies("alice", tt.f, tt.recs, now)
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}
