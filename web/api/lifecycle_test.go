package api_test

import (
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/web/api"
)

// TestAddClaimAndRevokeSSHKeys walks an identity through its life: a
// claim, a key added with both signatures (proven), one added by the
// identity alone (claimed only), and a revocation.
func TestAddClaimAndRevokeSSHKeys(t *testing.T) {
	k := newKith(t)
	dir := t.TempDir()
	first := newSSHKey(t, dir, "ed25519")
	second := newSSHKey(t, dir, "ecdsa")
	claimed := newSSHKey(t, dir, "ed25519")
	stranger := newSSHKey(t, dir, "ed25519")

	s := k.challenge("alice", first.pub, "claim")
	if st, code := k.call("POST", "/api/v1/identities", claim(s, first.sign(t, s, "kith")), nil); st != 201 {
		t.Fatalf("claim: %d %s", st, code)
	}

	// A stranger's key cannot authorise.
	s = k.challenge("alice", second.pub, "add")
	if st, code := k.call("POST", "/api/v1/identities/alice/factors", api.AddRequest{
		Statement: s, Signature: second.sign(t, s, "kith"), By: stranger.pub, BySignature: stranger.sign(t, s, "kith"),
	}, nil); st != 403 || code != "not_proven" {
		t.Fatalf("add by a stranger: %d %q, want 403 not_proven", st, code)
	}
	// The new key alone cannot add itself.
	s = k.challenge("alice", second.pub, "add")
	if st, code := k.call("POST", "/api/v1/identities/alice/factors", api.AddRequest{
		Statement: s, Signature: second.sign(t, s, "kith"),
	}, nil); st != 403 || code != "not_authorized" {
		t.Fatalf("add without consent: %d %q, want 403 not_authorized", st, code)
	}
	// Both signatures: proven.
	s = k.challenge("alice", second.pub, "add")
	if st, code := k.call("POST", "/api/v1/identities/alice/factors", api.AddRequest{
		Statement: s, Signature: second.sign(t, s, "kith"), By: first.pub, BySignature: first.sign(t, s, "kith"), Label: "second",
	}, nil); st != 200 {
		t.Fatalf("add: %d %s", st, code)
	}
	// Only the identity's signature: claimed.
	s = k.challenge("alice", claimed.pub, "add")
	if st, code := k.call("POST", "/api/v1/identities/alice/factors", api.AddRequest{
		Statement: s, By: first.pub, BySignature: first.sign(t, s, "kith"), Label: "claimed",
	}, nil); st != 200 {
		t.Fatalf("claim-only add: %d %s", st, code)
	}

	_, keys := k.get("/users/alice.keys")
	if !strings.Contains(keys, keyOnly(first.pub)) || !strings.Contains(keys, keyOnly(second.pub)) || strings.Contains(keys, keyOnly(claimed.pub)) {
		t.Fatalf("alice.keys:\n%s", keys)
	}
	_, all := k.get("/users/alice.keys?all=1")
	if !strings.Contains(all, keyOnly(claimed.pub)+" claimed-only claimed") {
		t.Fatalf("alice.keys?all=1:\n%s", all)
	}

	// Revoke the second key with the first.
	s = k.challenge("alice", second.pub, "revoke")
	if st, code := k.call("POST", "/api/v1/identities/alice/revocations", api.RevokeRequest{
		Statement: s, By: first.pub, Signature: first.sign(t, s, "kith"),
	}, nil); st != 200 {
		t.Fatalf("revoke: %d %s", st, code)
	}
	_, keys = k.get("/users/alice.keys")
	if strings.Contains(keys, keyOnly(second.pub)) || !strings.Contains(keys, keyOnly(first.pub)) {
		t.Fatalf("alice.keys after revocation:\n%s", keys)
	}
	// A revoked key is no longer a proven factor: it cannot revoke.
	s = k.challenge("alice", first.pub, "revoke")
	if st, code := k.call("POST", "/api/v1/identities/alice/revocations", api.RevokeRequest{
		Statement: s, By: second.pub, Signature: second.sign(t, s, "kith"),
	}, nil); st != 403 || code != "not_proven" {
		t.Fatalf("revoke by a revoked key: %d %q", st, code)
	}
	var doc api.IdentityDoc
	k.call("GET", "/users/alice.json", nil, &doc)
	levels := map[string]string{}
	for _, f := range doc.Factors {
		levels[f.Key] = f.Assurance
	}
	for key, want := range map[string]string{keyOnly(first.pub): "proven", keyOnly(second.pub): "revoked", keyOnly(claimed.pub): "claimed"} {
		if levels[key] != want {
			t.Errorf("%s: %q, want %q (%v)", key, levels[key], want, levels)
		}
	}
	// The log re-verifies.
	var page api.LogPage
	k.call("GET", "/api/v1/log?limit=1000", nil, &page)
	var v verify.LogVerifier
	for _, r := range page.Records {
		e, err := r.Evidence()
		if err != nil {
			t.Fatal(err)
		}
		if fs := v.Add(e); len(fs) > 0 {
			t.Errorf("record %d: %+v", r.Seq, fs)
		}
	}
	if v.Count() != 5 {
		t.Errorf("%d records, want 5", v.Count())
	}
}
