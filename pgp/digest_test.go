package pgp

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/recon/skstest"
)

func TestParseDigest(t *testing.T) {
	d := [16]byte{0xde, 0xad, 0xbe, 0xef, 15: 1}
	for _, s := range []string{FormatDigest(d), strings.ToUpper(FormatDigest(d))} {
		got, err := ParseDigest(s)
		if err != nil || got != d {
			t.Errorf("ParseDigest(%q) = %x, %v", s, got, err)
		}
	}
	for _, bad := range []string{"", "abc", strings.Repeat("g", 32), strings.Repeat("0", 33)} {
		if _, err := ParseDigest(bad); !errors.Is(err, ErrBadDigest) {
			t.Errorf("ParseDigest(%q): err = %v", bad, err)
		}
	}
}

func TestDigestIgnoresPacketOrder(t *testing.T) {
	k, _ := mustApply(t, mustParse(t, entityBytes(t, genEntity(t, "Alice", "alice@example.org", 1))))
	ps := k.Packets()
	rev := make([]Packet, len(ps))
	for i, p := range ps {
		rev[len(ps)-1-i] = p
	}
	if NewKey(rev).Digest() != k.Digest() || NewKey(ps[:len(ps)-1]).Digest() == k.Digest() {
		t.Error("digest must depend on the packet set only")
	}
}

// TestDigestMatchesSKS loads Kith's policy output for a few hundred Debian
// keys into a real SKS and looks each key up by Kith's digest.
func TestDigestMatchesSKS(t *testing.T) {
	skstest.FindBinary(t)
	_, keys := debianKeys(t, testkit.DebianKeyring)
	var sample []*Key
	for i := 0; i < len(keys); i += 3 {
		sample = append(sample, keys[i])
	}
	var all bytes.Buffer
	for _, k := range sample {
		all.Write(k.Bytes())
	}
	s := skstest.Start(t, skstest.Options{Keys: [][]byte{all.Bytes()}})
	code, stats, err := s.Get("/pks/lookup?op=stats")
	if err != nil || code != 200 || !strings.Contains(string(stats), fmt.Sprintf("Total number of keys: %d", len(sample))) {
		t.Fatalf("SKS holds a different key count (%d %v):\n%s", code, err, stats)
	}
	for i, k := range sample {
		hex := k.DigestHex()
		if i%2 == 1 {
			hex = strings.ToUpper(hex) // SKS accepts either case
		}
		code, body, err := s.Get("/pks/lookup?op=hget&options=mr&search=" + hex)
		if err != nil || code != 200 {
			t.Errorf("key %X: hget %s: %d %v", k.Fingerprint(), hex, code, err)
			continue
		}
		got, err := ParseKey(body)
		if err != nil || !bytes.Equal(got.Fingerprint(), k.Fingerprint()) || got.Digest() != k.Digest() {
			t.Errorf("key %X: hget returned another key (%v)", k.Fingerprint(), err)
		}
	}
}
