// wellformed.go: structural validation of every packet Kith keeps. A packet
// is well formed when every length in it agrees with what follows (packet,
// subpacket and MPI lengths, RFC 9580 sections 3.2, 5.2.3.7 and 5.12), its
// version is one RFC 9580 defines, its algorithm-specific fields are exactly
// those its public-key algorithm prescribes (sections 5.2.3 and 5.5.5, fixed
// sizes for the native X25519, X448, Ed25519 and Ed448 fields and for the v6
// salt), and nothing trails them. Self-signatures are verified elsewhere;
// these checks are what third-party certifications, which Kith cannot
// verify, must pass, and what keeps a single lying packet from making gpg
// stop reading a key, or a whole dump.

package pgp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// Errors from the structural checks (test with errors.Is). A malformed
// signature also wraps ErrMalformedSignature, a malformed public key or
// subkey ErrMalformedKey.
var (
	// ErrMalformedPacket: a packet body is not well formed (a length that
	// disagrees with the bytes, a field of the wrong size, trailing bytes).
	ErrMalformedPacket = errors.New("malformed packet")
	// ErrUnknownVersion: a signature or key packet of a version that RFC
	// 9580 does not define (including LibrePGP's v5), or one gpg cannot
	// read where it stands (see CheckKey).
	ErrUnknownVersion = errors.New("unknown packet version")
	// ErrUnknownAlgorithm: a signature or key packet of a public-key
	// algorithm RFC 9580 does not define, whose algorithm-specific fields
	// therefore have no length that could be checked.
	ErrUnknownAlgorithm = errors.New("unknown public-key algorithm")
)

// maxEmbedding bounds signatures embedded in signatures (a primary-key
// binding inside a subkey binding is one level).
const maxEmbedding = 1

// CheckPacket reports whether p's body is well formed for its tag: public
// keys and subkeys, signatures (with every subpacket, and any embedded
// signature), user attributes. User IDs are any bytes. Tags that have no
// place in a transferable public key are malformed here. The error wraps
// ErrMalformedPacket (and ErrMalformedSignature or ErrMalformedKey), or
// ErrUnknownVersion or ErrUnknownAlgorithm.
func CheckPacket(p Packet) error {
	switch p.Tag {
	case TagPublicKey, TagPublicSubkey:
		return checkPublicKey(p.Body)
	case TagSignature:
		return checkSignature(p.Body, 0)
	case TagUserAttribute:
		return checkUserAttribute(p.Body)
	case TagUserID:
		return nil
	}
	return fmt.Errorf("%w: a %v packet in a public key", ErrMalformedPacket, p.Tag)
}

// CheckKey reports whether k is a transferable public key that gpg can
// read: a public-key packet followed only by signatures, user IDs, user
// attributes and subkeys, each well formed (CheckPacket), in versions gpg
// reads. gpg 2.2 stops reading its whole input at a v5 or v6 packet, so a
// v6 key fails with ErrUnknownVersion, as do v5 and v6 signatures and
// subkeys (and v3 subkeys, which do not exist) in an older key. It checks
// no signature: it is the cheap check for keys that have been through a
// Policy before (a dump).
func CheckKey(k *Key) error { return checkKey(k, false) }

// CheckWellFormed is CheckKey for readers of RFC 9580's every version: it
// accepts v6 keys too (with v6 and v4 subkeys and v6 signatures), which
// gpg cannot read and Sequoia 2, OpenPGP.js 6, go-crypto and Hockeypuck
// can. A v3 or v4 key passes it exactly when it passes CheckKey.
func CheckWellFormed(k *Key) error { return checkKey(k, true) }

func checkKey(k *Key, v6 bool) error {
	ps := k.packets
	if len(ps) == 0 || ps[0].Tag != TagPublicKey {
		return fmt.Errorf("pgp: check key: %w", ErrNotPublicKey)
	}
	if err := checkPublicKey(ps[0].Body); err != nil {
		return fmt.Errorf("pgp: check key: primary key: %w", err)
	}
	primaryVersion := int(ps[0].Body[0])
	if primaryVersion > 4 && !(v6 && primaryVersion == 6) {
		return fmt.Errorf("pgp: check key: %w: gpg does not read v%d keys", ErrUnknownVersion, primaryVersion)
	}
	for i, p := range ps[1:] {
		switch p.Tag {
		case TagSignature, TagUserID, TagUserAttribute, TagPublicSubkey:
		default:
			return fmt.Errorf("pgp: check key: packet %d: %w: a %v packet in a public key", i+1, ErrMalformedPacket, p.Tag)
		}
		if err := CheckPacket(p); err != nil {
			return fmt.Errorf("pgp: check key: packet %d (%v): %w", i+1, p.Tag, err)
		}
		if err := checkVersionFits(primaryVersion, p); err != nil {
			return fmt.Errorf("pgp: check key: packet %d: %w", i+1, err)
		}
	}
	return nil
}

// checkVersionFits reports whether a well-formed signature or subkey has a
// version that belongs in a key whose primary is of primaryVersion and that
// gpg reads there. RFC 9580 lets a v6 key certify a v4 key with a v6
// signature, but gpg 2.2 stops reading the whole input at any v6 (or v5)
// packet, so in v3 and v4 keys only v3 and v4 signatures and v4 subkeys
// stay. A v6 key, which gpg cannot read anyway, keeps v4 and v6 material.
func checkVersionFits(primaryVersion int, p Packet) error {
	if len(p.Body) == 0 {
		return nil
	}
	v := int(p.Body[0])
	switch p.Tag {
	case TagSignature:
		if v == 6 && primaryVersion != 6 {
			return fmt.Errorf("%w: a v6 signature on a v%d key, which gpg stops reading at", ErrUnknownVersion, primaryVersion)
		}
	case TagPublicSubkey:
		if v != 4 && (primaryVersion != 6 || v != 6) {
			return fmt.Errorf("%w: a v%d subkey on a v%d key", ErrUnknownVersion, v, primaryVersion)
		}
	}
	return nil
}

// Public-key algorithm IDs (RFC 9580 section 9.1).
const (
	algoRSA            = 1
	algoRSAEncryptOnly = 2
	algoRSASignOnly    = 3
	algoElgamal        = 16
	algoDSA            = 17
	algoECDH           = 18
	algoECDSA          = 19
	algoElgamalSign    = 20 // reserved, formerly Elgamal encrypt or sign
	algoEdDSALegacy    = 22
	algoX25519         = 25
	algoX448           = 26
	algoEd25519        = 27
	algoEd448          = 28
	// RFC 9980's post-quantum algorithms: composite ML-DSA+EdDSA and
	// stand-alone SLH-DSA signatures, composite ML-KEM+ECDH encryption.
	algoMLDSA65Ed25519  = 30
	algoMLDSA87Ed448    = 31
	algoSLHDSAShake128s = 32
	algoSLHDSAShake128f = 33
	algoSLHDSAShake256s = 34
	algoMLKEM768X25519  = 35
	algoMLKEM1024X448   = 36
)

// pqcSizes gives, for each post-quantum algorithm of RFC 9980, the size of
// its public-key fields (an ECC part, if any, then the post-quantum key;
// section 5 and 6 of RFC 9980) and of its signature value (the EdDSA
// signature, then the ML-DSA one; or the SLH-DSA signature). All are
// fixed-size octet strings, with no length prefixes, so a key or signature
// of any other size is malformed. sig is 0 for the encryption algorithms.
var pqcSizes = map[byte]struct{ key, sig int }{
	algoMLDSA65Ed25519:  {32 + 1952, 64 + 3309},
	algoMLDSA87Ed448:    {57 + 2592, 114 + 4627},
	algoSLHDSAShake128s: {32, 7856},
	algoSLHDSAShake128f: {32, 17088},
	algoSLHDSAShake256s: {64, 29792},
	algoMLKEM768X25519:  {32 + 1184, 0},
	algoMLKEM1024X448:   {56 + 1568, 0},
}

// algorithmFitsVersion reports whether RFC 9980 allows algo in a key or
// signature packet of version v: its algorithms never in v3 packets, and
// all but ML-KEM-768+X25519 (which may be a subkey of a v4 key, section
// 4.2 of RFC 9980) only in v6 ones. Other algorithms fit every version.
func algorithmFitsVersion(algo byte, v byte) bool {
	if _, pqc := pqcSizes[algo]; !pqc {
		return true
	}
	return v == 6 || (v == 4 && algo == algoMLKEM768X25519)
}

// checkPublicKey checks a public-key or public-subkey packet body (RFC 9580
// section 5.5.2; version 3 as RFC 4880 section 5.5.2 has it).
func checkPublicKey(body []byte) error {
	if len(body) == 0 {
		return fmt.Errorf("%w: %w: empty", ErrMalformedKey, ErrMalformedPacket)
	}
	var algo byte
	var fields []byte
	switch v := body[0]; v {
	case 2, 3:
		if len(body) < 8 {
			return fmt.Errorf("%w: %w: v%d key of %d bytes", ErrMalformedKey, ErrMalformedPacket, v, len(body))
		}
		algo, fields = body[7], body[8:]
	case 4:
		if len(body) < 6 {
			return fmt.Errorf("%w: %w: v4 key of %d bytes", ErrMalformedKey, ErrMalformedPacket, len(body))
		}
		algo, fields = body[5], body[6:]
	case 6:
		if len(body) < 10 {
			return fmt.Errorf("%w: %w: v6 key of %d bytes", ErrMalformedKey, ErrMalformedPacket, len(body))
		}
		if n := binary.BigEndian.Uint32(body[6:10]); uint64(n) != uint64(len(body)-10) {
			return fmt.Errorf("%w: %w: v6 key material claims %d bytes, carries %d", ErrMalformedKey, ErrMalformedPacket, n, len(body)-10)
		}
		algo, fields = body[5], body[10:]
	default:
		return fmt.Errorf("%w: %w: v%d key", ErrMalformedKey, ErrUnknownVersion, v)
	}
	if !algorithmFitsVersion(algo, body[0]) {
		return fmt.Errorf("%w: %w %d in a v%d key, which RFC 9980 does not allow", ErrMalformedKey, ErrUnknownAlgorithm, algo, body[0])
	}
	if err := checkKeyFields(algo, fields); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformedKey, err)
	}
	return nil
}

// checkKeyFields checks the algorithm-specific public-key fields (RFC 9580
// section 5.5.5): exactly the fields of the algorithm, nothing after them.
func checkKeyFields(algo byte, b []byte) error {
	var err error
	switch algo {
	case algoRSA, algoRSAEncryptOnly, algoRSASignOnly: // n, e
		b, err = mpis(b, 2)
	case algoElgamal, algoElgamalSign: // p, g, y
		b, err = mpis(b, 3)
	case algoDSA: // p, q, g, y
		b, err = mpis(b, 4)
	case algoECDSA, algoEdDSALegacy: // curve OID, point
		b, err = curvePoint(b)
	case algoECDH: // curve OID, point, KDF parameters
		if b, err = curvePoint(b); err == nil {
			b, err = kdfParams(b)
		}
	case algoX25519:
		b, err = fixed(b, 32, "X25519 public key")
	case algoX448:
		b, err = fixed(b, 56, "X448 public key")
	case algoEd25519:
		b, err = fixed(b, 32, "Ed25519 public key")
	case algoEd448:
		b, err = fixed(b, 57, "Ed448 public key")
	case algoMLDSA65Ed25519, algoMLDSA87Ed448, algoSLHDSAShake128s, algoSLHDSAShake128f, algoSLHDSAShake256s,
		algoMLKEM768X25519, algoMLKEM1024X448:
		b, err = fixed(b, pqcSizes[algo].key, fmt.Sprintf("algorithm %d public key", algo))
	default:
		return fmt.Errorf("%w %d", ErrUnknownAlgorithm, algo)
	}
	if err != nil {
		return err
	}
	return trailing(b, "key material")
}

// curvePointSizes maps the DER content of the curve OIDs RFC 9580 section
// 9.2 lists to the size in bytes of their point MPIs (0x04 and both
// coordinates for the NIST and Brainpool curves, 0x40 and the native point
// for the legacy Curve25519 encodings).
var curvePointSizes = map[string]int{
	"\x2a\x86\x48\xce\x3d\x03\x01\x07":         65,  // NIST P-256
	"\x2b\x81\x04\x00\x22":                     97,  // NIST P-384
	"\x2b\x81\x04\x00\x23":                     133, // NIST P-521
	"\x2b\x24\x03\x03\x02\x08\x01\x01\x07":     65,  // brainpoolP256r1
	"\x2b\x24\x03\x03\x02\x08\x01\x01\x0b":     97,  // brainpoolP384r1
	"\x2b\x24\x03\x03\x02\x08\x01\x01\x0d":     129, // brainpoolP512r1
	"\x2b\x06\x01\x04\x01\xda\x47\x0f\x01":     33,  // Ed25519Legacy
	"\x2b\x06\x01\x04\x01\x97\x55\x01\x05\x01": 33,  // Curve25519Legacy
}

// curvePoint splits a curve OID (a length octet, 0 and 0xFF reserved, then
// the OID) and a point MPI off b. Points on the curves RFC 9580 lists must
// have their curve's size; other curves' points need only be well-formed
// MPIs.
func curvePoint(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: no curve OID", ErrMalformedPacket)
	}
	n := int(b[0])
	if n == 0 || n == 0xff {
		return nil, fmt.Errorf("%w: reserved curve OID length %d", ErrMalformedPacket, n)
	}
	if len(b) < 1+n {
		return nil, fmt.Errorf("%w: curve OID of %d bytes, %d left", ErrMalformedPacket, n, len(b)-1)
	}
	oid := b[1 : 1+n]
	point, rest, err := mpi(b[1+n:])
	if err != nil {
		return nil, err
	}
	if want, ok := curvePointSizes[string(oid)]; ok && len(point) != want {
		return nil, fmt.Errorf("%w: curve point of %d bytes, want %d", ErrMalformedPacket, len(point), want)
	}
	return rest, nil
}

// kdfParams splits ECDH KDF parameters off b (RFC 9580 section 5.5.5.6): a
// size octet (3), the reserved octet 1, a hash and a cipher ID.
func kdfParams(b []byte) ([]byte, error) {
	if len(b) < 4 || b[0] != 3 || b[1] != 1 {
		return nil, fmt.Errorf("%w: ECDH KDF parameters are not 03 01 HASH CIPHER", ErrMalformedPacket)
	}
	return b[4:], nil
}

// checkSignature checks a signature packet body (RFC 9580 section 5.2).
// depth counts the signatures it is embedded in.
func checkSignature(body []byte, depth int) error {
	if err := checkSignatureBody(body, depth); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformedSignature, err)
	}
	return nil
}

func checkSignatureBody(body []byte, depth int) error {
	if len(body) == 0 {
		return fmt.Errorf("%w: empty", ErrMalformedPacket)
	}
	v := body[0]
	switch v {
	case 2, 3: // RFC 9580 section 5.2.2
		if len(body) < 19 {
			return fmt.Errorf("%w: v%d signature of %d bytes", ErrMalformedPacket, v, len(body))
		}
		if body[1] != 5 {
			return fmt.Errorf("%w: v%d signature hashes %d bytes, not 5", ErrMalformedPacket, v, body[1])
		}
		if !algorithmFitsVersion(body[15], v) {
			return fmt.Errorf("%w %d in a v%d signature, which RFC 9980 does not allow", ErrUnknownAlgorithm, body[15], v)
		}
		return checkSignatureValue(body[15], body[19:])
	case 4, 6: // RFC 9580 section 5.2.3
	default:
		return fmt.Errorf("%w: v%d signature", ErrUnknownVersion, v)
	}
	if len(body) < 4 {
		return fmt.Errorf("%w: v%d signature of %d bytes", ErrMalformedPacket, v, len(body))
	}
	algo, hashAlgo := body[2], body[3]
	if !algorithmFitsVersion(algo, v) {
		return fmt.Errorf("%w %d in a v%d signature, which RFC 9980 does not allow", ErrUnknownAlgorithm, algo, v)
	}
	rest := body[4:]
	for _, area := range []string{"hashed", "unhashed"} {
		var n uint64
		if v == 4 {
			if len(rest) < 2 {
				return fmt.Errorf("%w: no %s subpacket length", ErrMalformedPacket, area)
			}
			n, rest = uint64(binary.BigEndian.Uint16(rest)), rest[2:]
		} else {
			if len(rest) < 4 {
				return fmt.Errorf("%w: no %s subpacket length", ErrMalformedPacket, area)
			}
			n, rest = uint64(binary.BigEndian.Uint32(rest)), rest[4:]
		}
		if n > uint64(len(rest)) {
			return fmt.Errorf("%w: %s subpackets claim %d bytes, %d left", ErrMalformedPacket, area, n, len(rest))
		}
		if err := checkSubpackets(rest[:n], depth); err != nil {
			return fmt.Errorf("%s area: %w", area, err)
		}
		rest = rest[n:]
	}
	if len(rest) < 2 {
		return fmt.Errorf("%w: no hash prefix", ErrMalformedPacket)
	}
	rest = rest[2:]
	if v == 6 {
		want, ok := saltSizes[hashAlgo]
		if !ok {
			return fmt.Errorf("%w: v6 signature with hash algorithm %d, which has no salt size", ErrMalformedPacket, hashAlgo)
		}
		if len(rest) < 1 || int(rest[0]) != want || len(rest) < 1+want {
			return fmt.Errorf("%w: v6 salt is not %d bytes", ErrMalformedPacket, want)
		}
		rest = rest[1+want:]
	}
	return checkSignatureValue(algo, rest)
}

// saltSizes maps hash algorithm IDs to the size of the salt v6 signatures
// made with them carry (RFC 9580 section 9.5).
var saltSizes = map[byte]int{
	8:  16, // SHA2-256
	9:  24, // SHA2-384
	10: 32, // SHA2-512
	11: 16, // SHA2-224
	12: 16, // SHA3-256
	14: 32, // SHA3-512
}

// checkSignatureValue checks the algorithm-specific signature fields (RFC
// 9580 section 5.2.3): exactly the algorithm's fields, nothing after them.
func checkSignatureValue(algo byte, b []byte) error {
	var err error
	switch algo {
	case algoRSA, algoRSAEncryptOnly, algoRSASignOnly: // m^d mod n
		b, err = mpis(b, 1)
	case algoDSA, algoECDSA, algoEdDSALegacy, algoElgamal, algoElgamalSign: // r, s
		b, err = mpis(b, 2)
	case algoEd25519:
		b, err = fixed(b, 64, "Ed25519 signature")
	case algoEd448:
		b, err = fixed(b, 114, "Ed448 signature")
	case algoMLDSA65Ed25519, algoMLDSA87Ed448, algoSLHDSAShake128s, algoSLHDSAShake128f, algoSLHDSAShake256s:
		b, err = fixed(b, pqcSizes[algo].sig, fmt.Sprintf("algorithm %d signature", algo))
	case algoECDH, algoX25519, algoX448, algoMLKEM768X25519, algoMLKEM1024X448:
		return fmt.Errorf("%w: a signature by encryption-only algorithm %d", ErrMalformedPacket, algo)
	default:
		return fmt.Errorf("%w %d", ErrUnknownAlgorithm, algo)
	}
	if err != nil {
		return err
	}
	return trailing(b, "signature value")
}

// Signature subpacket types with a fixed or self-described size (RFC 9580
// section 5.2.3.7 and after).
const (
	subpacketSigExpiration  = 3
	subpacketExportable     = 4
	subpacketTrust          = 5
	subpacketRevocable      = 7
	subpacketKeyExpiration  = 9
	subpacketRevocationKey  = 12
	subpacketNotation       = 20
	subpacketPrimaryUserID  = 25
	subpacketRevReason      = 29
	subpacketSigTarget      = 31
	subpacketEmbeddedSig    = 32
	subpacketRecipientFpr   = 35
	subpacketPreferredAEADs = 39
)

// subpacketLength splits a subpacket length (RFC 9580 section 5.2.3.7: one,
// two or five octets) off b.
func subpacketLength(b []byte) (n uint64, rest []byte, err error) {
	switch c := b[0]; {
	case c < 192:
		return uint64(c), b[1:], nil
	case c < 255:
		if len(b) < 2 {
			return 0, nil, fmt.Errorf("%w: truncated subpacket length", ErrMalformedPacket)
		}
		return (uint64(c)-192)<<8 + uint64(b[1]) + 192, b[2:], nil
	default:
		if len(b) < 5 {
			return 0, nil, fmt.Errorf("%w: truncated subpacket length", ErrMalformedPacket)
		}
		return uint64(binary.BigEndian.Uint32(b[1:5])), b[5:], nil
	}
}

// checkSubpackets checks that a subpacket area is made of whole subpackets,
// each with a type and a body of the size its type requires.
func checkSubpackets(b []byte, depth int) error {
	for len(b) > 0 {
		n, rest, err := subpacketLength(b)
		if err != nil {
			return err
		}
		if n == 0 || n > uint64(len(rest)) {
			return fmt.Errorf("%w: subpacket claims %d bytes, %d left", ErrMalformedPacket, n, len(rest))
		}
		typ, data := rest[0]&0x7f, rest[1:n]
		if err := checkSubpacket(typ, data, depth); err != nil {
			return err
		}
		b = rest[n:]
	}
	return nil
}

// checkSubpacket checks the body of one subpacket of a known type; bodies
// of other types are opaque.
func checkSubpacket(typ byte, data []byte, depth int) error {
	size := func(want ...int) error {
		for _, w := range want {
			if len(data) == w {
				return nil
			}
		}
		return fmt.Errorf("%w: subpacket type %d of %d bytes", ErrMalformedPacket, typ, len(data))
	}
	switch typ {
	case subpacketCreationTime, subpacketSigExpiration, subpacketKeyExpiration:
		return size(4)
	case subpacketExportable, subpacketRevocable, subpacketPrimaryUserID:
		return size(1)
	case subpacketTrust:
		return size(2)
	case subpacketIssuer:
		return size(8)
	case subpacketRevocationKey: // class, algorithm, v4 or v6 fingerprint
		return size(22, 34)
	case subpacketIssuerFpr, subpacketRecipientFpr: // version, fingerprint
		if len(data) == 0 {
			return size()
		}
		switch data[0] {
		case 4:
			return size(21)
		case 6:
			return size(33)
		}
		return nil
	case subpacketNotation:
		if !notationComplete(data) {
			return size()
		}
		return nil
	case subpacketRevReason, subpacketSigTarget:
		if (typ == subpacketRevReason && len(data) < 1) || (typ == subpacketSigTarget && len(data) < 2) {
			return size()
		}
		return nil
	case subpacketPreferredAEADs: // cipher and AEAD pairs
		if len(data)%2 != 0 {
			return size()
		}
		return nil
	case subpacketEmbeddedSig:
		if depth >= maxEmbedding {
			return fmt.Errorf("%w: signature embedded %d levels deep", ErrMalformedPacket, depth+1)
		}
		if err := checkSignatureBody(data, depth+1); err != nil {
			return fmt.Errorf("embedded signature: %w", err)
		}
	}
	return nil
}

// notationComplete reports whether data, a notation subpacket's body, is
// its flags (4 octets), its name and value lengths (2 each), then exactly
// a name and a value of those lengths.
func notationComplete(data []byte) bool {
	return len(data) >= 8 && len(data) == 8+int(binary.BigEndian.Uint16(data[4:6]))+int(binary.BigEndian.Uint16(data[6:8]))
}

// Image attribute subpacket (RFC 9580 section 5.12.1).
const (
	attributeImage       = 1
	imageHeaderV1        = 1
	imageHeaderV1Size    = 16
	imageHeaderMinLength = 3 // the length itself and the version
)

// checkUserAttribute checks a user attribute body (RFC 9580 section 5.12):
// one or more subpackets, framed as signature subpackets are; an image's
// header (little-endian length, version) must fit in it, and a version 1
// header is 16 bytes.
func checkUserAttribute(body []byte) error {
	if len(body) == 0 {
		return fmt.Errorf("%w: empty user attribute", ErrMalformedPacket)
	}
	for b := body; len(b) > 0; {
		n, rest, err := subpacketLength(b)
		if err != nil {
			return err
		}
		if n == 0 || n > uint64(len(rest)) {
			return fmt.Errorf("%w: attribute subpacket claims %d bytes, %d left", ErrMalformedPacket, n, len(rest))
		}
		typ, data := rest[0], rest[1:n]
		if typ == attributeImage {
			if len(data) < imageHeaderMinLength {
				return fmt.Errorf("%w: image attribute of %d bytes", ErrMalformedPacket, len(data))
			}
			h := int(binary.LittleEndian.Uint16(data))
			if h < imageHeaderMinLength || h > len(data) || (data[2] == imageHeaderV1 && h != imageHeaderV1Size) {
				return fmt.Errorf("%w: image header of %d bytes (version %d) in %d", ErrMalformedPacket, h, data[2], len(data))
			}
		}
		b = rest[n:]
	}
	return nil
}

// mpi splits one multiprecision integer off b (RFC 9580 section 3.2): a
// two-octet bit count, then exactly the bytes that many bits need. A count
// the bytes do not bear out is malformed: more bytes claimed than the
// packet carries, or fewer bits claimed than the leading byte holds.
//
// RFC 9580 counts from the most significant non-zero bit, so a count above
// the value's length (leading zero bits) does not conform either, but it
// is accepted: the bytes are still exactly as many as claimed, gpg reads
// such MPIs, and two Ed25519 back-signatures in Debian's keyring (made
// with a fixed 256-bit count) have them.
func mpi(b []byte) (value, rest []byte, err error) {
	if len(b) < 2 {
		return nil, nil, fmt.Errorf("%w: truncated MPI length", ErrMalformedPacket)
	}
	nbits := int(binary.BigEndian.Uint16(b))
	n := (nbits + 7) / 8
	if len(b)-2 < n {
		return nil, nil, fmt.Errorf("%w: MPI claims %d bits, carries %d bytes", ErrMalformedPacket, nbits, len(b)-2)
	}
	if n > 0 {
		if held := (n-1)*8 + bits.Len8(b[2]); held > nbits {
			return nil, nil, fmt.Errorf("%w: MPI claims %d bits, holds %d", ErrMalformedPacket, nbits, held)
		}
	}
	return b[2 : 2+n], b[2+n:], nil
}

// mpis splits count MPIs off b.
func mpis(b []byte, count int) ([]byte, error) {
	for i := 0; i < count; i++ {
		var err error
		if _, b, err = mpi(b); err != nil {
			return nil, fmt.Errorf("MPI %d of %d: %w", i+1, count, err)
		}
	}
	return b, nil
}

// fixed splits a native field of exactly n bytes off b.
func fixed(b []byte, n int, what string) ([]byte, error) {
	if len(b) < n {
		return nil, fmt.Errorf("%w: %s of %d bytes, want %d", ErrMalformedPacket, what, len(b), n)
	}
	return b[n:], nil
}

// trailing fails when bytes remain after the last field.
func trailing(b []byte, after string) error {
	if len(b) > 0 {
		return fmt.Errorf("%w: %d bytes after the %s", ErrMalformedPacket, len(b), after)
	}
	return nil
}
