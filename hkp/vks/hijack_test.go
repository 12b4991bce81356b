package vks_test

import (
	"bytes"
	"crypto"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/pgp"
)

// TestAKeyCarryingTheVerifiedKeyAsSubkeyIsNotServed: anyone can bind
// another person's public key to a key of their own as an encryption
// subkey (it needs no back-signature). Such a key, stored before its
// victim's, is neither the upload's answer for the victim's fingerprint
// nor served by email for the address verified for the victim's key.
func TestAKeyCarryingTheVerifiedKeyAsSubkeyIsNotServed(t *testing.T) {
	e := newEnv(t, envOptions{})
	victim, err := openpgp.NewEntity("Victor", "", "victor@example.org", &packet.Config{Algorithm: packet.PubKeyAlgoRSA, RSABits: 2048})
	if err != nil {
		t.Fatal(err)
	}
	var victimKey bytes.Buffer
	if err := victim.Serialize(&victimKey); err != nil {
		t.Fatal(err)
	}
	mallory, err := openpgp.NewEntity("Mallory", "", "mallory@example.org", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	grafted := *victim.PrimaryKey
	grafted.IsSubkey = true
	sig := &packet.Signature{Version: mallory.PrimaryKey.Version, SigType: packet.SigTypeSubkeyBinding,
		PubKeyAlgo: mallory.PrimaryKey.PubKeyAlgo, Hash: crypto.SHA256, CreationTime: time.Now(),
		IssuerKeyId: &mallory.PrimaryKey.KeyId, IssuerFingerprint: mallory.PrimaryKey.Fingerprint,
		FlagsValid: true, FlagEncryptCommunications: true, FlagEncryptStorage: true}
	if err := sig.SignKey(&grafted, mallory.PrivateKey, nil); err != nil {
		t.Fatal(err)
	}
	mallory.Subkeys = append(mallory.Subkeys, openpgp.Subkey{PublicKey: &grafted, Sig: sig})
	var malloryKey bytes.Buffer
	if err := mallory.Serialize(&malloryKey); err != nil {
		t.Fatal(err)
	}
	e.upload(armoredKey(t, malloryKey.Bytes()))
	r := e.upload(armoredKey(t, victimKey.Bytes()))
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
