package vks_test

import (
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// TestAKeyCarryingTheVerifiedKeyAsSubkeyIsNotServed: anyone can bind
// another person's public key to a key of their own as an encryption
// subkey (it needs no back-signature). Such a key, stored before its
// victim's, is neither the upload's answer for the victim's fingerprint
// nor served by email for the address verified for the victim's key.
func TestAKeyCarryingTheVerifiedKeyAsSubkeyIsNotServed(t *testing.T) {
	e := newEnv(t, envOptions{})
	victimKey, malloryKey, _, err := keygen.GraftedSubkey()
	if err != nil {
		t.Fatal(err)
	}
	e.upload(armoredKey(t, malloryKey))
	r := e.upload(armoredKey(t, victimKey))
	if r.Status["victor@example.org"] != "unpublished" || r.Token == "" {
		t.Fatalf("victor's upload answer %+v", r)
	}
	if code, body := e.request("verify", r.Token, "victor@example.org"); code != 200 {
		t.Fatalf("request-verify: %d %s", code, body)
	}
	if _, err := e.follow(e.link("victor@example.org")); err != nil {
		t.Fatal(err)
	}
	code, body := e.do("GET", "/vks/v1/by-email/victor@example.org", "")
	if code != 200 {
		t.Fatalf("by-email: %d %s", code, body)
	}
	ks, _ := pgp.ReadKeys(strings.NewReader(body))
	if len(ks) != 1 || identity.PGPFactor(ks[0].Fingerprint()).Value != r.KeyFpr {
		var got []string
		for _, k := range ks {
			got = append(got, identity.PGPFactor(k.Fingerprint()).Value)
		}
		t.Errorf("by-email served %v, want only victor's %s", got, r.KeyFpr)
	}
}
