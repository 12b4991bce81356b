package pgp

import (
	"bytes"
	"crypto"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/kith-keyserver/kith/pgp/keygen"
)

// testkit.DebianKeyring is the installed Debian developers' keyring.

// genEntity makes a deterministic Ed25519 key for name <email>.
func genEntity(t testing.TB, name, email string, seed int64) *openpgp.Entity {
	t.Helper()
	e, err := keygen.NewEd25519(name, email, testTime, seed)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// testTime is the creation time of test keys.
var testTime = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// entityBytes serializes e's public key.
func entityBytes(t testing.TB, e *openpgp.Entity) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := keygen.Serialize(&b, e); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// mustParse reads exactly one key.
func mustParse(t testing.TB, b []byte) *Key {
	t.Helper()
	k, err := ParseKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// mustApply applies the default policy and fails on rejection.
func mustApply(t testing.TB, k *Key) (*Key, Report) {
	t.Helper()
	out, rep, err := Policy{}.Apply(k)
	if err != nil {
		t.Fatal(err)
	}
	return out, rep
}

// sigConfig signs at time at.
func sigConfig(at time.Time) *packet.Config {
	return &packet.Config{Time: func() time.Time { return at }, DefaultHash: crypto.SHA256}
}

// serializePacket returns the body of a go-crypto packet.
func serializeBody(t testing.TB, s interface{ Serialize(io.Writer) error }) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := s.Serialize(&b); err != nil {
		t.Fatal(err)
	}
	h, err := parseHeader(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()[h.hdrLen:]
}

// userIDs returns the texts of a canonical key's user IDs.
func userIDs(k *Key) []string {
	var out []string
	for _, u := range k.Describe().UserIDs {
		out = append(out, u.Text)
	}
	return out
}

// readAllKeys reads every key and error from b.
func readAllKeys(t testing.TB, r *Reader) (keys []*Key, errs []error) {
	t.Helper()
	for {
		k, err := r.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			var re *ReadError
			if !errors.As(err, &re) {
				errs = append(errs, err)
				return
			}
			errs = append(errs, err)
			continue
		}
		keys = append(keys, k)
	}
}

// readFileIfPresent reads a file that may be absent.
func readFileIfPresent(path string) ([]byte, error) { return os.ReadFile(path) }
