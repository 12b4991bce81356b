package api_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/web/api"
)

func TestClaimWithSSHKeyServesIt(t *testing.T) {
	k := newKith(t)
	key := newSSHKey(t, t.TempDir(), "ed25519")
	stmt := k.challenge("alice", key.pub, "claim")
	var doc api.IdentityDoc
	st, code := k.call("POST", "/api/v1/identities", api.ClaimRequest{
		SignedStatement: api.SignedStatement{Statement: stmt, Signature: key.sign(t, stmt, "kith")},
		Label:           "alice@laptop",
	}, &doc)
	if st != 201 {
		t.Fatalf("claim: %d %s", st, code)
	}
	if len(doc.Factors) != 1 || doc.Factors[0].Assurance != "proven" {
		t.Fatalf("claimed identity: %+v", doc)
	}
	st, body := k.get("/users/alice.keys")
	if st != 200 || body != keyOnly(key.pub)+" alice@laptop\n" {
		t.Fatalf("alice.keys: %d %q", st, body)
	}
	if st, _ := k.get("/users/bob.keys"); st != 404 {
		t.Fatalf("bob.keys: %d, want 404", st)
	}
	var owner api.SSHOwner
	if st, code := k.call("GET", "/api/v1/ssh/"+url.PathEscape(doc.Factors[0].Value), nil, &owner); st != 200 || owner.Handle != "alice" {
		t.Fatalf("ssh owner: %d %s %+v", st, code, owner)
	}
	if !strings.HasPrefix(owner.Key, keyOnly(key.pub)) {
		t.Fatalf("owner key %q", owner.Key)
	}
}
