// fastsig.go: the parse of the common v4 self-signature, without
// go-crypto's reader. go-crypto reads a packet body through io.Readers,
// copying each subpacket area into a growing buffer and recording every
// subpacket: parsing signatures was 9% of kith load's CPU, more than their
// RSA checks. parseV4Fast reads the body in place, repeating go-crypto's
// checks for the subpackets it takes, and leaves every other signature to
// go-crypto, so that a signature parses, and fails, as it always did.

package pgp

import (
	"crypto"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// fastHashes are the hash algorithms parseV4Fast takes, by OpenPGP ID:
// those go-crypto reads in a v4 signature and verifyValue checks without
// go-crypto (digestInfo). RIPEMD-160 has its own path (parseV4Signature).
var fastHashes = [...]crypto.Hash{2: crypto.SHA1, 8: crypto.SHA256, 9: crypto.SHA384, 10: crypto.SHA512, 11: crypto.SHA224}

// parseV4Fast parses body, a v4 signature by an RSA, EdDSA or Ed25519 key,
// as go-crypto's packet.Read does, and reports false, parsing nothing, for
// any other signature or any it cannot vouch go-crypto would read the
// same: go-crypto parses those. Of the Signature, it sets the fields key
// signature checks read (verifySelfSig, verifyBackSig, verifyValue): the
// version, type and algorithms, the hash suffix and tag, the creation
// time, the signature and key lifetimes, the primary user ID mark, the key
// flags, the reason for revocation, the issuer, the embedded signature and
// the signature value. The preferences, notations and other subpackets
// that go-crypto records are left unset (checked as go-crypto checks them).
func parseV4Fast(body []byte) (*packet.Signature, bool) {
	if len(body) < 6 || body[0] != 4 || int(body[3]) >= len(fastHashes) || fastHashes[body[3]] == 0 {
		return nil, false
	}
	sig := &packet.Signature{
		Version:    4,
		SigType:    packet.SignatureType(body[1]),
		PubKeyAlgo: packet.PublicKeyAlgorithm(body[2]),
		Hash:       fastHashes[body[3]],
	}
	switch sig.PubKeyAlgo {
	case packet.PubKeyAlgoRSA, packet.PubKeyAlgoRSASignOnly, packet.PubKeyAlgoEdDSA, packet.PubKeyAlgoEd25519:
	default:
		return nil, false
	}
	hashedEnd := 6 + int(binary.BigEndian.Uint16(body[4:6]))
	if len(body) < hashedEnd+2 {
		return nil, false
	}
	// The suffix is the body through the hashed subpackets, then the
	// version, 0xFF and that length in four octets.
	suffix := make([]byte, hashedEnd+6)
	copy(suffix, body[:hashedEnd])
	suffix[hashedEnd], suffix[hashedEnd+1] = 4, 0xff
	binary.BigEndian.PutUint32(suffix[hashedEnd+2:], uint32(hashedEnd))
	sig.HashSuffix = suffix
	if !fastSubpackets(sig, body[6:hashedEnd], true) {
		return nil, false
	}
	unhashedEnd := hashedEnd + 2 + int(binary.BigEndian.Uint16(body[hashedEnd:]))
	if len(body) < unhashedEnd+2 || !fastSubpackets(sig, body[hashedEnd+2:unhashedEnd], false) {
		return nil, false
	}
	copy(sig.HashTag[:], body[unhashedEnd:])
	value := body[unhashedEnd+2:]
	switch sig.PubKeyAlgo {
	case packet.PubKeyAlgoRSA, packet.PubKeyAlgoRSASignOnly:
		m, _, ok := cutSigMPI(value)
		if !ok {
			return nil, false
		}
		sig.RSASignature = m
	case packet.PubKeyAlgoEdDSA:
		r, rest, ok := cutSigMPI(value)
		if !ok {
			return nil, false
		}
		s, _, ok := cutSigMPI(rest)
		if !ok {
			return nil, false
		}
		sig.EdDSASigR, sig.EdDSASigS = r, s
	case packet.PubKeyAlgoEd25519:
		if len(value) < 64 {
			return nil, false
		}
		sig.EdSig = value[:64:64]
	}
	// go-crypto ignores what follows the signature value, as this does.
	return sig, true
}

// sigMPI is a multiprecision integer of a signature value as go-crypto's
// reader keeps one (an encoding.Field, a type internal to go-crypto): the
// octets as written, a leading zero octet not taken off.
type sigMPI struct {
	bits   uint16
	octets []byte
}

// cutSigMPI splits the MPI at the start of b off it, as go-crypto reads one:
// a two-octet bit count, then as many octets as those bits fill. It
// reports false when b is shorter.
func cutSigMPI(b []byte) (*sigMPI, []byte, bool) {
	if len(b) < 2 {
		return nil, nil, false
	}
	bits := binary.BigEndian.Uint16(b)
	n := (int(bits) + 7) / 8
	if len(b) < 2+n {
		return nil, nil, false
	}
	return &sigMPI{bits: bits, octets: b[2 : 2+n : 2+n]}, b[2+n:], true
}

// Bytes returns the integer's octets, big-endian.
func (m *sigMPI) Bytes() []byte { return m.octets }

// BitLength returns the bit count the MPI was written with.
func (m *sigMPI) BitLength() uint16 { return m.bits }

// EncodedBytes returns the MPI as written.
func (m *sigMPI) EncodedBytes() []byte {
	return append([]byte{byte(m.bits >> 8), byte(m.bits)}, m.octets...)
}

// EncodedLength returns the length of the MPI as written.
func (m *sigMPI) EncodedLength() uint16 { return uint16(2 + len(m.octets)) }

// ReadFrom reads an MPI from r into m, as cutSigMPI splits one.
func (m *sigMPI) ReadFrom(r io.Reader) (int64, error) {
	var hdr [2]byte
	if n, err := io.ReadFull(r, hdr[:]); err != nil {
		return int64(n), fmt.Errorf("read MPI length: %w", err)
	}
	m.bits = binary.BigEndian.Uint16(hdr[:])
	m.octets = make([]byte, (int(m.bits)+7)/8)
	n, err := io.ReadFull(r, m.octets)
	if err != nil {
		return int64(2 + n), fmt.Errorf("read MPI: %w", err)
	}
	return int64(2 + n), nil
}

// Signature subpacket types parseV4Fast names beside those of sig.go and
// wellformed.go (RFC 9580 section 5.2.3.7 and after).
const (
	subpacketRegexp          = 6
	subpacketPrefSymmetric   = 11
	subpacketPrefHash        = 21
	subpacketPrefCompression = 22
	subpacketKeyserverPrefs  = 23
	subpacketPrefKeyserver   = 24
	subpacketPolicyURI       = 26
	subpacketKeyFlags        = 27
	subpacketSignerUserID    = 28
	subpacketFeatures        = 30
)

// fastSubpackets reads one subpacket area of a v4 signature into sig as
// go-crypto's parseSignatureSubpackets does, and reports false where it
// would fail, or where the area holds a subpacket this does not repeat
// go-crypto's reading of (go-crypto then reads the signature).
func fastSubpackets(sig *packet.Signature, area []byte, hashed bool) bool {
	for len(area) > 0 {
		n, rest, err := subpacketLength(area)
		if err != nil || n == 0 || n > uint64(len(rest)) {
			return false
		}
		area = rest
		typ, critical, data := area[0]&0x7f, area[0]&0x80 != 0, area[1:n]
		area = area[n:]
		if !hashed && typ != subpacketIssuer && typ != subpacketIssuerFpr && typ != subpacketEmbeddedSig {
			continue // go-crypto reads no other unhashed subpacket
		}
		if !fastSubpacket(sig, typ, critical, data) {
			return false
		}
	}
	// go-crypto checks this after each area; only the hashed one sets it.
	return !sig.CreationTime.IsZero()
}

// fastSubpacket reads one subpacket as go-crypto's parseSignatureSubpacket
// does, reporting false where it would fail and for the types whose
// reading this does not repeat.
func fastSubpacket(sig *packet.Signature, typ uint8, critical bool, data []byte) bool {
	switch typ {
	case subpacketCreationTime:
		if len(data) != 4 {
			return false
		}
		sig.CreationTime = time.Unix(int64(binary.BigEndian.Uint32(data)), 0)
	case subpacketSigExpiration, subpacketKeyExpiration:
		if len(data) != 4 {
			return false
		}
		secs := binary.BigEndian.Uint32(data)
		if typ == subpacketSigExpiration {
			sig.SigLifetimeSecs = &secs
		} else {
			sig.KeyLifetimeSecs = &secs
		}
	case subpacketIssuer:
		if len(data) != 8 {
			return false
		}
		id := binary.BigEndian.Uint64(data)
		sig.IssuerKeyId = &id
	case subpacketIssuerFpr:
		// A v4 fingerprint (20 octets) only: go-crypto reads a v5 or v6
		// one's key ID differently.
		if len(data) != 21 || data[0] >= 5 {
			return false
		}
		sig.IssuerKeyVersion = data[0]
		sig.IssuerFingerprint = data[1:21:21]
		id := binary.BigEndian.Uint64(data[13:21])
		sig.IssuerKeyId = &id
	case subpacketPrimaryUserID:
		if len(data) != 1 {
			return false
		}
		primary := data[0] > 0
		sig.IsPrimaryId = &primary
	case subpacketKeyFlags:
		sig.FlagsValid = true
		if len(data) > 0 {
			f := data[0]
			sig.FlagCertify = sig.FlagCertify || f&packet.KeyFlagCertify != 0
			sig.FlagSign = sig.FlagSign || f&packet.KeyFlagSign != 0
			sig.FlagEncryptCommunications = sig.FlagEncryptCommunications || f&packet.KeyFlagEncryptCommunications != 0
			sig.FlagEncryptStorage = sig.FlagEncryptStorage || f&packet.KeyFlagEncryptStorage != 0
			sig.FlagSplitKey = sig.FlagSplitKey || f&packet.KeyFlagSplitKey != 0
			sig.FlagAuthenticate = sig.FlagAuthenticate || f&packet.KeyFlagAuthenticate != 0
			sig.FlagGroupKey = sig.FlagGroupKey || f&packet.KeyFlagGroupKey != 0
		}
	case subpacketRevReason:
		if len(data) == 0 {
			return false
		}
		reason := packet.NewReasonForRevocation(data[0])
		sig.RevocationReason = &reason
		sig.RevocationReasonText = string(data[1:])
	case subpacketEmbeddedSig:
		if sig.EmbeddedSignature != nil || sig.SigType == packet.SigTypePrimaryKeyBinding {
			return false
		}
		emb, ok := parseV4Fast(data)
		if !ok || emb.SigType != packet.SigTypePrimaryKeyBinding {
			return false
		}
		sig.EmbeddedSignature = emb
	case subpacketPrefSymmetric, subpacketPrefHash, subpacketPrefCompression, subpacketKeyserverPrefs,
		subpacketPrefKeyserver, subpacketPolicyURI, subpacketSignerUserID, subpacketFeatures:
		// go-crypto reads these without a check that can fail, and
		// signature checks do not read them.
	case subpacketNotation:
		return notationComplete(data)
	case subpacketExportable, subpacketTrust, subpacketRegexp, subpacketRecipientFpr, subpacketPreferredAEADs:
		return false // go-crypto checks these; it reads them
	default:
		// go-crypto refuses a critical subpacket it does not know.
		return !critical
	}
	return true
}
