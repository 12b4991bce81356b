package wkd_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/hkp/wkd"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// storeKind stores a keygen key of kind for name <email>.
func (e *env) storeKind(kind keygen.Kind, name, email string, seed int64) *pgp.Key {
	e.t.Helper()
	b, err := keygen.PublicKey(kind, name, email, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), seed)
	if err != nil {
		e.t.Fatal(err)
	}
	k, err := pgp.ParseKey(b)
	if err != nil {
		e.t.Fatal(err)
	}
	applied, _, err := pgp.DefaultPolicy().Apply(k)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.st.AddKey(context.Background(), applied); err != nil {
		e.t.Fatal(err)
	}
	return applied
}

// TestWKDLeavesV6KeysOutBesideAV4One: gpg, WKD's main client, refuses a
// whole answer at a v6 packet; an address verified for a v4 and a v6 key
// answers the v4 one (its ML-KEM subkey kept), and an address verified for
// v6 keys only answers them whole.
func TestWKDLeavesV6KeysOutBesideAV4One(t *testing.T) {
	e := newEnv(t)
	v4 := e.storeKind(keygen.V4MLKEMSubkey, "Dana", "dana@example.org", 1)
	v6 := e.storeKind(keygen.V6MLDSA65, "Dana", "dana@example.org", 2)
	erin := e.storeKind(keygen.V6MLDSA87, "Erin", "erin@example.org", 3)
	e.verifyAddr(v4, "dana@example.org")
	e.verifyAddr(v6, "dana@example.org")
	e.verifyAddr(erin, "erin@example.org")

	for _, c := range []struct {
		local string
		want  *pgp.Key
	}{{"dana", v4}, {"erin", erin}} {
		code, body := e.get("openpgpkey.example.org", "/.well-known/openpgpkey/example.org/hu/"+wkd.Hash(c.local)+"?l="+c.local)
		if code != 200 {
			t.Fatalf("%s: %d %s", c.local, code, body)
		}
		ks, err := pgp.ReadKeys(bytes.NewReader(body))
		if err != nil || len(ks) != 1 || !bytes.Equal(ks[0].Fingerprint(), c.want.Fingerprint()) {
			t.Fatalf("%s: %d keys (%v), want the one of v%d", c.local, len(ks), err, c.want.Describe().Version)
		}
		if !bytes.Equal(ks[0].Bytes(), c.want.Bytes()) {
			t.Errorf("%s: the key served is not the key stored (every packet, one user ID)", c.local)
		}
	}
}
