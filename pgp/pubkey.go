// pubkey.go: public-key packet bodies (primary keys and subkeys). Kith computes
// fingerprints and key IDs from the original bytes itself, so that keys whose
// algorithm go-crypto does not know still have an identity; go-crypto parses
// the key material when it can, for signature verification.

package pgp

import (
	"bytes"
	//lint:ignore SA1019 DSA keys are part of OpenPGP; go-crypto uses crypto/dsa too.
	"crypto/dsa"
	"crypto/md5"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"math/big"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// ErrMalformedKey: a public-key packet body is structurally invalid.
var ErrMalformedKey = errors.New("malformed public-key packet")

// keyMaterial is what Kith knows about one public-key or public-subkey packet.
type keyMaterial struct {
	body    []byte
	version int
	created time.Time
	algo    packet.PublicKeyAlgorithm
	fpr     []byte // nil when the version is unknown
	keyID   uint64
	// v3ValidDays is the v3 validity period in days (0 = no expiry).
	v3ValidDays uint16
	// pub is go-crypto's parse of the key; nil when go-crypto does not
	// support the algorithm or version (then pubErr says why).
	pub    *packet.PublicKey
	pubErr error
}

// parseKeyMaterial parses a public-key or public-subkey packet body.
// An error means the packet is structurally unusable; an unsupported
// algorithm is not an error (km.pub is then nil).
func parseKeyMaterial(body []byte, subkey bool) (km *keyMaterial, err error) {
	if len(body) < 1 {
		return nil, fmt.Errorf("%w: empty", ErrMalformedKey)
	}
	km = &keyMaterial{body: body, version: int(body[0])}
	switch km.version {
	case 2, 3:
		if len(body) < 8 {
			return nil, fmt.Errorf("%w: short v3 key", ErrMalformedKey)
		}
		km.created = time.Unix(int64(binary.BigEndian.Uint32(body[1:5])), 0)
		km.v3ValidDays = binary.BigEndian.Uint16(body[5:7])
		km.algo = packet.PublicKeyAlgorithm(body[7])
		if err := km.parseV3(); err != nil {
			return nil, err
		}
		return km, nil
	case 4:
		if len(body) < 6 {
			return nil, fmt.Errorf("%w: short v4 key", ErrMalformedKey)
		}
		h := sha1.New()
		writeKeyPrefix(h, 4, body)
		km.fpr = h.Sum(nil)
		km.keyID = binary.BigEndian.Uint64(km.fpr[12:20])
	case 5, 6:
		if len(body) < 10 {
			return nil, fmt.Errorf("%w: short v%d key", ErrMalformedKey, km.version)
		}
		if n := binary.BigEndian.Uint32(body[6:10]); int64(n) != int64(len(body)-10) {
			return nil, fmt.Errorf("%w: key material length %d, have %d", ErrMalformedKey, n, len(body)-10)
		}
		h := sha256.New()
		writeKeyPrefix(h, km.version, body)
		km.fpr = h.Sum(nil)
		km.keyID = binary.BigEndian.Uint64(km.fpr[:8])
	default:
		if len(body) < 6 {
			return nil, fmt.Errorf("%w: short key", ErrMalformedKey)
		}
		km.pubErr = fmt.Errorf("unsupported key version %d", km.version)
	}
	km.created = time.Unix(int64(binary.BigEndian.Uint32(body[1:5])), 0)
	km.algo = packet.PublicKeyAlgorithm(body[5])
	if km.version == 4 || km.version == 6 {
		km.pub, km.pubErr = goCryptoPublicKey(body, subkey)
		if km.pub != nil {
			if err := checkVerifiable(km.pub); err != nil {
				km.pub, km.pubErr = nil, err
			}
		}
	} else if km.pubErr == nil {
		km.pubErr = fmt.Errorf("unsupported key version %d", km.version)
	}
	return km, nil
}

// parseV3 handles a version 3 (or 2) key: RSA only (RFC 4880 section 5.5.2).
// Its fingerprint is the MD5 of the modulus and exponent bytes, its key ID
// the low 64 bits of the modulus.
func (km *keyMaterial) parseV3() error {
	rest := km.body[8:]
	n, rest, ok := readMPI(rest)
	if !ok {
		return fmt.Errorf("%w: v3 modulus", ErrMalformedKey)
	}
	e, _, ok := readMPI(rest)
	if !ok {
		return fmt.Errorf("%w: v3 exponent", ErrMalformedKey)
	}
	h := md5.New()
	h.Write(n)
	h.Write(e)
	km.fpr = h.Sum(nil)
	if len(n) >= 8 {
		km.keyID = binary.BigEndian.Uint64(n[len(n)-8:])
	}
	switch km.algo {
	case packet.PubKeyAlgoRSA, packet.PubKeyAlgoRSAEncryptOnly, packet.PubKeyAlgoRSASignOnly:
	default:
		km.pubErr = fmt.Errorf("unsupported v3 key algorithm %d", km.algo)
		return nil
	}
	E := new(big.Int).SetBytes(e)
	if len(n) == 0 || len(n)*8 > maxRSABits || !E.IsInt64() || E.Int64() < 3 || E.Int64() > maxRSAExponent {
		km.pubErr = errors.New("unusable v3 RSA key")
		return nil
	}
	// A go-crypto key carrying the same RSA numbers, for verification only
	// (its own fingerprint fields are those of a v4 key and are not used).
	km.pub = packet.NewRSAPublicKey(km.created, &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(E.Int64())})
	km.pub.PubKeyAlgo = km.algo
	return nil
}

// Limits on DSA key parameters for verification: beyond them a single
// signature check costs seconds (a modular exponentiation with a huge
// modulus), which an attacker could use to stall the server. No real key
// comes near them. The RSA limits are in budget.go.
const (
	maxDSAPBits = 4096
	maxDSAQBits = 512
)

// checkVerifiable rejects key parameters too large to verify cheaply.
func checkVerifiable(pub *packet.PublicKey) error {
	switch k := pub.PublicKey.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() > maxRSABits {
			return fmt.Errorf("RSA modulus of %d bits exceeds %d", k.N.BitLen(), maxRSABits)
		}
		if k.E > maxRSAExponent {
			return fmt.Errorf("RSA public exponent %d exceeds %d", k.E, maxRSAExponent)
		}
	case *dsa.PublicKey:
		if k.P.BitLen() > maxDSAPBits || k.Q.BitLen() > maxDSAQBits {
			return fmt.Errorf("DSA parameters of %d/%d bits exceed %d/%d", k.P.BitLen(), k.Q.BitLen(), maxDSAPBits, maxDSAQBits)
		}
	}
	return nil
}

// readMPI splits one multiprecision integer off b.
func readMPI(b []byte) (mpi, rest []byte, ok bool) {
	if len(b) < 2 {
		return nil, nil, false
	}
	bits := int(b[0])<<8 | int(b[1])
	n := (bits + 7) / 8
	if len(b) < 2+n {
		return nil, nil, false
	}
	return b[2 : 2+n], b[2+n:], true
}

// goCryptoPublicKey parses a v4/v6 key body with go-crypto, converting any
// panic into an error.
func goCryptoPublicKey(body []byte, subkey bool) (pk *packet.PublicKey, err error) {
	tag := TagPublicKey
	if subkey {
		tag = TagPublicSubkey
	}
	p, err := goCryptoRead(tag, body)
	if err != nil {
		return nil, err
	}
	pk, ok := p.(*packet.PublicKey)
	if !ok {
		return nil, fmt.Errorf("unexpected packet type %T", p)
	}
	return pk, nil
}

// goCryptoRead parses one packet body with go-crypto's parser.
func goCryptoRead(tag Tag, body []byte) (p packet.Packet, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("go-crypto panicked: %v", r)
		}
	}()
	buf := make([]byte, 0, headerLen(len(body))+len(body))
	buf = appendPacket(buf, Packet{Tag: tag, Body: body})
	return packet.Read(bytes.NewReader(buf))
}

// writeKeyPrefix writes a key packet as it is hashed in fingerprints and
// signatures: 0x99 and a two-byte length for v3/v4 keys, 0x9A (v5) or 0x9B
// (v6) and a four-byte length.
func writeKeyPrefix(h hash.Hash, version int, body []byte) {
	var hdr [5]byte
	switch version {
	case 5, 6:
		hdr[0] = 0x95 + byte(version)
		binary.BigEndian.PutUint32(hdr[1:], uint32(len(body)))
		h.Write(hdr[:5])
	default:
		hdr[0] = 0x99
		binary.BigEndian.PutUint16(hdr[1:], uint16(len(body)))
		h.Write(hdr[:3])
	}
	h.Write(body)
}
