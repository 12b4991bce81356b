// describe.go: the facts about a key that indexes and HKP index lines are
// built from, computed once from the verified self-signatures.

package pgp

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// Description is what Kith knows about a key after the policy: identities,
// algorithms, validity periods and revocations, all taken from valid
// self-signatures only.
type Description struct {
	// Version is the primary key packet version (3, 4 or 6).
	Version int
	// Fingerprint is 20 bytes (v4), 32 bytes (v6) or 16 bytes (v3).
	Fingerprint []byte
	// KeyID is the 64-bit key ID: the last 8 fingerprint bytes for v4, the
	// first 8 for v6, the low 64 bits of the modulus for v3.
	KeyID uint64
	// Algorithm is the public-key algorithm ID (RFC 9580 section 9.1).
	Algorithm packet.PublicKeyAlgorithm
	// Bits is the key size in bits (RSA/DSA/ElGamal modulus or prime; for
	// elliptic curves the curve's size as gpg reports it, e.g. 255).
	Bits int
	// Curve is the curve name as gpg spells it ("ed25519", "cv25519",
	// "nistp256", "brainpoolP256r1", ...), empty for RSA, DSA and ElGamal.
	Curve string
	// Created is the primary key's creation time.
	Created time.Time
	// Expires is when the primary key expires (zero: never), from the
	// newest valid self-signature carrying a key expiration time.
	Expires time.Time
	// Revoked is set when the key carries a valid self-revocation.
	Revoked bool
	// Revocation is the newest valid self-revocation's date and reason
	// (zero when Revoked is not set).
	Revocation Revocation
	// Capabilities of the primary key (from its key flags, or its algorithm).
	Capabilities Capabilities
	// UserIDs are the kept user IDs in canonical order.
	UserIDs []UserID
	// UserAttributes is the number of kept user attributes (photo IDs).
	UserAttributes int
	// Subkeys are the kept subkeys in canonical order.
	Subkeys []Subkey
}

// KeyID32 returns the 32-bit (short) key ID.
func (d Description) KeyID32() uint32 { return uint32(d.KeyID) }

// FingerprintHex returns the fingerprint as upper-case hex.
func (d Description) FingerprintHex() string {
	return strings.ToUpper(hex.EncodeToString(d.Fingerprint))
}

// Capabilities are what a key may be used for.
type Capabilities struct {
	Certify, Sign, Encrypt, Authenticate bool
}

// String returns the gpg-style usage letters, e.g. "sc" or "e".
func (c Capabilities) String() string {
	var b strings.Builder
	for _, f := range []struct {
		on bool
		c  byte
	}{{c.Sign, 's'}, {c.Certify, 'c'}, {c.Encrypt, 'e'}, {c.Authenticate, 'a'}} {
		if f.on {
			b.WriteByte(f.c)
		}
	}
	return b.String()
}

// UserID is one kept user ID.
type UserID struct {
	// Text is the user ID as stored (normally UTF-8).
	Text string
	// Email is the lower-cased address the user ID carries (UserIDAddress):
	// empty when it carries none, or more than one reading of one.
	Email string
	// Created is the creation time of the newest valid self-certification.
	Created time.Time
	// Expires is when that certification expires (zero: never).
	Expires time.Time
	// Revoked is set when a valid self-revocation is newer than every valid
	// self-certification.
	Revoked bool
	// Revocation is that self-revocation's date and reason (zero when
	// Revoked is not set).
	Revocation Revocation
	// Primary is set on the one primary user ID: among the user IDs not
	// revoked (all, when every one is), the newest certification with the
	// primary-user-ID flag, else the newest certification.
	Primary bool
	// Certifications are the third-party certifications kept on the user
	// ID. When Attested is set the key's holder attested certifications
	// (attest.go), and these are exactly the attested ones.
	Certifications []Certification
	Attested       bool
}

// Revocation is when and why a key, user ID or subkey was revoked, as the
// revocation signature says.
type Revocation struct {
	// At is the revocation signature's creation time.
	At time.Time
	// Reason is the signature's Reason for Revocation subpacket (RFC 9580
	// section 5.2.3.31); nil when it carries none.
	Reason *RevocationReason
}

// RevocationReason is a revocation's stated reason: a code and the
// holder's free text.
type RevocationReason struct {
	// Code is the reason code: 0 no reason specified, 1 superseded,
	// 2 compromised, 3 retired (keys), 32 user ID no longer valid.
	Code uint8
	// Text is the human-readable explanation, as the holder wrote it.
	Text string
}

// CodeName spells out the reason code, e.g. "key material has been
// compromised".
func (r RevocationReason) CodeName() string {
	switch r.Code {
	case 0:
		return "no reason specified"
	case 1:
		return "key is superseded"
	case 2:
		return "key material has been compromised"
	case 3:
		return "key is retired and no longer used"
	case 32:
		return "user ID information is no longer valid"
	}
	return fmt.Sprintf("reason code %d", r.Code)
}

// revocationOf returns the revocation s describes.
func revocationOf(s *selfSig) Revocation {
	return Revocation{At: s.created, Reason: s.reason}
}

// newer reports whether s is a revocation newer than r.
func (r Revocation) newer(s *selfSig) bool { return r.At.IsZero() || s.created.After(r.At) }

// Certification is a third-party certification of a user ID.
type Certification struct {
	// Issuer is the certifying key's ID (0 when the signature names none
	// that Kith reads).
	Issuer  uint64
	Created time.Time
}

// Subkey is one kept subkey.
type Subkey struct {
	Version     int
	Fingerprint []byte
	KeyID       uint64
	Algorithm   packet.PublicKeyAlgorithm
	Bits        int
	Curve       string
	Created     time.Time
	Expires     time.Time // zero: never
	Revoked     bool
	// Revocation is the newest valid revocation's date and reason (zero
	// when Revoked is not set).
	Revocation   Revocation
	Capabilities Capabilities
	// SignedBySubkey is set when the newest binding embeds a valid
	// signature by the subkey itself (a primary-key binding signature):
	// the subkey's holder, not only the primary key's, made the binding.
	SignedBySubkey bool
	body           []byte
	pub            *packet.PublicKey
}

// KeyID32 returns the subkey's 32-bit key ID.
func (s Subkey) KeyID32() uint32 { return uint32(s.KeyID) }

// PublicKey returns go-crypto's parse of the subkey (e.g. for an SSH
// conversion of an authentication subkey), or nil when go-crypto does not
// support its algorithm.
func (s Subkey) PublicKey() *packet.PublicKey { return s.pub }

// Packet returns the subkey's packet (tag and original body).
func (s Subkey) Packet() Packet { return Packet{Tag: TagPublicSubkey, Body: s.body} }

// Describe returns the key's description. For a key a Policy produced it
// was computed from the verified self-signatures; for any other key it is
// computed now by applying the default policy, and is the zero Description
// when that policy rejects the key.
func (k *Key) Describe() Description {
	if k.applied != nil {
		return k.applied.desc
	}
	out, _, err := Policy{}.Apply(k)
	if err != nil {
		return Description{}
	}
	return out.applied.desc
}

// describe builds the description of a key that passed the policy.
func describe(prim *keyMaterial, direct []keptSig, uids, uats, subs []*keptComp) Description {
	d := Description{
		Version:        prim.version,
		Fingerprint:    prim.fpr,
		KeyID:          prim.keyID,
		Algorithm:      prim.algo,
		Created:        prim.created,
		UserAttributes: len(uats),
	}
	d.Bits, d.Curve = keySize(prim)
	if prim.version <= 3 && prim.v3ValidDays > 0 {
		d.Expires = prim.created.Add(time.Duration(prim.v3ValidDays) * 24 * time.Hour)
	}

	// The newest self-signature that speaks for the primary key: direct-key
	// signatures and the primary user ID's certification.
	var keySig *selfSig
	consider := func(s *selfSig) {
		if s != nil && !s.revocation && !s.attestation && (keySig == nil || s.created.After(keySig.created)) {
			keySig = s
		}
	}
	for _, s := range direct {
		if s.self != nil && s.self.revocation {
			d.Revoked = true
			if d.Revocation.newer(s.self) {
				d.Revocation = revocationOf(s.self)
			}
		}
		consider(s.self)
	}

	var primaryIdx = -1
	var primaryAt time.Time
	var primaryFlag, primaryRevoked bool
	for i, c := range uids {
		u := UserID{Text: string(c.pkt.Body), Email: UserIDAddress(string(c.pkt.Body))}
		var cert *selfSig
		var revocation Revocation // the newest self-revocation
		for _, s := range c.sigs {
			if s.self == nil {
				if s.info.sigType >= sigTypeGenericCert && s.info.sigType <= sigTypePositiveCert {
					u.Certifications = append(u.Certifications, Certification{Issuer: s.info.issuerKeyID(), Created: time.Unix(s.info.created, 0).UTC()})
				}
				continue
			}
			if s.self.attestation {
				u.Attested = true
				continue
			}
			if s.self.revocation {
				if revocation.newer(s.self) {
					revocation = revocationOf(s.self)
				}
				continue
			}
			if cert == nil || !s.self.created.Before(cert.created) {
				cert = s.self
			}
		}
		u.Revoked = !revocation.At.IsZero() && (cert == nil || !revocation.At.Before(cert.created))
		if u.Revoked {
			u.Revocation = revocation
		}
		if cert != nil {
			u.Created = cert.created
			if cert.sigLifetime > 0 {
				u.Expires = cert.created.Add(time.Duration(cert.sigLifetime) * time.Second)
			}
			// A user ID that is not revoked beats one that is, as gpg
			// chooses.
			better := primaryIdx < 0 ||
				(!u.Revoked && primaryRevoked) ||
				(u.Revoked == primaryRevoked && cert.primaryID && !primaryFlag) ||
				(u.Revoked == primaryRevoked && cert.primaryID == primaryFlag && cert.created.After(primaryAt))
			if better {
				primaryIdx, primaryAt, primaryFlag, primaryRevoked = i, cert.created, cert.primaryID, u.Revoked
			}
		}
		d.UserIDs = append(d.UserIDs, u)
	}
	if primaryIdx >= 0 {
		d.UserIDs[primaryIdx].Primary = true
		for _, s := range uids[primaryIdx].sigs {
			consider(s.self)
		}
	}
	if keySig != nil && keySig.keyLifetime > 0 {
		d.Expires = prim.created.Add(time.Duration(keySig.keyLifetime) * time.Second)
	}
	d.Capabilities = capabilities(prim.algo, keySig)
	if keySig == nil || !keySig.flagsValid {
		d.Capabilities.Certify = true // the primary key always certifies
	}

	for _, c := range subs {
		s := Subkey{
			Version:     c.km.version,
			Fingerprint: c.km.fpr,
			KeyID:       c.km.keyID,
			Algorithm:   c.km.algo,
			Created:     c.km.created,
			body:        c.pkt.Body,
			pub:         c.km.pub,
		}
		s.Bits, s.Curve = keySize(c.km)
		var bind *selfSig
		for _, sg := range c.sigs {
			switch {
			case sg.self == nil:
			case sg.self.revocation:
				s.Revoked = true
				if s.Revocation.newer(sg.self) {
					s.Revocation = revocationOf(sg.self)
				}
			case bind == nil || !sg.self.created.Before(bind.created):
				bind = sg.self
			}
		}
		if bind != nil && bind.keyLifetime > 0 {
			s.Expires = c.km.created.Add(time.Duration(bind.keyLifetime) * time.Second)
		}
		s.Capabilities = capabilities(c.km.algo, bind)
		s.SignedBySubkey = bind != nil && bind.backSigned
		d.Subkeys = append(d.Subkeys, s)
	}
	return d
}

// capabilities reads key flags from a self-signature, falling back to what
// the algorithm can do.
func capabilities(algo packet.PublicKeyAlgorithm, s *selfSig) Capabilities {
	if s != nil && s.flagsValid {
		return Capabilities{
			Certify:      s.flags&packet.KeyFlagCertify != 0,
			Sign:         s.flags&packet.KeyFlagSign != 0,
			Encrypt:      s.flags&(packet.KeyFlagEncryptCommunications|packet.KeyFlagEncryptStorage) != 0,
			Authenticate: s.flags&packet.KeyFlagAuthenticate != 0,
		}
	}
	switch algo {
	case packet.PubKeyAlgoRSA:
		return Capabilities{Sign: true, Encrypt: true}
	case packet.PubKeyAlgoRSAEncryptOnly, packet.PubKeyAlgoElGamal, packet.PubKeyAlgoECDH,
		packet.PubKeyAlgoX25519, packet.PubKeyAlgoX448, packet.PubKeyAlgoMlkem768X25519, packet.PubKeyAlgoMlkem1024X448:
		return Capabilities{Encrypt: true}
	case packet.PubKeyAlgoRSASignOnly, packet.PubKeyAlgoDSA, packet.PubKeyAlgoECDSA,
		packet.PubKeyAlgoEdDSA, packet.PubKeyAlgoEd25519, packet.PubKeyAlgoEd448,
		packet.PubKeyAlgoMldsa65Ed25519, packet.PubKeyAlgoMldsa87Ed448,
		packet.PubKeyAlgoSlhdsaShake128s, packet.PubKeyAlgoSlhdsaShake128f, packet.PubKeyAlgoSlhdsaShake256s:
		return Capabilities{Sign: true}
	}
	return Capabilities{}
}

// keySize returns a key's size in bits and its curve name, gpg style.
func keySize(km *keyMaterial) (bits int, curve string) {
	switch km.algo {
	case packet.PubKeyAlgoEd25519:
		return 255, "ed25519"
	case packet.PubKeyAlgoX25519:
		return 255, "cv25519"
	case packet.PubKeyAlgoEd448:
		return 448, "ed448"
	case packet.PubKeyAlgoX448:
		return 448, "cv448"
	}
	if _, pqc := pqcSizes[byte(km.algo)]; pqc {
		// Named in full by the algorithm (ML-KEM-768+X25519, ...); no size
		// is shown, as for X25519.
		return 0, ""
	}
	if km.pub == nil {
		if km.version <= 3 && len(km.body) > 8 {
			if n, _, ok := readMPI(km.body[8:]); ok {
				return mpiBits(n), ""
			}
		}
		return 0, ""
	}
	switch km.algo {
	case packet.PubKeyAlgoECDSA, packet.PubKeyAlgoECDH, packet.PubKeyAlgoEdDSA:
		c, err := km.pub.Curve()
		if err != nil {
			return 0, ""
		}
		switch c {
		case packet.Curve25519:
			if km.algo == packet.PubKeyAlgoECDH {
				return 255, "cv25519"
			}
			return 255, "ed25519"
		case packet.Curve448:
			if km.algo == packet.PubKeyAlgoECDH {
				return 448, "cv448"
			}
			return 448, "ed448"
		case packet.CurveNistP256:
			return 256, "nistp256"
		case packet.CurveNistP384:
			return 384, "nistp384"
		case packet.CurveNistP521:
			return 521, "nistp521"
		case packet.CurveSecP256k1:
			return 256, "secp256k1"
		case packet.CurveBrainpoolP256:
			return 256, "brainpoolP256r1"
		case packet.CurveBrainpoolP384:
			return 384, "brainpoolP384r1"
		case packet.CurveBrainpoolP512:
			return 512, "brainpoolP512r1"
		}
		return 0, string(c)
	}
	if km.version <= 3 {
		if n, _, ok := readMPI(km.body[8:]); ok {
			return mpiBits(n), ""
		}
	}
	b, err := km.pub.BitLength()
	if err != nil {
		return 0, ""
	}
	return int(b), ""
}

// mpiBits is the bit length of a big-endian number.
func mpiBits(n []byte) int {
	n = bytes.TrimLeft(n, "\x00")
	if len(n) == 0 {
		return 0
	}
	bits := (len(n) - 1) * 8
	for c := n[0]; c != 0; c >>= 1 {
		bits++
	}
	return bits
}
