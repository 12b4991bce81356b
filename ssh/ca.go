// ca.go: the primitives of an SSH certificate authority: an Ed25519 CA
// key made from a seed, signing OpenSSH user and host certificates, and
// reading and checking them again. Who may get a certificate, and what goes in it,
// is not for this file to say (package identity decides).

package ssh

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// CASeedSize is the size of a CA key's seed: an Ed25519 private key seed.
const CASeedSize = ed25519.SeedSize

// ErrBadCertificate means a certificate is malformed, of the wrong kind,
// or not signed by the key it names.
var ErrBadCertificate = errors.New("bad SSH certificate")

// CA is an SSH certificate authority: an Ed25519 key that signs user and
// host certificates. The type is part of what it signs, and OpenSSH checks
// it both ways (sshd takes only user certificates from TrustedUserCAKeys,
// ssh only host certificates from @cert-authority lines), so one key can
// sign both. It is safe for concurrent use.
type CA struct {
	signer ssh.Signer
	rand   io.Reader
}

// NewCA returns the CA whose Ed25519 key has the 32-byte seed.
func NewCA(seed []byte) (*CA, error) {
	if len(seed) != CASeedSize {
		return nil, fmt.Errorf("ssh: new CA: seed of %d bytes, want %d", len(seed), CASeedSize)
	}
	s, err := ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		return nil, fmt.Errorf("ssh: new CA: %w", err)
	}
	return &CA{signer: s, rand: rand.Reader}, nil
}

// PublicKey returns the CA's public key.
func (c *CA) PublicKey() ssh.PublicKey { return c.signer.PublicKey() }

// UserCertificate is what a user certificate says.
type UserCertificate struct {
	// Key is the certified key's wire-form blob (not a certificate).
	Key []byte
	// Serial is the certificate's serial number, unique for the CA.
	Serial uint64
	// KeyID names the certificate in sshd's logs.
	KeyID string
	// Principals are the user names the certificate is valid for; at
	// least one (a certificate without any is valid for every user).
	Principals []string
	// ValidAfter and ValidBefore bound when the certificate is valid.
	ValidAfter, ValidBefore time.Time
	// CriticalOptions and Extensions are the certificate's options
	// ("force-command", "source-address") and extensions ("permit-pty").
	CriticalOptions, Extensions map[string]string
}

// SignUser signs a user certificate and returns its wire form (the bytes
// an authorized_keys-style "-cert.pub" line carries in base64).
func (c *CA) SignUser(u UserCertificate) ([]byte, error) {
	return c.sign(ssh.UserCert, u)
}

// HostCertificate is what a host certificate says: Key, Serial, KeyID
// and validity as in a user certificate, and as Principals the host
// names it is valid for (at least one). A host certificate carries no
// options or extensions.
type HostCertificate struct {
	Key                     []byte
	Serial                  uint64
	KeyID                   string
	Principals              []string
	ValidAfter, ValidBefore time.Time
}

// SignHost signs a host certificate (sshd_config's HostCertificate) and
// returns its wire form.
func (c *CA) SignHost(h HostCertificate) ([]byte, error) {
	return c.sign(ssh.HostCert, UserCertificate{Key: h.Key, Serial: h.Serial, KeyID: h.KeyID,
		Principals: h.Principals, ValidAfter: h.ValidAfter, ValidBefore: h.ValidBefore})
}

// sign signs a certificate of the type (ssh.UserCert or ssh.HostCert).
func (c *CA) sign(certType uint32, u UserCertificate) ([]byte, error) {
	key, err := ssh.ParsePublicKey(u.Key)
	if err != nil {
		return nil, fmt.Errorf("ssh: sign certificate: key: %w: %v", ErrMalformedKey, err)
	}
	if _, ok := key.(*ssh.Certificate); ok {
		return nil, fmt.Errorf("ssh: sign certificate: the key is a certificate itself")
	}
	if len(u.Principals) == 0 {
		return nil, fmt.Errorf("ssh: sign certificate: no principals (a certificate without any is valid for every %s)", certKind(certType))
	}
	for _, p := range u.Principals {
		if p == "" || strings.ContainsAny(p, ", \t\r\n") {
			return nil, fmt.Errorf("ssh: sign certificate: principal %q is not one plain name", p)
		}
	}
	if !u.ValidBefore.After(u.ValidAfter) {
		return nil, fmt.Errorf("ssh: sign certificate: valid before %s is not after valid after %s", u.ValidBefore, u.ValidAfter)
	}
	cert := &ssh.Certificate{
		Key:             key,
		Serial:          u.Serial,
		CertType:        certType,
		KeyId:           u.KeyID,
		ValidPrincipals: append([]string(nil), u.Principals...),
		ValidAfter:      certSeconds(u.ValidAfter),
		ValidBefore:     certSeconds(u.ValidBefore),
		Permissions: ssh.Permissions{
			CriticalOptions: copyMap(u.CriticalOptions),
			Extensions:      copyMap(u.Extensions),
		},
	}
	if err := cert.SignCert(c.rand, c.signer); err != nil {
		return nil, fmt.Errorf("ssh: sign certificate: %w", err)
	}
	return cert.Marshal(), nil
}

// certKind names a certificate type's principals.
func certKind(certType uint32) string {
	if certType == ssh.HostCert {
		return "host"
	}
	return "user"
}

func certSeconds(t time.Time) uint64 {
	if t.Unix() < 0 {
		return 0
	}
	return uint64(t.Unix())
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ParseUserCertificate reads a user certificate's wire form and checks
// that its CA's signature over it verifies (ParseCertificate), refusing a
// host certificate.
func ParseUserCertificate(blob []byte) (*ssh.Certificate, error) {
	cert, err := ParseCertificate(blob)
	if err == nil && cert.CertType != ssh.UserCert {
		return nil, fmt.Errorf("%w: a host certificate, not a user certificate", ErrBadCertificate)
	}
	return cert, err
}

// ParseHostCertificate is ParseUserCertificate for host certificates.
func ParseHostCertificate(blob []byte) (*ssh.Certificate, error) {
	cert, err := ParseCertificate(blob)
	if err == nil && cert.CertType != ssh.HostCert {
		return nil, fmt.Errorf("%w: a user certificate, not a host certificate", ErrBadCertificate)
	}
	return cert, err
}

// ParseCertificate reads a user or host certificate's wire form and
// checks that its CA's signature over it verifies. It does not check who
// the CA is, nor when the certificate is valid: that is the caller's to
// decide.
func ParseCertificate(blob []byte) (*ssh.Certificate, error) {
	pub, err := ssh.ParsePublicKey(blob)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCertificate, err)
	}
	cert, ok := pub.(*ssh.Certificate)
	if !ok {
		return nil, fmt.Errorf("%w: a plain %s key, not a certificate", ErrBadCertificate, pub.Type())
	}
	if cert.CertType != ssh.UserCert && cert.CertType != ssh.HostCert {
		return nil, fmt.Errorf("%w: unknown certificate type %d", ErrBadCertificate, cert.CertType)
	}
	if cert.SignatureKey == nil || cert.Signature == nil {
		return nil, fmt.Errorf("%w: unsigned", ErrBadCertificate)
	}
	if _, isCert := cert.SignatureKey.(*ssh.Certificate); isCert {
		return nil, fmt.Errorf("%w: signed by a certificate", ErrBadCertificate)
	}
	// The signed bytes are the certificate's encoding without its last
	// field, the signature.
	all := cert.Marshal()
	sig := ssh.Marshal(cert.Signature)
	signed := all[:len(all)-4-len(sig)]
	if err := cert.SignatureKey.Verify(signed, cert.Signature); err != nil {
		return nil, fmt.Errorf("%w: the CA's signature does not verify: %v", ErrBadCertificate, err)
	}
	return cert, nil
}

// CertificateValidity returns when a certificate is valid, as times.
func CertificateValidity(c *ssh.Certificate) (after, before time.Time) {
	return certTime(c.ValidAfter), certTime(c.ValidBefore)
}

// SameKey reports whether a and b are the same public key.
func SameKey(a, b ssh.PublicKey) bool {
	return a != nil && b != nil && bytes.Equal(a.Marshal(), b.Marshal())
}

// ParseCAKey reads a CA key file: the 32-byte seed, or an unencrypted
// Ed25519 private key as ssh-keygen writes it (OpenSSH format).
func ParseCAKey(data []byte) (*CA, error) {
	if len(data) == CASeedSize {
		return NewCA(data)
	}
	k, err := ssh.ParseRawPrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("ssh: CA key: neither %d random bytes nor an unencrypted OpenSSH private key: %w", CASeedSize, err)
	}
	switch pk := k.(type) {
	case *ed25519.PrivateKey:
		return NewCA(pk.Seed())
	case ed25519.PrivateKey:
		return NewCA(pk.Seed())
	}
	return nil, fmt.Errorf("ssh: CA key: a %T, not an Ed25519 key", k)
}
