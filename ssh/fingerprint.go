// fingerprint.go: SHA256 key fingerprints as OpenSSH prints them, and parsing them back.

package ssh

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
)

// ErrMalformedFingerprint means a string is not a SHA256 fingerprint as OpenSSH prints it.
var ErrMalformedFingerprint = errors.New("malformed fingerprint")

// fingerprintPrefix starts every fingerprint OpenSSH prints by default (ssh-keygen -l,
// ssh -v, sshd logs).
const fingerprintPrefix = "SHA256:"

// Fingerprint is the SHA-256 digest of an SSH public key's wire form, the identifier
// Kith stores for an SSH factor. Its String form is OpenSSH's: "SHA256:" and the
// digest in unpadded standard base64 (43 characters).
type Fingerprint [sha256.Size]byte

// FingerprintOf returns pub's fingerprint as OpenSSH computes it. For a certificate it
// is the fingerprint of the certified key (ssh-keygen -l prints that, and the person
// holds that key), not of the certificate blob. A nil key has the zero Fingerprint.
func FingerprintOf(pub ssh.PublicKey) Fingerprint {
	if pub == nil {
		return Fingerprint{}
	}
	return sha256.Sum256(underlying(pub).Marshal())
}

// String returns the fingerprint as OpenSSH prints it, e.g.
// "SHA256:YO/eqJwPOj6gFtT0QxNMSupHMRCcMpojgID+ob9c+ho".
func (f Fingerprint) String() string {
	return fingerprintPrefix + base64.RawStdEncoding.EncodeToString(f[:])
}

// IsZero reports whether f is the zero Fingerprint (no key).
func (f Fingerprint) IsZero() bool {
	return f == Fingerprint{}
}

// MarshalText returns f.String(), so fingerprints encode as text in JSON and TOML.
func (f Fingerprint) MarshalText() ([]byte, error) {
	return []byte(f.String()), nil
}

// UnmarshalText parses text as ParseFingerprint does.
func (f *Fingerprint) UnmarshalText(text []byte) error {
	v, err := ParseFingerprint(string(text))
	if err != nil {
		return err
	}
	*f = v
	return nil
}

// ParseFingerprint parses a fingerprint in the form OpenSSH prints, "SHA256:" followed
// by 43 characters of unpadded standard base64. It is strict, so that one key has one
// spelling: the prefix must be exactly "SHA256:", there is no padding, and the unused
// low bits of the last character must be zero. Surrounding blanks are trimmed.
// Legacy MD5 fingerprints ("MD5:aa:bb:...") are refused.
func ParseFingerprint(s string) (Fingerprint, error) {
	var f Fingerprint
	s = strings.TrimSpace(s)
	rest, ok := strings.CutPrefix(s, fingerprintPrefix)
	if !ok {
		return f, fmt.Errorf("ssh: parse fingerprint %q: %w: want the %q form", truncate(s, 80), ErrMalformedFingerprint, fingerprintPrefix)
	}
	want := base64.RawStdEncoding.EncodedLen(len(f))
	if len(rest) != want {
		return f, fmt.Errorf("ssh: parse fingerprint %q: %w: %d base64 characters, want %d", truncate(s, 80), ErrMalformedFingerprint, len(rest), want)
	}
	n, err := base64.RawStdEncoding.Strict().Decode(f[:], []byte(rest))
	if err != nil || n != len(f) {
		return Fingerprint{}, fmt.Errorf("ssh: parse fingerprint %q: %w: not canonical unpadded base64", s, ErrMalformedFingerprint)
	}
	return f, nil
}

// FingerprintLine returns the line `ssh-keygen -l -f` prints for k: bits, fingerprint,
// comment (or "no comment") and the type in parentheses, e.g.
// "256 SHA256:YO/e... alice@host (ED25519)". The comment is sanitised. It returns ""
// for a Key without a public key.
func FingerprintLine(k *Key) string {
	if k == nil || k.Public == nil {
		return ""
	}
	comment := SanitizeComment(k.Comment)
	if comment == "" {
		comment = "no comment"
	}
	return fmt.Sprintf("%d %s %s (%s)", keyBits(k.Public), k.Fingerprint(), comment, keyLabel(k.Public))
}

// truncate shortens s to at most n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
