package hkp

import (
	"bytes"
	"crypto"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/kith-keyserver/kith/pgp"
)

// certification is signer's generic certification of uid on target,
// made at at, as a packet body; padding > 0 adds a notation of that many
// bytes (a stranger's bulky certification, kept unverified).
func certification(t testing.TB, signer, target *openpgp.Entity, uid string, at time.Time, padding int) []byte {
	t.Helper()
	sig := &packet.Signature{
		Version: 4, SigType: packet.SigTypeGenericCert, PubKeyAlgo: signer.PrivateKey.PubKeyAlgo,
		Hash: crypto.SHA256, CreationTime: at,
		IssuerKeyId: &signer.PrimaryKey.KeyId, IssuerFingerprint: signer.PrimaryKey.Fingerprint,
	}
	if padding > 0 {
		sig.Notations = []*packet.Notation{{Name: "pad@example.org", Value: bytes.Repeat([]byte{'x'}, padding)}}
	}
	if err := sig.SignUserId(uid, target.PrimaryKey, signer.PrivateKey, &packet.Config{Time: func() time.Time { return at }}); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := sig.Serialize(&b); err != nil {
		t.Fatal(err)
	}
	return newFormatBody(t, b.Bytes())
}

// newFormatBody strips the new-format header go-crypto writes.
func newFormatBody(t testing.TB, b []byte) []byte {
	t.Helper()
	switch {
	case len(b) > 2 && b[1] < 192:
		return b[2:]
	case len(b) > 3 && b[1] < 224:
		return b[3:]
	case len(b) > 6 && b[1] == 255:
		return b[6:]
	}
	t.Fatalf("unexpected packet header % x", b[:min(len(b), 6)])
	return nil
}

// withCertifications is e's public key with certs after its first user ID.
func withCertifications(t testing.TB, e *openpgp.Entity, certs [][]byte) []byte {
	t.Helper()
	k, err := pgp.ParseKey(binaryKey(t, e))
	if err != nil {
		t.Fatal(err)
	}
	ps := k.Packets()
	i := slices.IndexFunc(ps, func(p pgp.Packet) bool { return p.Tag == pgp.TagUserID })
	var extra []pgp.Packet
	for _, c := range certs {
		extra = append(extra, pgp.Packet{Tag: pgp.TagSignature, Body: c})
	}
	return pgp.NewKey(slices.Concat(ps[:i+1], extra, ps[i+1:])).Bytes()
}

// servedPackets fetches fpr with op=get and returns its packets' bodies.
func servedPackets(t *testing.T, ts *testServer, fpr string) [][]byte {
	t.Helper()
	r := ts.lookup("op=get&options=mr&search=0x" + fpr)
	if r.code != 200 {
		t.Fatalf("get %s: %d %s", fpr, r.code, r.body)
	}
	blk, err := armor.Decode(strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	var bin bytes.Buffer
	if _, err := bin.ReadFrom(blk.Body); err != nil {
		t.Fatal(err)
	}
	k, err := pgp.ParseKey(bin.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, p := range k.Packets() {
		out = append(out, p.Body)
	}
	return out
}

// Attack (issue 12): "keep the newest 100 certifications per user ID"
// trusted the uploader's timestamps, so 100 garbage certifications dated
// 2096 pushed out a genuine one. Now signatures dated more than a day
// ahead are dropped, and a certification that verifies against a stored
// key outranks any number that do not, whatever their dates.
func TestCertificationFloodCannotEvictAVerifiedCertification(t *testing.T) {
	ts := newTestServer(t, Options{})
	alice := newEntity(t, "Alice", "alice@example.org", 1)
	bob := newEntity(t, "Bob", "bob@example.org", 2)
	mallory := newEntity(t, "Mallory", "mallory@example.org", 3) // never uploaded
	uid := "Alice <alice@example.org>"
	fpr := fpHex(alice)
	ts.mustAdd(armored(t, binaryKey(t, bob)))

	genuine := certification(t, bob, alice, uid, testTime.Add(time.Hour), 0)
	ts.mustAdd(armored(t, withCertifications(t, alice, [][]byte{genuine})))
	has := func(want []byte) bool {
		return slices.ContainsFunc(servedPackets(t, ts, fpr), func(b []byte) bool { return bytes.Equal(b, want) })
	}
	if !has(genuine) {
		t.Fatal("Bob's certification is not served after its upload")
	}

	// 100 certifications dated 2096.
	var future [][]byte
	for i := range pgp.DefaultMaxCertifications {
		future = append(future, certification(t, mallory, alice, uid, time.Date(2096, 1, 1, 0, i, 0, 0, time.UTC), 0))
	}
	r := ts.add(armored(t, withCertifications(t, alice, future)))
	if r.code != 200 || !strings.Contains(r.body, "1 unchanged") {
		t.Errorf("upload of 100 certifications dated 2096: %d %s, want the key unchanged", r.code, r.body)
	}
	if !has(genuine) {
		t.Error("certifications dated 2096 evicted Bob's certification")
	}

	// 100 certifications dated in the past, all newer than Bob's, by a key
	// the store does not hold: they are kept only beside Bob's.
	var flood [][]byte
	for i := range pgp.DefaultMaxCertifications {
		flood = append(flood, certification(t, mallory, alice, uid, testTime.Add(time.Duration(i+2)*time.Hour), 0))
	}
	ts.mustAdd(armored(t, withCertifications(t, alice, flood)))
	served := servedPackets(t, ts, fpr)
	if !has(genuine) {
		t.Error("a flood of newer unverifiable certifications evicted Bob's certification")
	}
	third := 0
	for _, b := range served {
		if slices.ContainsFunc(flood, func(f []byte) bool { return bytes.Equal(f, b) }) {
			third++
		}
	}
	if third != pgp.DefaultMaxCertifications-1 {
		t.Errorf("served %d of the flood, want %d (the cap less Bob's)", third, pgp.DefaultMaxCertifications-1)
	}
}

// A v3 fingerprint (32 hex digits, MD5) is a fingerprint search, as in SKS:
// it answers (here 404, no such key), never 400.
func TestV3FingerprintSearchAnswers(t *testing.T) {
	ts := newTestServer(t, Options{})
	for _, op := range []string{"get", "index"} {
		r := ts.lookup("op=" + op + "&options=mr&search=0x00112233445566778899AABBCCDDEEFF")
		if r.code != 404 {
			t.Errorf("op=%s by v3 fingerprint: %d %s, want 404", op, r.code, r.body)
		}
	}
}

// SKS parses exact=on and ignores it, and neither SKS nor Hockeypuck puts
// signatures in a machine-readable vindex (it is the mr index). Kith
// answers both the same way, so scripts written against them agree.
func TestExactAndMachineReadableVindexAnswerAsSKS(t *testing.T) {
	ts := newTestServer(t, Options{})
	alice := newEntity(t, "Alice Exact", "alice@example.org", 11)
	ts.mustAdd(armored(t, binaryKey(t, alice)))
	base := ts.lookup("op=index&options=mr&search=alice")
	if base.code != 200 || !strings.Contains(base.body, "pub:"+fpHex(alice)) {
		t.Fatalf("mr index: %d %s", base.code, base.body)
	}
	for _, q := range []string{
		"op=index&options=mr&search=alice&exact=on",
		"op=index&options=mr,exact&search=alice",
		"op=vindex&options=mr&search=alice",
		"op=vindex&options=mr&search=alice&exact=on",
	} {
		if r := ts.lookup(q); r.code != base.code || r.body != base.body {
			t.Errorf("%s: %d\n%s\nwant the mr index:\n%s", q, r.code, r.body, base.body)
		}
	}
}
