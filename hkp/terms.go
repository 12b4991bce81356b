// terms.go: the selector terms a key can be found by (fingerprints, key
// IDs, emails, digest), shared by lookups (what a query selects by) and the
// cache (what a changed key now matches).

package hkp

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"strings"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
)

// Term prefixes; a term is a prefix and raw bytes (or the lower-cased
// email).
const (
	termFingerprint = "f"
	termKeyID       = "l"
	termShortKeyID  = "s"
	termEmail       = "e"
	termDigest      = "d"
)

func fingerprintTerm(fp []byte) string { return termFingerprint + string(fp) }

func keyIDTerm(id uint64) string {
	return termKeyID + string(binary.BigEndian.AppendUint64(nil, id))
}

func shortKeyIDTerm(id uint32) string {
	return termShortKeyID + string(binary.BigEndian.AppendUint32(nil, id))
}

func emailTerm(email string) string { return termEmail + email }

func digestTerm(d [16]byte) string { return termDigest + string(d[:]) }

// keyTerms is what a key can be found by now.
type keyTerms struct {
	terms   []string
	uids    []string        // lower-cased user ID texts, for word queries
	lexemes map[string]bool // the lexemes of every user ID (keys.Lexemes)
}

// termsOfStored returns the terms of a stored key: its primary and subkey
// fingerprints and key IDs (computed from the packets), its emails and its
// digest.
func termsOfStored(sk *keys.Stored) *keyTerms {
	kt := &keyTerms{}
	kt.addKeyPacket(sk.Fingerprint, sk.Packets, true)
	if k, err := pgp.ParseKey(sk.Packets); err == nil {
		for _, p := range k.Packets() {
			if p.Tag == pgp.TagPublicSubkey {
				kt.addKeyPacket(nil, p.Body, false)
			}
		}
	}
	for _, u := range sk.UserIDs {
		kt.addUserID(u.Text, u.Email)
	}
	kt.terms = append(kt.terms, digestTerm(sk.Digest))
	return kt
}

// termsOfKey returns the terms of a key that passed the policy.
func termsOfKey(k *pgp.Key) *keyTerms {
	kt := &keyTerms{}
	d := k.Describe()
	kt.terms = append(kt.terms, fingerprintTerm(d.Fingerprint), keyIDTerm(d.KeyID), shortKeyIDTerm(d.KeyID32()))
	for _, s := range d.Subkeys {
		kt.terms = append(kt.terms, fingerprintTerm(s.Fingerprint), keyIDTerm(s.KeyID), shortKeyIDTerm(s.KeyID32()))
	}
	for _, u := range d.UserIDs {
		kt.addUserID(u.Text, u.Email)
	}
	kt.terms = append(kt.terms, digestTerm(k.Digest()))
	return kt
}

func (kt *keyTerms) addUserID(text, email string) {
	lower := strings.ToLower(text)
	kt.uids = append(kt.uids, lower)
	if kt.lexemes == nil {
		kt.lexemes = map[string]bool{}
	}
	// The store folds case as its database's locale does: in the C locale
	// (the embedded cluster's) ASCII only, elsewhere also characters such
	// as the Kelvin sign, which fold into ASCII. Both sets are kept.
	for _, l := range append(keys.Lexemes(text), keys.Lexemes(lower)...) {
		kt.lexemes[l] = true
	}
	if email != "" {
		kt.terms = append(kt.terms, emailTerm(strings.ToLower(email)))
	}
}

// addKeyPacket adds the terms of a key packet. For the primary key, fp is
// the known fingerprint and packets the whole key (its first packet is
// the primary key); for a subkey, body is the packet body.
func (kt *keyTerms) addKeyPacket(fp, b []byte, primary bool) {
	body := b
	if primary {
		// The first packet of the canonical binary form, new-format header.
		body = firstPacketBody(b)
	}
	if fp == nil {
		fp = keyFingerprint(body)
	}
	if fp != nil {
		kt.terms = append(kt.terms, fingerprintTerm(fp))
	}
	if id, ok := keyIDOf(fp, body); ok {
		kt.terms = append(kt.terms, keyIDTerm(id), shortKeyIDTerm(uint32(id)))
	}
}

// firstPacketBody returns the body of the first packet of b, which has a
// new-format header (as every canonical key has), or nil.
func firstPacketBody(b []byte) []byte {
	if len(b) < 2 || b[0]&0xc0 != 0xc0 {
		return nil
	}
	var n, h int
	switch l := int(b[1]); {
	case l < 192:
		n, h = l, 2
	case l < 224:
		if len(b) < 3 {
			return nil
		}
		n, h = (l-192)<<8+int(b[2])+192, 3
	case l == 255:
		if len(b) < 6 {
			return nil
		}
		n, h = int(binary.BigEndian.Uint32(b[2:6])), 6
	default:
		return nil // partial lengths never occur in keys
	}
	if n < 0 || h+n > len(b) {
		return nil
	}
	return b[h : h+n]
}

// keyFingerprint computes a v4 or v6 key packet's fingerprint, or nil.
func keyFingerprint(body []byte) []byte {
	if len(body) == 0 {
		return nil
	}
	switch body[0] {
	case 4:
		h := sha1.New()
		h.Write([]byte{0x99, byte(len(body) >> 8), byte(len(body))})
		h.Write(body)
		return h.Sum(nil)
	case 6:
		h := sha256.New()
		h.Write([]byte{0x9b})
		h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(body))))
		h.Write(body)
		return h.Sum(nil)
	}
	return nil
}

// keyIDOf returns the 64-bit key ID of a key packet with fingerprint fp.
func keyIDOf(fp, body []byte) (uint64, bool) {
	if len(body) == 0 {
		return 0, false
	}
	switch body[0] {
	case 4:
		if len(fp) == 20 {
			return binary.BigEndian.Uint64(fp[12:]), true
		}
	case 6:
		if len(fp) == 32 {
			return binary.BigEndian.Uint64(fp[:8]), true
		}
	case 2, 3:
		// version, created (4), validity (2), algorithm, then the RSA
		// modulus as an MPI: the key ID is its low 64 bits.
		if len(body) < 10 {
			return 0, false
		}
		bits := int(binary.BigEndian.Uint16(body[8:10]))
		n := (bits + 7) / 8
		if n < 8 || len(body) < 10+n {
			return 0, false
		}
		return binary.BigEndian.Uint64(body[10+n-8 : 10+n]), true
	}
	return 0, false
}
