// sshsig.go: verifying SSHSIG signatures, the format `ssh-keygen -Y sign` writes
// (OpenSSH's PROTOCOL.sshsig), with which a person proves they hold an SSH key.
//
// The armored signature is "-----BEGIN SSH SIGNATURE-----", base64 lines, and
// "-----END SSH SIGNATURE-----". Its blob is
//
//	byte[6] "SSHSIG"
//	uint32  version (1)
//	string  public key (wire form)
//	string  namespace
//	string  reserved
//	string  hash algorithm ("sha256" or "sha512")
//	string  signature (wire form; for sk- keys followed by flags and counter)
//
// and the key signs, with its usual signature algorithm,
//
//	byte[6] "SSHSIG"
//	string  namespace
//	string  reserved
//	string  hash algorithm
//	string  H(message)
//
// where, as OpenSSH does when it verifies (checked against ssh-keygen in the tests),
// the reserved field is always empty, whatever the blob's reserved field holds.

package ssh

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"

	"golang.org/x/crypto/ssh"
)

// Namespace is the SSHSIG namespace of Kith's possession challenges: people sign with
// `ssh-keygen -Y sign -n kith -f KEY`. A namespace keeps a signature made for one
// purpose (git commits, files) from being replayed for another.
const Namespace = "kith"

// MaxSignatureSize is the largest armored SSHSIG accepted: 64 KiB. A signature by a
// 16384-bit RSA key, OpenSSH's largest, is about 6 KiB armored.
const MaxSignatureSize = 64 << 10

// Errors about SSHSIG signatures, each with its own reason, so a caller can tell the
// signer what went wrong. They are wrapped with context; test with errors.Is.
var (
	// ErrMalformedArmor means the input is not an armored SSH signature: no BEGIN or
	// END line, bad base64, or text after the END line.
	ErrMalformedArmor = errors.New("malformed SSH signature armor")
	// ErrMalformedSignature means the decoded blob is not an SSHSIG: wrong magic,
	// truncated, or trailing data.
	ErrMalformedSignature = errors.New("malformed SSH signature")
	// ErrUnsupportedVersion means the SSHSIG version is not 1.
	ErrUnsupportedVersion = errors.New("unsupported SSH signature version")
	// ErrUnsupportedHash means the hash algorithm is neither sha256 nor sha512.
	ErrUnsupportedHash = errors.New("unsupported SSH signature hash algorithm")
	// ErrWrongNamespace means the signature was made for another namespace.
	ErrWrongNamespace = errors.New("SSH signature namespace mismatch")
	// ErrSignatureAlgorithm means the signature algorithm does not fit the key, or is
	// one SSHSIG forbids (ssh-rsa, i.e. RSA with SHA-1).
	ErrSignatureAlgorithm = errors.New("SSH signature algorithm not accepted")
	// ErrUserPresence means a security-key (sk-) signature does not assert that the
	// user touched the key.
	ErrUserPresence = errors.New("security key signature without user presence")
	// ErrBadSignature means the signature does not verify: the message or the
	// signature was altered, or it was made by another key than the one it names.
	ErrBadSignature = errors.New("SSH signature does not verify")
	// ErrWrongKey means the signature verifies but is by another key than expected.
	ErrWrongKey = errors.New("SSH signature by another key")
)

const (
	sshsigMagic   = "SSHSIG"
	sshsigVersion = 1
	armorBegin    = "-----BEGIN SSH SIGNATURE-----"
	armorEnd      = "-----END SSH SIGNATURE-----"
)

// Signature is a parsed SSHSIG, an SSH signature as `ssh-keygen -Y sign` writes it.
// Parsing checks its structure only; Verify checks the namespace, algorithms and
// signature.
type Signature struct {
	// PublicKey is the key the signature names (a plain key or a certificate).
	PublicKey ssh.PublicKey
	// Namespace is the namespace it was made for, e.g. "kith" or "git".
	Namespace string
	// Reserved is the reserved field, empty in every signature OpenSSH makes. It is
	// ignored, as PROTOCOL.sshsig asks, and not covered by the signature: like
	// OpenSSH, Verify checks the signature over an empty reserved field.
	Reserved []byte
	// HashAlgorithm is the hash applied to the message: "sha512" (ssh-keygen's
	// default) or "sha256".
	HashAlgorithm string
	// Signature is the signature over the signed data. For security keys its Rest
	// holds the flags byte and the big-endian counter.
	Signature *ssh.Signature
	// SKFlags and SKCounter are a security-key signature's authenticator flags (0x01
	// user present, 0x04 user verified) and signature counter, as parsed from
	// Signature.Rest (which Verify reads); zero for other keys.
	SKFlags   byte
	SKCounter uint32
}

// sshsigWire is the blob after the magic.
type sshsigWire struct {
	Version       uint32
	PublicKey     []byte
	Namespace     string
	Reserved      []byte
	HashAlgorithm string
	Signature     []byte
}

// sigWire is an SSH signature in wire form; Rest holds what follows the signature
// blob (a security key's flags and counter).
type sigWire struct {
	Format string
	Blob   []byte
	Rest   []byte `ssh:"rest"`
}

// skFields is what follows a security key's signature blob (PROTOCOL.u2f).
type skFields struct {
	Flags   byte
	Counter uint32
}

// skFlagUserPresent is the authenticator's "user present" flag.
const skFlagUserPresent = 0x01

// ParseSignature parses an armored SSH signature, as `ssh-keygen -Y sign` writes it. It
// checks the structure only (armor, magic, version, that the key and signature
// decode); use Verify, VerifySignature or VerifySignatureBy to check the signature.
func ParseSignature(armored []byte) (*Signature, error) {
	if len(armored) > MaxSignatureSize {
		return nil, fmt.Errorf("ssh: parse SSH signature: %w: %d bytes, limit %d", ErrTooLarge, len(armored), MaxSignatureSize)
	}
	blob, err := dearmor(armored)
	if err != nil {
		return nil, fmt.Errorf("ssh: parse SSH signature: %w", err)
	}
	sig, err := parseSignatureBlob(blob)
	if err != nil {
		return nil, fmt.Errorf("ssh: parse SSH signature: %w", err)
	}
	return sig, nil
}

// dearmor extracts the blob between the BEGIN and END lines. Blank space around the
// armor, CRLF line endings and any line length are accepted.
func dearmor(in []byte) ([]byte, error) {
	in = bytes.TrimSpace(in)
	body, ok := bytes.CutPrefix(in, []byte(armorBegin))
	if !ok {
		return nil, fmt.Errorf("%w: does not start with %q", ErrMalformedArmor, armorBegin)
	}
	body, ok = bytes.CutSuffix(body, []byte(armorEnd))
	if !ok {
		return nil, fmt.Errorf("%w: does not end with %q", ErrMalformedArmor, armorEnd)
	}
	if len(body) == 0 || (body[0] != '\n' && body[0] != '\r') {
		return nil, fmt.Errorf("%w: no line break after %q", ErrMalformedArmor, armorBegin)
	}
	b64 := make([]byte, 0, len(body))
	for _, c := range body {
		switch c {
		case '\n', '\r', ' ', '\t':
			continue
		}
		b64 = append(b64, c)
	}
	if len(b64) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrMalformedArmor)
	}
	blob := make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
	n, err := base64.StdEncoding.Decode(blob, b64)
	if err != nil {
		return nil, fmt.Errorf("%w: bad base64: %v", ErrMalformedArmor, err)
	}
	return blob[:n], nil
}

// parseSignatureBlob parses the decoded blob.
func parseSignatureBlob(blob []byte) (*Signature, error) {
	rest, ok := bytes.CutPrefix(blob, []byte(sshsigMagic))
	if !ok {
		return nil, fmt.Errorf("%w: no %q magic", ErrMalformedSignature, sshsigMagic)
	}
	var w sshsigWire
	if len(rest) >= 4 {
		// Check the version first, so that a future version with another layout is
		// reported as such rather than as garbage.
		if v := uint32(rest[0])<<24 | uint32(rest[1])<<16 | uint32(rest[2])<<8 | uint32(rest[3]); v != sshsigVersion {
			return nil, fmt.Errorf("%w: version %d, want %d", ErrUnsupportedVersion, v, sshsigVersion)
		}
	}
	if err := ssh.Unmarshal(rest, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedSignature, err)
	}
	pub, err := ParsePublicKey(w.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("%w: public key: %w", ErrMalformedSignature, err)
	}
	var sw sigWire
	if err := ssh.Unmarshal(w.Signature, &sw); err != nil {
		return nil, fmt.Errorf("%w: signature: %v", ErrMalformedSignature, err)
	}
	s := &Signature{
		PublicKey:     pub,
		Namespace:     w.Namespace,
		Reserved:      w.Reserved,
		HashAlgorithm: w.HashAlgorithm,
		Signature:     &ssh.Signature{Format: sw.Format, Blob: sw.Blob},
	}
	if isSKType(underlying(pub).Type()) {
		var f skFields
		if err := ssh.Unmarshal(sw.Rest, &f); err != nil {
			return nil, fmt.Errorf("%w: security key flags and counter: %v", ErrMalformedSignature, err)
		}
		s.Signature.Rest = sw.Rest
		s.SKFlags, s.SKCounter = f.Flags, f.Counter
	} else if len(sw.Rest) > 0 {
		return nil, fmt.Errorf("%w: %d bytes after the signature", ErrMalformedSignature, len(sw.Rest))
	}
	return s, nil
}

// isSKType reports whether a plain key type is a security-key (FIDO) type.
func isSKType(t string) bool {
	return t == ssh.KeyAlgoSKECDSA256 || t == ssh.KeyAlgoSKED25519
}

// Verify checks that s is a valid signature of message for namespace by s.PublicKey.
//
// For a security key it requires the user-presence flag, as sshd does for logins by
// default (ssh-keygen -Y verify does not), so that a proof means someone touched the
// key; a key made with -O no-touch-required cannot prove possession.
//
// It does not say whether s.PublicKey is the key you expected: compare it, or use
// VerifySignatureBy. For a certificate it checks the signature of the certified key only,
// not the certificate's CA, validity or principals.
func (s *Signature) Verify(message []byte, namespace string) error {
	if s == nil || s.PublicKey == nil || s.Signature == nil {
		return fmt.Errorf("ssh: verify SSH signature: %w: incomplete", ErrMalformedSignature)
	}
	if c, ok := s.PublicKey.(*ssh.Certificate); ok && c.Key == nil {
		return fmt.Errorf("ssh: verify SSH signature: %w: certificate without a key", ErrMalformedSignature)
	}
	if namespace == "" {
		return fmt.Errorf("ssh: verify SSH signature: %w: the expected namespace is empty", ErrWrongNamespace)
	}
	if s.Namespace != namespace {
		return fmt.Errorf("ssh: verify SSH signature: %w: signed for %q, want %q", ErrWrongNamespace, truncate(s.Namespace, 80), namespace)
	}
	h, err := sshsigHash(s.HashAlgorithm)
	if err != nil {
		return fmt.Errorf("ssh: verify SSH signature: %w", err)
	}
	keyType := underlying(s.PublicKey).Type()
	if err := checkSignatureFormat(keyType, s.Signature.Format); err != nil {
		return fmt.Errorf("ssh: verify SSH signature: %w", err)
	}
	if isSKType(keyType) {
		// The flags that count are the signed ones in Signature.Rest.
		var f skFields
		if err := ssh.Unmarshal(s.Signature.Rest, &f); err != nil {
			return fmt.Errorf("ssh: verify SSH signature: %w: security key flags and counter: %v", ErrMalformedSignature, err)
		}
		if f.Flags&skFlagUserPresent == 0 {
			return fmt.Errorf("ssh: verify SSH signature: %w (flags 0x%02x)", ErrUserPresence, f.Flags)
		}
	}
	h.Write(message)
	data := signedData(s.Namespace, s.HashAlgorithm, h.Sum(nil))
	if err := s.PublicKey.Verify(data, s.Signature); err != nil {
		return fmt.Errorf("ssh: verify SSH signature by %s %s: %w: %v", keyType, FingerprintOf(s.PublicKey), ErrBadSignature, err)
	}
	return nil
}

// VerifySignature parses an armored SSH signature and verifies it over message for
// namespace (Kith's challenges use Namespace). It returns the key that made it; the
// caller must check that this is the key it expected (or use VerifySignatureBy).
func VerifySignature(armored, message []byte, namespace string) (ssh.PublicKey, error) {
	s, err := ParseSignature(armored)
	if err != nil {
		return nil, err
	}
	if err := s.Verify(message, namespace); err != nil {
		return nil, err
	}
	return s.PublicKey, nil
}

// VerifySignatureBy is VerifySignature for a signature that must be by want: a valid
// signature by any other key gives ErrWrongKey. Keys match when their wire forms are
// equal, so a signature made with a certificate matches the certificate, not its
// plain key.
func VerifySignatureBy(armored, message []byte, namespace string, want ssh.PublicKey) error {
	if want == nil {
		return fmt.Errorf("ssh: verify SSH signature: %w: no expected key", ErrWrongKey)
	}
	got, err := VerifySignature(armored, message, namespace)
	if err != nil {
		return err
	}
	if !bytes.Equal(got.Marshal(), want.Marshal()) {
		return fmt.Errorf("ssh: verify SSH signature: %w: signed by %s %s, want %s %s", ErrWrongKey,
			got.Type(), FingerprintOf(got), want.Type(), FingerprintOf(want))
	}
	return nil
}

// sshsigHash returns the message hash for an SSHSIG hash algorithm name.
func sshsigHash(name string) (hash.Hash, error) {
	switch name {
	case "sha256":
		return sha256.New(), nil
	case "sha512":
		return sha512.New(), nil
	}
	return nil, fmt.Errorf("%w %q (want sha256 or sha512)", ErrUnsupportedHash, truncate(name, 40))
}

// checkSignatureFormat checks that a signature algorithm is the one an SSHSIG by a key
// of keyType (a plain type) may use: rsa-sha2-256 or rsa-sha2-512 for RSA (never
// ssh-rsa, which PROTOCOL.sshsig forbids), the key type itself for the others.
func checkSignatureFormat(keyType, format string) error {
	switch keyType {
	case keyTypeDSA:
		return fmt.Errorf("%w: %s keys (DSA) cannot prove possession", ErrUnsupportedKeyType, keyType)
	case ssh.KeyAlgoRSA:
		if format == ssh.KeyAlgoRSASHA256 || format == ssh.KeyAlgoRSASHA512 {
			return nil
		}
	default:
		if format == keyType {
			return nil
		}
	}
	return fmt.Errorf("%w: %q for a %s key", ErrSignatureAlgorithm, truncate(format, 60), keyType)
}

// signedData builds what an SSHSIG's key signs, with an empty reserved field.
func signedData(namespace, hashAlg string, digest []byte) []byte {
	return append([]byte(sshsigMagic), ssh.Marshal(struct {
		Namespace     string
		Reserved      []byte
		HashAlgorithm string
		Digest        []byte
	}{namespace, nil, hashAlg, digest})...)
}
