// keys.go: the Key type, the OpenSSH key types Kith recognises, and decoding key blobs
// (including the DSA keys that golang.org/x/crypto/ssh no longer parses).

package ssh

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"math"
	"math/big"
	"time"

	"golang.org/x/crypto/ssh"
)

// Errors about keys. Each is wrapped with context; test for them with errors.Is.
var (
	// ErrUnknownKeyType means the key type is not one OpenSSH reads.
	ErrUnknownKeyType = errors.New("unknown key type")
	// ErrUnsupportedKeyType means the key type is an OpenSSH one that Kith refuses for
	// this use (DSA certificates; DSA or non-NIST keys for signatures).
	ErrUnsupportedKeyType = errors.New("unsupported key type")
	// ErrMalformedKey means the base64 or the key blob does not decode.
	ErrMalformedKey = errors.New("malformed key")
	// ErrKeyTypeMismatch means the type named on an authorized_keys line differs from
	// the type inside its key blob.
	ErrKeyTypeMismatch = errors.New("key type does not match key blob")
)

// Key is an SSH public key as written in an authorized_keys line or a public key file.
type Key struct {
	// Public is the key as written: a plain key, or a *ssh.Certificate.
	Public ssh.PublicKey
	// Comment is the text after the key, with surrounding blanks trimmed. It is not
	// sanitised when parsed; rendering sanitises it (see SanitizeComment).
	Comment string
	// Options are the authorized_keys options before the key, each as written
	// (`no-pty`, `from="10.0.0.0/8"`), or nil. They are validated when parsed but
	// never rendered (see MarshalAuthorizedKey).
	Options []string
	// Cert is Public as a certificate, or nil when Public is a plain key. Parsing
	// does not check its CA signature or validity.
	Cert *ssh.Certificate
}

// NewKey returns a Key for pub with the given comment, filling Cert when pub is a
// certificate.
func NewKey(pub ssh.PublicKey, comment string) *Key {
	k := &Key{Public: pub, Comment: comment}
	k.Cert, _ = pub.(*ssh.Certificate)
	return k
}

// Type returns the key's type as written, e.g. "ssh-ed25519" or
// "ssh-ed25519-cert-v01@openssh.com"; "" for a Key without a public key.
func (k *Key) Type() string {
	if k == nil || k.Public == nil {
		return ""
	}
	return k.Public.Type()
}

// Underlying returns the plain key: the certified key for a certificate, Public
// otherwise. It is the key a person holds the private half of, and the one Kith records
// as an SSH factor.
func (k *Key) Underlying() ssh.PublicKey {
	if k == nil {
		return nil
	}
	return underlying(k.Public)
}

// Fingerprint returns the key's SHA256 fingerprint as OpenSSH computes it (of the
// underlying key for a certificate), or the zero Fingerprint for a Key without a public
// key.
func (k *Key) Fingerprint() Fingerprint {
	if k == nil || k.Public == nil {
		return Fingerprint{}
	}
	return FingerprintOf(k.Public)
}

// Principals returns a certificate's valid principals (nil for a plain key). OpenSSH
// reads an empty list as "any principal".
func (k *Key) Principals() []string {
	if k == nil || k.Cert == nil {
		return nil
	}
	return k.Cert.ValidPrincipals
}

// Validity returns when a certificate is valid: from after (inclusive) until before
// (exclusive). A zero after means since always and a zero before means forever (the
// open ends OpenSSH writes as 0 and 2^64-1); a plain key returns two zero times. The
// certificate's signature and CA are not checked.
func (k *Key) Validity() (after, before time.Time) {
	if k == nil || k.Cert == nil {
		return time.Time{}, time.Time{}
	}
	if v := k.Cert.ValidAfter; v != 0 {
		after = certTime(v)
	}
	if v := k.Cert.ValidBefore; v != ssh.CertTimeInfinity {
		before = certTime(v)
	}
	return after, before
}

// ValidAt reports whether the key may be used at t: always for a plain key, within the
// validity period for a certificate, compared as OpenSSH does (in whole seconds). It
// does not check the certificate's signature or its CA; that is for whoever trusts the
// CA.
func (k *Key) ValidAt(t time.Time) bool {
	if k == nil || k.Public == nil {
		return false
	}
	if k.Cert == nil {
		return true
	}
	var now uint64
	if sec := t.Unix(); sec > 0 {
		now = uint64(sec)
	}
	return now >= k.Cert.ValidAfter && now < k.Cert.ValidBefore
}

// certTime converts an OpenSSH certificate time, seconds since the epoch, clamping
// what int64 cannot hold.
func certTime(v uint64) time.Time {
	if v > math.MaxInt64 {
		v = math.MaxInt64
	}
	return time.Unix(int64(v), 0).UTC()
}

// underlying returns the certified key of a certificate, or pub itself.
func underlying(pub ssh.PublicKey) ssh.PublicKey {
	if c, ok := pub.(*ssh.Certificate); ok && c.Key != nil {
		return c.Key
	}
	return pub
}

// The DSA type names, which x/crypto/ssh marks deprecated.
const (
	keyTypeDSA  = "ssh-dss"
	certTypeDSA = "ssh-dss-cert-v01@openssh.com"
)

// IsKeyType reports whether name is an OpenSSH public key type that this package reads,
// e.g. "ssh-ed25519" or "ssh-rsa-cert-v01@openssh.com". Signature algorithm names such
// as "rsa-sha2-512" are not key types.
func IsKeyType(name string) bool {
	switch name {
	case ssh.KeyAlgoRSA, keyTypeDSA, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
		ssh.KeyAlgoED25519, ssh.KeyAlgoSKECDSA256, ssh.KeyAlgoSKED25519,
		ssh.CertAlgoRSAv01, certTypeDSA, ssh.CertAlgoECDSA256v01, ssh.CertAlgoECDSA384v01,
		ssh.CertAlgoECDSA521v01, ssh.CertAlgoED25519v01, ssh.CertAlgoSKECDSA256v01,
		ssh.CertAlgoSKED25519v01:
		return true
	}
	return false
}

// ParsePublicKey decodes an SSH wire-format public key blob (the bytes base64-encoded in
// an authorized_keys line) of any type OpenSSH reads, DSA included.
func ParsePublicKey(blob []byte) (ssh.PublicKey, error) {
	var head struct {
		Type string
		Rest []byte `ssh:"rest"`
	}
	if err := ssh.Unmarshal(blob, &head); err != nil {
		return nil, fmt.Errorf("ssh: parse key blob: %w: %v", ErrMalformedKey, err)
	}
	switch {
	case head.Type == keyTypeDSA:
		k, err := parseDSA(blob)
		if err != nil {
			return nil, fmt.Errorf("ssh: parse %s key: %w", head.Type, err)
		}
		return k, nil
	case head.Type == certTypeDSA:
		return nil, fmt.Errorf("ssh: parse key blob: %w: %s (DSA certificates)", ErrUnsupportedKeyType, head.Type)
	case !IsKeyType(head.Type):
		return nil, fmt.Errorf("ssh: parse key blob: %w %q", ErrUnknownKeyType, head.Type)
	}
	pub, err := ssh.ParsePublicKey(blob)
	if err != nil {
		return nil, fmt.Errorf("ssh: parse %s key: %w: %v", head.Type, ErrMalformedKey, err)
	}
	if c, ok := pub.(*ssh.Certificate); ok && (c.Key == nil || c.SignatureKey == nil || c.Signature == nil) {
		return nil, fmt.Errorf("ssh: parse %s key: %w: incomplete certificate", head.Type, ErrMalformedKey)
	}
	return pub, nil
}

// maxDSABits bounds the DSA modulus, as OpenSSH's own limit on key sizes does (16384
// bits); real DSA keys are 1024 bits.
const maxDSABits = 16384

// dsaKey is an ssh-dss public key. It exists so that DSA lines parse, fingerprint and
// render; it refuses to verify signatures (see the package doc).
type dsaKey struct {
	p, q, g, y *big.Int
}

// dsaWire is the wire form of an ssh-dss key (RFC 4253, section 6.6).
type dsaWire struct {
	Type       string
	P, Q, G, Y *big.Int
}

func parseDSA(blob []byte) (*dsaKey, error) {
	var w dsaWire
	if err := ssh.Unmarshal(blob, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedKey, err)
	}
	return newDSAKey(w.P, w.Q, w.G, w.Y)
}

func newDSAKey(p, q, g, y *big.Int) (*dsaKey, error) {
	for _, v := range []*big.Int{p, q, g, y} {
		if v == nil || v.Sign() <= 0 {
			return nil, fmt.Errorf("%w: DSA parameter is not positive", ErrMalformedKey)
		}
	}
	if p.BitLen() > maxDSABits || q.BitLen() > maxDSABits {
		return nil, fmt.Errorf("%w: DSA modulus of %d bits is over %d", ErrMalformedKey, p.BitLen(), maxDSABits)
	}
	return &dsaKey{p: p, q: q, g: g, y: y}, nil
}

// Type returns "ssh-dss".
func (k *dsaKey) Type() string { return keyTypeDSA }

// Marshal returns the key's wire form.
func (k *dsaKey) Marshal() []byte {
	return ssh.Marshal(dsaWire{Type: k.Type(), P: k.p, Q: k.q, G: k.g, Y: k.y})
}

// Verify refuses: Kith does not accept DSA signatures.
func (k *dsaKey) Verify(data []byte, sig *ssh.Signature) error {
	return fmt.Errorf("ssh: verify with %s: %w: DSA signatures are not accepted", k.Type(), ErrUnsupportedKeyType)
}

// keyBits returns the key size ssh-keygen prints (modulus bits for RSA and DSA, curve
// bits for ECDSA, 256 for Ed25519), of the underlying key for a certificate; 0 if unknown.
func keyBits(pub ssh.PublicKey) int {
	pub = underlying(pub)
	if d, ok := pub.(*dsaKey); ok {
		return d.p.BitLen()
	}
	cp, ok := pub.(ssh.CryptoPublicKey)
	if !ok {
		return 0
	}
	switch c := cp.CryptoPublicKey().(type) {
	case *rsa.PublicKey:
		if c.N == nil {
			return 0
		}
		return c.N.BitLen()
	case *ecdsa.PublicKey:
		if c.Curve == nil {
			return 0
		}
		return c.Curve.Params().BitSize
	case ed25519.PublicKey:
		return 256
	}
	return 0
}

// keyLabel returns the short type name ssh-keygen prints in parentheses: RSA, DSA,
// ECDSA, ED25519, ECDSA-SK, ED25519-SK, with "-CERT" for certificates.
func keyLabel(pub ssh.PublicKey) string {
	label := "UNKNOWN"
	switch underlying(pub).Type() {
	case ssh.KeyAlgoRSA:
		label = "RSA"
	case keyTypeDSA:
		label = "DSA"
	case ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521:
		label = "ECDSA"
	case ssh.KeyAlgoED25519:
		label = "ED25519"
	case ssh.KeyAlgoSKECDSA256:
		label = "ECDSA-SK"
	case ssh.KeyAlgoSKED25519:
		label = "ED25519-SK"
	}
	if _, ok := pub.(*ssh.Certificate); ok {
		label += "-CERT"
	}
	return label
}
