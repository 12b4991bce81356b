package verify_test

import (
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/verify"
)

// TestJustifiesFollowsTheAssuranceRules: records prove a key for the
// handle as identity.Assess would, from these records alone: its own
// claim, an authorisation by a factor proven before it and the key's
// possession after it, a subkey binding the SSH key signed (or any
// binding and the SSH key's possession) of a proven OpenPGP key, a mail
// verification for a proven key. A possession record alone, an
// authorisation alone or out of order, an unsigned binding alone, a user
// ID's claim of an address, records of another handle, revocations and
// expired records prove nothing: a server cannot serve a stranger's key
// on the strength of the stranger's own signature.
func TestJustifiesFollowsTheAssuranceRules(t *testing.T) {
	now := time.Now()
	pgpKey := identity.Factor{Kind: identity.KindPGP, Value: "AB"}
	k1, k2 := identity.Factor{Kind: identity.KindSSH, Value: "k1"}, identity.Factor{Kind: identity.KindSSH, Value: "k2"}
	sub := identity.Factor{Kind: identity.KindSSH, Value: "sub"}
	mail := identity.EmailFactor("alice@example.org")
	rec := func(seq int64, m identity.Method, p identity.Purpose, h identity.Handle, from, to identity.Factor) *identity.Evidence {
		return &identity.Evidence{Seq: seq, Method: m, Purpose: p, Handle: h, From: from, To: to}
	}
	none := identity.Factor{}
	claim := func(seq int64, h identity.Handle, f identity.Factor) *identity.Evidence {
		return rec(seq, identity.MethodSSHChallenge, identity.PurposeClaim, h, f, none)
	}
	pgpClaim := rec(1, identity.MethodPGPChallenge, identity.PurposeClaim, "alice", pgpKey, none)
	signedBinding := rec(2, identity.MethodPGPAuthSubkeySigned, "", "", pgpKey, sub)
	binding := rec(2, identity.MethodPGPAuthSubkey, "", "", pgpKey, sub)
	subPossession := rec(3, identity.MethodSSHChallenge, identity.PurposeAdd, "alice", sub, none)
	authz := rec(2, identity.MethodSSHChallenge, identity.PurposeAdd, "alice", k1, k2)
	possession := rec(3, identity.MethodSSHChallenge, identity.PurposeAdd, "alice", k2, none)
	early := rec(1, identity.MethodSSHChallenge, identity.PurposeAdd, "alice", k2, none)
	expired := claim(1, "alice", k1)
	expired.Expires = now.Add(-time.Minute)
	revocation := rec(4, identity.MethodRevocation, identity.PurposeRevoke, "alice", k1, k2)
	mailed := rec(2, identity.MethodEmailVerified, "", "", pgpKey, mail)
	uid := rec(2, identity.MethodPGPUIDSelfSig, "", "", pgpKey, mail)
	for _, tt := range []struct {
		name string
		f    identity.Factor
		recs []*identity.Evidence
		ok   bool
	}{
		{"its own claim", k1, []*identity.Evidence{claim(1, "alice", k1)}, true},
		{"another handle's claim", k1, []*identity.Evidence{claim(1, "bob", k1)}, false},
		{"an authorisation by a claimed key and possession", k2, []*identity.Evidence{claim(1, "alice", k1), authz, possession}, true},
		{"an authorisation by a claimed key alone", k2, []*identity.Evidence{claim(1, "alice", k1), authz}, false},
		{"a possession record alone", k2, []*identity.Evidence{possession}, false},
		{"possession before the authorisation", k2, []*identity.Evidence{claim(1, "alice", k1), authz, early}, false},
		{"an authorisation by a key claimed after it", k2, []*identity.Evidence{claim(5, "alice", k1), authz, possession}, false},
		{"an authorisation alone", k2, []*identity.Evidence{authz}, false},
		{"a signed subkey binding of a claimed OpenPGP key", sub, []*identity.Evidence{signedBinding, pgpClaim}, true},
		{"a signed subkey binding alone", sub, []*identity.Evidence{signedBinding}, false},
		{"an unsigned subkey binding of a claimed OpenPGP key", sub, []*identity.Evidence{binding, pgpClaim}, false},
		{"an unsigned subkey binding and the subkey's possession", sub, []*identity.Evidence{binding, pgpClaim, subPossession}, true},
		{"a mail verification for a claimed OpenPGP key", mail, []*identity.Evidence{pgpClaim, mailed}, true},
		{"a user ID's claim of the address", mail, []*identity.Evidence{pgpClaim, uid}, false},
		{"an expired claim", k1, []*identity.Evidence{expired}, false},
		{"a revocation", k2, []*identity.Evidence{claim(1, "alice", k1), revocation}, false},
		{"no record", k1, nil, false},
	} {
		err := verify.Justifies("alice", tt.f, tt.recs, now)
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}
