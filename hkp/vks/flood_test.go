package vks_test

import (
	"bytes"
	"context"
	"crypto"
	"slices"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// TestUploadRanksCertificationsTheStoreCanVerify: a VKS upload that
// carries a genuine certification by a stored key beside a flood of newer
// certifications by a key the store does not hold keeps the genuine one.
// The VKS path once applied the key policy without the store's issuers,
// so that the cap kept the newest certifications and the flood evicted
// the only one anybody can verify.
func TestUploadRanksCertificationsTheStoreCanVerify(t *testing.T) {
	e := newEnv(t, envOptions{})
	at := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	entity := func(name string, seed int64) *openpgp.Entity {
		ent, err := keygen.NewEd25519(name, "", at, seed)
		if err != nil {
			t.Fatal(err)
		}
		return ent
	}
	alice, bob, mallory := entity("Alice", 1), entity("Bob", 2), entity("Mallory", 3) // Mallory is never stored
	e.upload(armoredKey(t, serialize(t, bob)))

	uid := "Alice"
	genuine := certify(t, bob, alice, uid, at.Add(time.Hour))
	certs := [][]byte{genuine}
	for i := range pgp.DefaultMaxCertifications {
		certs = append(certs, certify(t, mallory, alice, uid, at.Add(time.Duration(i+2)*time.Hour)))
	}
	e.upload(armoredKey(t, withCertifications(t, serialize(t, alice), certs)))

	stored, _, err := e.st.FindKeys(context.Background(), keys.Query{Fingerprint: alice.PrimaryKey.Fingerprint, Limit: 1})
	if err != nil || len(stored) != 1 {
		t.Fatalf("find alice: %d keys, %v", len(stored), err)
	}
	k, err := pgp.ParseKey(stored[0].Packets)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(k.Packets(), func(p pgp.Packet) bool { return bytes.Equal(p.Body, genuine) }) {
		t.Error("a flood of newer certifications by an unknown key evicted the certification by a stored key")
	}
}

// serialize is e's public key, binary.
func serialize(t *testing.T, e *openpgp.Entity) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := keygen.Serialize(&b, e); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// armoredKey armors a binary key.
func armoredKey(t *testing.T, bin []byte) string {
	t.Helper()
	var b bytes.Buffer
	w, err := armor.Encode(&b, "PGP PUBLIC KEY BLOCK", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(bin)
	w.Close()
	return b.String()
}

// certify returns the body of signer's certification of target's user ID
// uid, made at time at.
func certify(t *testing.T, signer, target *openpgp.Entity, uid string, at time.Time) []byte {
	t.Helper()
	sig := &packet.Signature{
		Version: 4, SigType: packet.SigTypeGenericCert, PubKeyAlgo: signer.PrivateKey.PubKeyAlgo,
		Hash: crypto.SHA256, CreationTime: at,
		IssuerKeyId: &signer.PrimaryKey.KeyId, IssuerFingerprint: signer.PrimaryKey.Fingerprint,
	}
	if err := sig.SignUserId(uid, target.PrimaryKey, signer.PrivateKey, &packet.Config{Time: func() time.Time { return at }}); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := sig.Serialize(&b); err != nil {
		t.Fatal(err)
	}
	// The body after the new-format header go-crypto writes.
	switch p := b.Bytes(); {
	case len(p) > 2 && p[1] < 192:
		return p[2:]
	case len(p) > 3 && p[1] < 224:
		return p[3:]
	case len(p) > 6 && p[1] == 255:
		return p[6:]
	}
	t.Fatalf("unexpected packet header % x", b.Bytes()[:min(b.Len(), 6)])
	return nil
}

// withCertifications is the key bin with certs after its first user ID.
func withCertifications(t *testing.T, bin []byte, certs [][]byte) []byte {
	t.Helper()
	k, err := pgp.ParseKey(bin)
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
