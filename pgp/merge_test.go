package pgp

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/kith-keyserver/kith/identity/testkit"
)

// randomPart returns a random sub-key of canonical key k: the primary, a
// random subset of its components, each with a random subset of its
// signatures (order shuffled).
func randomPart(rng *rand.Rand, k *Key) *Key {
	st, _ := structure(k.Packets())
	out := []Packet{st.primary}
	pick := func(sigs []Packet) {
		for _, i := range rng.Perm(len(sigs)) {
			if rng.IntN(3) > 0 {
				out = append(out, sigs[i])
			}
		}
	}
	pick(st.direct)
	for _, i := range rng.Perm(len(st.comps)) {
		if rng.IntN(4) == 0 {
			continue
		}
		out = append(out, st.comps[i].pkt)
		pick(st.comps[i].sigs)
	}
	return NewKey(out)
}

func TestMergeIsCommutativeAndIdempotent(t *testing.T) {
	_, keys := debianKeys(t, testkit.DebianKeyring)
	rng := rand.New(rand.NewPCG(42, 1))
	var p Policy
	checked := 0
	for i := 0; i < len(keys); i += 15 {
		full := keys[i]
		for round := 0; round < 3; round++ {
			a, b := randomPart(rng, full), randomPart(rng, full)
			ab, _, errAB := p.Merge(a, b)
			ba, _, errBA := p.Merge(b, a)
			if (errAB == nil) != (errBA == nil) {
				t.Fatalf("key %X: merge errors differ: %v / %v", full.Fingerprint(), errAB, errBA)
			}
			if errAB != nil {
				continue // neither part has a self-signature left
			}
			checked++
			if !bytes.Equal(ab.Bytes(), ba.Bytes()) {
				t.Errorf("key %X: Merge(a,b) != Merge(b,a)", full.Fingerprint())
			}
			if again, _, err := p.Merge(ab, a); err != nil || !bytes.Equal(again.Bytes(), ab.Bytes()) {
				t.Errorf("key %X: Merge(Merge(a,b),a) != Merge(a,b) (%v)", full.Fingerprint(), err)
			}
			if self, _, err := p.Merge(ab, ab); err != nil || !bytes.Equal(self.Bytes(), ab.Bytes()) {
				t.Errorf("key %X: Merge(m,m) != m (%v)", full.Fingerprint(), err)
			}
			// Merging the complement back gives the whole key.
			whole, _, err := p.Merge(ab, full)
			if err != nil || !bytes.Equal(whole.Bytes(), full.Bytes()) || whole.Digest() != full.Digest() {
				t.Errorf("key %X: Merge(part, full) != full (%v)", full.Fingerprint(), err)
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d merges checked", checked)
	}
}

func TestMergeBringsInNewMaterial(t *testing.T) {
	alice := genEntity(t, "Alice", "alice@example.org", 1)
	stored, _ := mustApply(t, mustParse(t, entityBytes(t, alice)))
	if err := alice.AddUserId("Alice", "", "alice@work.example", sigConfig(testTime.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if err := alice.AddSigningSubkey(sigConfig(testTime.Add(2 * time.Hour))); err != nil {
		t.Fatal(err)
	}
	if err := alice.RevokeKey(packet.KeyRetired, "", sigConfig(testTime.Add(3*time.Hour))); err != nil {
		t.Fatal(err)
	}
	upload := mustParse(t, entityBytes(t, alice))
	merged, _, err := Policy{}.Merge(stored, upload)
	if err != nil {
		t.Fatal(err)
	}
	d := merged.Describe()
	if len(d.UserIDs) != 2 || len(d.Subkeys) != 2 || !d.Revoked {
		t.Errorf("merged: %d user IDs, %d subkeys, revoked %v", len(d.UserIDs), len(d.Subkeys), d.Revoked)
	}
	bob := mustParse(t, entityBytes(t, genEntity(t, "Bob", "bob@example.org", 2)))
	if _, _, err := (Policy{}).Merge(stored, bob); !errors.Is(err, ErrFingerprintMismatch) {
		t.Errorf("merging different keys: err = %v", err)
	}
}
