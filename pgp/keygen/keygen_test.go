package keygen

import (
	"bytes"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
)

func TestTypicalKeysAreDistinctAndReadable(t *testing.T) {
	keys, err := TypicalKeys(60, 1)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, k := range keys {
		el, err := openpgp.ReadKeyRing(bytes.NewReader(k))
		if err != nil || len(el) != 1 {
			t.Fatalf("key %d: %v (%d entities)", i, err, len(el))
		}
		fp := string(el[0].PrimaryKey.Fingerprint)
		if seen[fp] {
			t.Fatalf("key %d: duplicate fingerprint", i)
		}
		seen[fp] = true
	}
}

func TestTypicalKeysEd25519AreDeterministic(t *testing.T) {
	g1, g2 := New(7), New(7)
	for i := 0; i < 10; i++ {
		a, err := g1.Key(i)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := g2.Key(i)
		if a[7] == 22 && !bytes.Equal(a, b) { // EdDSA primary: fully seeded
			t.Errorf("key %d differs between runs", i)
		}
	}
}

func BenchmarkTypicalKey(b *testing.B) {
	g := New(1)
	if _, err := g.Key(0); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := g.Key(i); err != nil {
			b.Fatal(err)
		}
	}
}
