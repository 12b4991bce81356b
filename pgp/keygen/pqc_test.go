package keygen

import (
	"bytes"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// TestNewKeyMakesReadableKeys covers the kinds that are quick to make
// (SLH-DSA-SHAKE-128s and -256s take seconds; pgp keeps them in testdata).
func TestNewKeyMakesReadableKeys(t *testing.T) {
	at := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		kind    Kind
		version int
		algos   []packet.PublicKeyAlgorithm
	}{
		{V6MLDSA65, 6, []packet.PublicKeyAlgorithm{packet.PubKeyAlgoMldsa65Ed25519, packet.PubKeyAlgoMlkem768X25519}},
		{V6MLDSA87, 6, []packet.PublicKeyAlgorithm{packet.PubKeyAlgoMldsa87Ed448, packet.PubKeyAlgoMlkem1024X448}},
		{V6SLHDSA128f, 6, []packet.PublicKeyAlgorithm{packet.PubKeyAlgoSlhdsaShake128f, packet.PubKeyAlgoMlkem768X25519}},
		{V6Ed25519, 6, []packet.PublicKeyAlgorithm{packet.PubKeyAlgoEd25519, packet.PubKeyAlgoX25519}},
		{V4MLKEMSubkey, 4, []packet.PublicKeyAlgorithm{packet.PubKeyAlgoEdDSA, packet.PubKeyAlgoECDH, packet.PubKeyAlgoMlkem768X25519}},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			b, err := PublicKey(tc.kind, "Test", "test@example.org", at, 1)
			if err != nil {
				t.Fatal(err)
			}
			el, err := openpgp.ReadKeyRing(bytes.NewReader(b))
			if err != nil || len(el) != 1 {
				t.Fatalf("go-crypto reads %d keys: %v", len(el), err)
			}
			e := el[0]
			algos := []packet.PublicKeyAlgorithm{e.PrimaryKey.PubKeyAlgo}
			for _, s := range e.Subkeys {
				algos = append(algos, s.PublicKey.PubKeyAlgo)
			}
			if e.PrimaryKey.Version != tc.version || len(algos) != len(tc.algos) {
				t.Fatalf("v%d key with algorithms %v, want v%d %v", e.PrimaryKey.Version, algos, tc.version, tc.algos)
			}
			for i := range algos {
				if algos[i] != tc.algos[i] {
					t.Errorf("algorithms %v, want %v", algos, tc.algos)
				}
			}
			again, _ := PublicKey(tc.kind, "Test", "test@example.org", at, 1)
			ea, _ := openpgp.ReadKeyRing(bytes.NewReader(again))
			if !bytes.Equal(ea[0].PrimaryKey.Fingerprint, e.PrimaryKey.Fingerprint) {
				t.Error("the same seed made a different key")
			}
		})
	}
}
