package verify

import (
	"bytes"
	"context"
	"encoding/hex"
	"slices"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/kith-keyserver/kith/identity/keys"
)

// storeOrder is a KeyFinder over keys in the order a store keeps them
// (oldest first), with the store's two fingerprint queries: Fingerprint
// matches a primary key or a subkey, Fingerprints primary keys only.
type storeOrder []struct {
	stored  keys.Stored
	subkeys [][]byte
}

func (s storeOrder) FindKeys(_ context.Context, q keys.Query) ([]keys.Stored, bool, error) {
	var out []keys.Stored
	for _, k := range s {
		switch {
		case len(q.Fingerprint) > 0 && (bytes.Equal(k.stored.Fingerprint, q.Fingerprint) || slices.ContainsFunc(k.subkeys, func(b []byte) bool { return bytes.Equal(b, q.Fingerprint) })),
			slices.ContainsFunc(q.Fingerprints, func(b []byte) bool { return bytes.Equal(b, k.stored.Fingerprint) }):
			out = append(out, k.stored)
		}
	}
	if q.Limit > 0 && len(out) > q.Limit {
		return out[:q.Limit], true, nil
	}
	return out, false, nil
}

// TestStoredKeyIsFoundBehindKeysCarryingItAsASubkey: anyone can bind a
// person's public key to keys of their own as an encryption subkey (no
// back-signature needed); stored before it, they must not hide the key
// whose primary it is, or its holder could never prove possession.
func TestStoredKeyIsFoundBehindKeysCarryingItAsASubkey(t *testing.T) {
	e, err := openpgp.NewEntity("Victor", "", "victor@example.org", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := e.Serialize(&b); err != nil {
		t.Fatal(err)
	}
	fp := e.PrimaryKey.Fingerprint
	other := func(n byte) keys.Stored { return keys.Stored{Fingerprint: bytes.Repeat([]byte{n}, 20)} }
	st := storeOrder{
		{other(1), [][]byte{fp}},
		{other(2), [][]byte{fp}},
		{other(3), [][]byte{fp}},
		{keys.Stored{Fingerprint: fp, Packets: b.Bytes()}, nil},
	}
	k, err := (&Verifier{Keys: st}).StoredKey(context.Background(), hex.EncodeToString(fp))
	if err != nil || !bytes.Equal(k.Fingerprint(), fp) {
		t.Fatalf("StoredKey: %v", err)
	}
}
