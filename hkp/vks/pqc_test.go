package vks_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/kith-keyserver/kith/pgp/keygen"
)

// TestVKSServesV6PQCKeysWhole: a v6 ML-DSA key with its ML-KEM subkey is
// uploaded, verified and served whole, as any other, by its 64-digit
// fingerprint and by its verified address, for the VKS clients that read
// v6 keys (Sequoia, OpenPGP.js).
func TestVKSServesV6PQCKeysWhole(t *testing.T) {
	e := newEnv(t, envOptions{})
	ent, err := keygen.NewKey(keygen.V6MLDSA65, "Quinn", "quinn@example.org", time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), 1)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	w, _ := armor.Encode(&b, "PGP PUBLIC KEY BLOCK", nil)
	if err := keygen.Serialize(w, ent); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r := e.upload(b.String())
	if len(r.KeyFpr) != 64 || r.Token == "" {
		t.Fatalf("upload answer %+v", r)
	}
	if code, body := e.request("verify", r.Token, "quinn@example.org"); code != 200 {
		t.Fatalf("request-verify: %d %s", code, body)
	}
	if _, err := e.follow(e.link("quinn@example.org")); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/vks/v1/by-fingerprint/" + r.KeyFpr, "/vks/v1/by-email/quinn@example.org"} {
		code, body := e.do("GET", path, "")
		if code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		el, err := openpgp.ReadArmoredKeyRing(strings.NewReader(body))
		if err != nil || len(el) != 1 {
			t.Fatalf("%s: %d keys (%v)", path, len(el), err)
		}
		k := el[0]
		if k.PrimaryKey.Version != 6 || k.PrimaryKey.PubKeyAlgo != packet.PubKeyAlgoMldsa65Ed25519 || len(k.Subkeys) != 1 ||
			k.Subkeys[0].PublicKey.PubKeyAlgo != packet.PubKeyAlgoMlkem768X25519 || len(k.Identities) != 1 {
			t.Errorf("%s: v%d key of algorithm %d, %d subkeys, %d user IDs", path, k.PrimaryKey.Version, k.PrimaryKey.PubKeyAlgo, len(k.Subkeys), len(k.Identities))
		}
	}
}

// TestVKSByEmailLeavesV6KeysOutBesideV4Ones: people pipe VKS answers into
// gpg --import, which refuses a whole answer at a v6 key, so an address
// verified for a v4 and a v6 key is answered with the v4 key alone
// (pgp.ForLegacyClients); the v6 key is still served by its fingerprint.
func TestVKSByEmailLeavesV6KeysOutBesideV4Ones(t *testing.T) {
	e := newEnv(t, envOptions{})
	created := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	var fprs []string
	for i, kind := range []keygen.Kind{keygen.V4MLKEMSubkey, keygen.V6Ed25519} {
		ent, err := keygen.NewKey(kind, "Rosa", "rosa@example.org", created, int64(10+i))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		w, _ := armor.Encode(&b, "PGP PUBLIC KEY BLOCK", nil)
		if err := keygen.Serialize(w, ent); err != nil {
			t.Fatal(err)
		}
		w.Close()
		r := e.upload(b.String())
		if code, body := e.request("verify", r.Token, "rosa@example.org"); code != 200 {
			t.Fatalf("request-verify: %d %s", code, body)
		}
		if _, err := e.follow(e.link("rosa@example.org")); err != nil {
			t.Fatal(err)
		}
		fprs = append(fprs, r.KeyFpr)
	}
	code, body := e.do("GET", "/vks/v1/by-email/rosa@example.org", "")
	el, err := openpgp.ReadArmoredKeyRing(strings.NewReader(body))
	if code != 200 || err != nil || len(el) != 1 || el[0].PrimaryKey.Version != 4 {
		t.Fatalf("by-email: %d, %d keys (%v), want the v4 key alone:\n%s", code, len(el), err, body)
	}
	code, body = e.do("GET", "/vks/v1/by-fingerprint/"+fprs[1], "")
	if el, err := openpgp.ReadArmoredKeyRing(strings.NewReader(body)); code != 200 || err != nil || len(el) != 1 || el[0].PrimaryKey.Version != 6 {
		t.Fatalf("by-fingerprint of the v6 key: %d (%v)", code, err)
	}
}
