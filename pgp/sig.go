// sig.go: a light parse of signature packets. Every signature is parsed this
// far (type, creation time, issuer) to place and order it; only signatures
// that claim the primary key as issuer are parsed fully by go-crypto and
// verified.

package pgp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// ErrMalformedSignature: a signature packet is structurally invalid.
var ErrMalformedSignature = errors.New("malformed signature packet")

// Signature types (RFC 9580 section 5.2.1) a key's packets can carry.
const (
	sigTypeGenericCert  = 0x10
	sigTypePositiveCert = 0x13
	sigTypeSubkeyBind   = 0x18
	sigTypePrimaryBind  = 0x19
	sigTypeDirectKey    = 0x1f
	sigTypeKeyRevoke    = 0x20
	sigTypeSubkeyRevoke = 0x28
	sigTypeCertRevoke   = 0x30
	// sigTypeAttestation is the attestation key signature of the OpenPGP
	// crypto-refresh drafts (not in RFC 9580): the key holder lists the
	// third-party certifications of a user ID that may be distributed.
	sigTypeAttestation = 0x16
)

// Signature subpacket types used here.
const (
	subpacketCreationTime = 2
	subpacketIssuer       = 16
	subpacketIssuerFpr    = 33
	// subpacketAttestedCerts lists the digests of the certifications an
	// attestation key signature attests (the drafts' "Attested
	// Certifications", type 37).
	subpacketAttestedCerts = 37
)

// sigInfo is the light parse of one signature packet.
type sigInfo struct {
	body      []byte
	version   int
	sigType   uint8
	algo      uint8
	hashAlgo  uint8
	created   int64 // Unix seconds; 0 when absent
	issuer    uint64
	hasIssuer bool
	issuerFpr []byte
	// attested is the content of a hashed Attested Certifications
	// subpacket (concatenated digests), attestedAt the offset in body of
	// its type octet when marked critical (0: not critical).
	attested   []byte
	attestedAt int
	// v3 fields: the 2-byte hash prefix and the signature MPIs.
	v3Left [2]byte
	v3MPIs []byte
}

// parseSigInfo parses the fixed fields and the issuer and creation-time
// subpackets of a signature body.
func parseSigInfo(body []byte) (*sigInfo, error) {
	if len(body) < 1 {
		return nil, fmt.Errorf("%w: empty", ErrMalformedSignature)
	}
	s := &sigInfo{body: body, version: int(body[0])}
	switch s.version {
	case 2, 3:
		if len(body) < 19 || body[1] != 5 {
			return nil, fmt.Errorf("%w: bad v3 signature", ErrMalformedSignature)
		}
		s.sigType = body[2]
		s.created = int64(binary.BigEndian.Uint32(body[3:7]))
		s.issuer, s.hasIssuer = binary.BigEndian.Uint64(body[7:15]), true
		s.algo, s.hashAlgo = body[15], body[16]
		copy(s.v3Left[:], body[17:19])
		s.v3MPIs = body[19:]
		return s, nil
	case 4, 5, 6:
		lenSize := 2
		if s.version != 4 {
			lenSize = 4
		}
		if len(body) < 4+lenSize {
			return nil, fmt.Errorf("%w: short v%d signature", ErrMalformedSignature, s.version)
		}
		s.sigType, s.algo, s.hashAlgo = body[1], body[2], body[3]
		rest := body[4:]
		for area := 0; area < 2; area++ {
			if len(rest) < lenSize {
				return nil, fmt.Errorf("%w: truncated subpacket area", ErrMalformedSignature)
			}
			var n uint64
			if lenSize == 2 {
				n = uint64(binary.BigEndian.Uint16(rest))
			} else {
				n = uint64(binary.BigEndian.Uint32(rest))
			}
			rest = rest[lenSize:]
			if uint64(len(rest)) < n {
				return nil, fmt.Errorf("%w: subpacket area overruns packet", ErrMalformedSignature)
			}
			if err := s.scanSubpackets(rest[:n], area == 0); err != nil {
				return nil, err
			}
			rest = rest[n:]
		}
		if len(rest) < 2 {
			return nil, fmt.Errorf("%w: no hash prefix", ErrMalformedSignature)
		}
		return s, nil
	}
	return nil, fmt.Errorf("%w: unknown version %d", ErrMalformedSignature, s.version)
}

// scanSubpackets records the creation time (hashed area only) and issuer
// (either area) subpackets.
func (s *sigInfo) scanSubpackets(b []byte, hashed bool) error {
	for len(b) > 0 {
		var n int
		switch c := b[0]; {
		case c < 192:
			n, b = int(c), b[1:]
		case c < 255:
			if len(b) < 2 {
				return fmt.Errorf("%w: truncated subpacket", ErrMalformedSignature)
			}
			n, b = (int(c)-192)<<8+int(b[1])+192, b[2:]
		default:
			if len(b) < 5 {
				return fmt.Errorf("%w: truncated subpacket", ErrMalformedSignature)
			}
			n64 := binary.BigEndian.Uint32(b[1:5])
			if uint64(n64) > uint64(len(b)) {
				return fmt.Errorf("%w: subpacket overruns area", ErrMalformedSignature)
			}
			n, b = int(n64), b[5:]
		}
		if n == 0 || n > len(b) {
			return fmt.Errorf("%w: bad subpacket length", ErrMalformedSignature)
		}
		typ, data := b[0]&0x7f, b[1:n]
		if typ == subpacketAttestedCerts && hashed && s.attested == nil {
			s.attested = data
			if b[0]&0x80 != 0 {
				// b shares body's array: its start's offset in body.
				s.attestedAt = cap(s.body) - cap(b)
			}
		}
		b = b[n:]
		switch typ {
		case subpacketCreationTime:
			if hashed && len(data) == 4 {
				s.created = int64(binary.BigEndian.Uint32(data))
			}
		case subpacketIssuer:
			if len(data) == 8 && !s.hasIssuer {
				s.issuer, s.hasIssuer = binary.BigEndian.Uint64(data), true
			}
		case subpacketIssuerFpr:
			if len(data) > 1 && s.issuerFpr == nil {
				s.issuerFpr = data[1:]
			}
		}
	}
	return nil
}

// issuerKeyID returns the issuer's key ID: the Issuer subpacket's, else
// the one the issuer fingerprint implies, else 0.
func (s *sigInfo) issuerKeyID() uint64 {
	if s.hasIssuer {
		return s.issuer
	}
	if len(s.issuerFpr) >= 8 {
		return keyIDOfFingerprint(s.issuerFpr)
	}
	return 0
}

// claimsIssuer reports whether the signature names km as its issuer, by
// fingerprint or key ID.
func (s *sigInfo) claimsIssuer(km *keyMaterial) bool {
	if s.issuerFpr != nil && km.fpr != nil {
		return string(s.issuerFpr) == string(km.fpr)
	}
	return s.hasIssuer && s.issuer == km.keyID
}

// hasIssuerInfo reports whether the signature names any issuer at all.
func (s *sigInfo) hasIssuerInfo() bool { return s.hasIssuer || s.issuerFpr != nil }

// claimedIssuer returns the key ID of the key the signature claims as its
// issuer the way claimsIssuer matches it: the one its issuer fingerprint
// implies when it has one, else its issuer key ID, else 0.
func (s *sigInfo) claimedIssuer() uint64 {
	if len(s.issuerFpr) >= 8 {
		return keyIDOfFingerprint(s.issuerFpr)
	}
	if s.hasIssuer {
		return s.issuer
	}
	return 0
}

// SignatureSummary is what a signature packet says about itself, read
// without verifying it: enough to list a key's signatures (HKP's vindex).
type SignatureSummary struct {
	// Version is the signature packet version (3, 4 or 6).
	Version int
	// Type is the signature type (RFC 9580 section 5.2.1), e.g. 0x13 for
	// a positive certification or 0x18 for a subkey binding.
	Type uint8
	// Created is the signature's creation time (the v3 field or the
	// hashed creation time subpacket); zero when it carries none.
	Created time.Time
	// Issuer is the key ID of the key the signature names as its issuer:
	// the one its issuer fingerprint subpacket implies when it has one
	// (the subpacket RFC 9580 prefers, and the one the policy matches
	// self-signatures by), else its issuer key ID; 0 when it names none.
	Issuer uint64
}

// ReadSignature reads a signature packet body's version, type, creation
// time and issuer. It verifies nothing: the issuer is only claimed. It
// fails, wrapping ErrMalformedSignature, on a body that is not a
// structurally valid v3, v4, v5 or v6 signature.
func ReadSignature(body []byte) (SignatureSummary, error) {
	info, err := parseSigInfo(body)
	if err != nil {
		return SignatureSummary{}, fmt.Errorf("pgp: read signature: %w", err)
	}
	s := SignatureSummary{Version: info.version, Type: info.sigType, Issuer: info.claimedIssuer()}
	if info.created != 0 {
		s.Created = time.Unix(info.created, 0).UTC()
	}
	return s, nil
}

// goCryptoSignature parses a v4/v6 signature body with go-crypto.
func goCryptoSignature(body []byte) (*packet.Signature, error) {
	p, err := goCryptoRead(TagSignature, body)
	if err != nil {
		return nil, err
	}
	sig, ok := p.(*packet.Signature)
	if !ok {
		return nil, fmt.Errorf("unexpected packet type %T", p)
	}
	return sig, nil
}
