// pqc.go: version 6 and post-quantum keys (RFC 9580, RFC 9980), made with
// go-crypto, for the tests of the policy, the frontends and the legacy-client
// rule that serves gpg only what it reads.

package keygen

import (
	"bytes"
	"crypto"
	"fmt"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// Kind names a shape of key that NewKey makes.
type Kind int

// The kinds of key NewKey makes. Every kind has one user ID; the v6 kinds
// state their key properties in a direct-key self-signature, as RFC 9580
// has v6 keys do.
const (
	// V6MLDSA65: a v6 ML-DSA-65+Ed25519 primary key (algorithm 30) with an
	// ML-KEM-768+X25519 encryption subkey (35): RFC 9980's recommended
	// pair. Its signatures are 3,373 bytes of value; the primary key 1,984.
	V6MLDSA65 Kind = iota
	// V6MLDSA87: a v6 ML-DSA-87+Ed448 primary key (31) with an
	// ML-KEM-1024+X448 subkey (36), the largest key material RFC 9980
	// defines (2,649 and 1,624 bytes) and 4,741-byte signature values.
	V6MLDSA87
	// V6SLHDSA128s: a v6 SLH-DSA-SHAKE-128s primary key (32) with an
	// ML-KEM-768+X25519 subkey: 32-byte keys, 7,856-byte signatures.
	V6SLHDSA128s
	// V6SLHDSA128f: a v6 SLH-DSA-SHAKE-128f primary key (33) with an
	// ML-KEM-768+X25519 subkey: 17,088-byte signatures, the dearest to
	// verify of RFC 9980's algorithms.
	V6SLHDSA128f
	// V6SLHDSA256s: a v6 SLH-DSA-SHAKE-256s primary key (34) with an
	// ML-KEM-1024+X448 subkey and an SLH-DSA-SHAKE-256s signing subkey:
	// 29,792-byte signatures, the largest any algorithm makes, and the
	// signing subkey's binding, which embeds its back-signature, the
	// largest signature packet there is (about 60,000 bytes). Slow to make
	// (seconds).
	V6SLHDSA256s
	// V6Ed25519: a v6 key of RFC 9580's own algorithms (Ed25519 primary,
	// X25519 subkey), no post-quantum part.
	V6Ed25519
	// V4MLKEMSubkey: a v4 EdDSA (Ed25519) key with two encryption subkeys,
	// the classic cv25519 one and an ML-KEM-768+X25519 one beside it (RFC
	// 9980 allows that algorithm, alone of its kind, on v4 keys): what a
	// gpg user adds post-quantum encryption to an existing key with.
	V4MLKEMSubkey
)

// String names the kind as the tests and reports say it.
func (k Kind) String() string {
	switch k {
	case V6MLDSA65:
		return "v6 ML-DSA-65+Ed25519"
	case V6MLDSA87:
		return "v6 ML-DSA-87+Ed448"
	case V6SLHDSA128s:
		return "v6 SLH-DSA-SHAKE-128s"
	case V6SLHDSA128f:
		return "v6 SLH-DSA-SHAKE-128f"
	case V6SLHDSA256s:
		return "v6 SLH-DSA-SHAKE-256s"
	case V6Ed25519:
		return "v6 Ed25519"
	case V4MLKEMSubkey:
		return "v4 Ed25519 with ML-KEM-768+X25519 subkey"
	}
	return fmt.Sprintf("keygen.Kind(%d)", int(k))
}

// pqcConfig is the go-crypto configuration a kind's key is made with.
func pqcConfig(kind Kind, seed int64, created time.Time) (*packet.Config, error) {
	c := &packet.Config{
		Rand:        seededReader(seed, 0x90c),
		Time:        func() time.Time { return created },
		DefaultHash: crypto.SHA256,
		V6Keys:      true,
	}
	switch kind {
	case V6MLDSA65:
		c.Algorithm = packet.PubKeyAlgoMldsa65Ed25519
	case V6MLDSA87:
		c.Algorithm = packet.PubKeyAlgoMldsa87Ed448
		c.DefaultHash = crypto.SHA512
	case V6SLHDSA128s:
		c.Algorithm = packet.PubKeyAlgoSlhdsaShake128s
	case V6SLHDSA128f:
		c.Algorithm = packet.PubKeyAlgoSlhdsaShake128f
	case V6SLHDSA256s:
		c.Algorithm = packet.PubKeyAlgoSlhdsaShake256s
		c.DefaultHash = crypto.SHA512
	case V6Ed25519:
		c.Algorithm = packet.PubKeyAlgoEd25519
	case V4MLKEMSubkey:
		c.V6Keys = false
		c.Algorithm, c.Curve = packet.PubKeyAlgoEdDSA, packet.Curve25519
	default:
		return nil, fmt.Errorf("keygen: unknown kind %d", int(kind))
	}
	return c, nil
}

// NewKey returns a key of the given kind for "name <email>", created at
// created. The key material is deterministic in seed; signatures whose
// algorithm hedges with fresh randomness (ML-DSA) may differ between calls.
func NewKey(kind Kind, name, email string, created time.Time, seed int64) (*openpgp.Entity, error) {
	c, err := pqcConfig(kind, seed, created)
	if err != nil {
		return nil, err
	}
	e, err := openpgp.NewEntity(name, "", email, c)
	if err != nil {
		return nil, fmt.Errorf("keygen: %v: %w", kind, err)
	}
	if kind == V6SLHDSA256s {
		c.Time = func() time.Time { return created.Add(2 * time.Minute) }
		if err := e.AddSigningSubkey(c); err != nil {
			return nil, fmt.Errorf("keygen: %v: signing subkey: %w", kind, err)
		}
	}
	if kind == V4MLKEMSubkey {
		c.Algorithm, c.Time = packet.PubKeyAlgoMlkem768X25519, func() time.Time { return created.Add(time.Minute) }
		if err := e.AddEncryptionSubkey(c); err != nil {
			return nil, fmt.Errorf("keygen: %v: ML-KEM subkey: %w", kind, err)
		}
	}
	return e, nil
}

// PublicKey returns the public key of NewKey(kind, name, email, created,
// seed) as binary packets, as Serialize writes it.
func PublicKey(kind Kind, name, email string, created time.Time, seed int64) ([]byte, error) {
	e, err := NewKey(kind, name, email, created, seed)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := Serialize(&b, e); err != nil {
		return nil, fmt.Errorf("keygen: %v: %w", kind, err)
	}
	return b.Bytes(), nil
}

// Certify has signer certify every user ID of e (a generic certification,
// made at time at) and returns e's public key with the certifications, as
// Serialize writes it. A v6 signer makes v6 signatures, which RFC 9580
// allows on v4 keys too: the case that gpg 2.2 cannot read.
func Certify(e, signer *openpgp.Entity, at time.Time, seed int64) ([]byte, error) {
	c := &packet.Config{Rand: seededReader(seed, 0xce27), Time: func() time.Time { return at }, DefaultHash: crypto.SHA256}
	if signer.PrimaryKey.PubKeyAlgo == packet.PubKeyAlgoMldsa87Ed448 || signer.PrimaryKey.PubKeyAlgo == packet.PubKeyAlgoSlhdsaShake256s {
		c.DefaultHash = crypto.SHA512
	}
	for name := range e.Identities {
		if err := e.SignIdentity(name, signer, c); err != nil {
			return nil, fmt.Errorf("keygen: certify %q: %w", name, err)
		}
	}
	var b bytes.Buffer
	if err := Serialize(&b, e); err != nil {
		return nil, fmt.Errorf("keygen: certify: %w", err)
	}
	return b.Bytes(), nil
}
