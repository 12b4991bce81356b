// factor.go: the things an identity can be linked to and prove.

package identity

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// FactorKind says what a factor is.
type FactorKind string

// The kinds of factor.
const (
	// KindPGP is an OpenPGP primary key; its value is the fingerprint in
	// upper-case hex (40 digits for v4 keys, 64 for v6).
	KindPGP FactorKind = "pgp"
	// KindSSH is an SSH public key; its value is the SHA256 fingerprint as
	// OpenSSH prints it ("SHA256:" and unpadded base64) and its data the
	// key's wire-form blob.
	KindSSH FactorKind = "ssh"
	// KindOIDC is an OpenID Connect account; its value is the issuer URL,
	// one space, and the subject.
	KindOIDC FactorKind = "oidc"
	// KindEmail is an email address; its value is the address, lower-cased.
	KindEmail FactorKind = "email"
	// KindOIDCProvider is an OpenID provider; its value is the issuer URL.
	// It is never linked to an identity: it signs oidc.jwks records' keys.
	KindOIDCProvider FactorKind = "oidc-provider"
)

// ErrBadFactor means a factor's value does not fit its kind.
var ErrBadFactor = errors.New("invalid factor")

// Factor is something that can be linked to an identity and, except for an
// email address, proven. Two factors are the same when Kind and Value are
// equal; Data is what verifying a proof needs besides the value.
type Factor struct {
	Kind  FactorKind
	Value string
	// Data is the SSH key blob for KindSSH, empty otherwise.
	Data []byte
}

// PGPFactor returns the factor of the OpenPGP primary key with fingerprint
// fp.
func PGPFactor(fp []byte) Factor {
	return Factor{Kind: KindPGP, Value: strings.ToUpper(hex.EncodeToString(fp))}
}

// ParsePGPFingerprint parses a fingerprint written in hex, with or without
// spaces and a "0x" prefix, into the factor's value form.
func ParsePGPFingerprint(s string) (Factor, error) {
	t := strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), " ", ""))
	t = strings.TrimPrefix(t, "0X")
	b, err := hex.DecodeString(t)
	if err != nil || (len(b) != 20 && len(b) != 32) {
		return Factor{}, fmt.Errorf("%w: %q is not an OpenPGP v4 or v6 fingerprint (40 or 64 hex digits)", ErrBadFactor, clip(s))
	}
	return PGPFactor(b), nil
}

// SSHFactor returns the factor of an SSH key given its OpenSSH SHA256
// fingerprint and wire-form blob.
func SSHFactor(fingerprint string, blob []byte) Factor {
	return Factor{Kind: KindSSH, Value: fingerprint, Data: blob}
}

// OIDCFactor returns the factor of an OpenID Connect account.
func OIDCFactor(issuer, subject string) Factor {
	return Factor{Kind: KindOIDC, Value: issuer + " " + subject}
}

// pseudonymPrefix starts the subject part of a pseudonymous account's
// factor value.
const pseudonymPrefix = "~"

// PseudonymousOIDCFactor returns the factor an OpenID Connect account is
// recorded under when its subject is kept private: the issuer, a space,
// "~" and the base64url commitment to the subject with salt
// (SubjectArtifact). One account has one salt, so every record names it
// alike, and nobody without the salt can tell whose it is, even for a
// provider whose subjects are addresses or directory names.
func PseudonymousOIDCFactor(issuer string, salt []byte, subject string) Factor {
	c := SubjectArtifact(salt, subject).Commit()
	return OIDCFactor(issuer, pseudonymPrefix+base64.RawURLEncoding.EncodeToString(c.Hash))
}

// Pseudonymous reports whether f is an OpenID Connect account recorded
// under a pseudonym (PseudonymousOIDCFactor).
func (f Factor) Pseudonymous() bool {
	_, sub, _ := strings.Cut(f.Value, " ")
	return f.Kind == KindOIDC && strings.HasPrefix(sub, pseudonymPrefix)
}

// EmailFactor returns the factor of an email address (lower-cased).
func EmailFactor(addr string) Factor {
	return Factor{Kind: KindEmail, Value: strings.ToLower(strings.TrimSpace(addr))}
}

// Provable reports whether possession of the factor can be proven by a
// signature or a login (every kind but email: a self-signed user ID only
// claims an address, and an address is proven by a followed mail link,
// see Service.ConfirmEmail, not by signing a statement).
func (f Factor) Provable() bool {
	return f.Kind == KindPGP || f.Kind == KindSSH || f.Kind == KindOIDC
}

// Same reports whether f and g are the same factor.
func (f Factor) Same(g Factor) bool { return f.Kind == g.Kind && f.Value == g.Value }

// String returns "kind value", the form statements and logs use.
func (f Factor) String() string { return string(f.Kind) + " " + f.Value }

// IsZero reports whether f is no factor.
func (f Factor) IsZero() bool { return f.Kind == "" && f.Value == "" }

// Validate checks that the factor's value has its kind's form.
func (f Factor) Validate() error {
	switch f.Kind {
	case KindPGP:
		g, err := ParsePGPFingerprint(f.Value)
		if err != nil || g.Value != f.Value {
			return fmt.Errorf("%w: pgp factor %q is not an upper-case hex fingerprint", ErrBadFactor, clip(f.Value))
		}
	case KindSSH:
		if !strings.HasPrefix(f.Value, "SHA256:") || len(f.Value) != len("SHA256:")+43 {
			return fmt.Errorf("%w: ssh factor %q is not a SHA256 fingerprint", ErrBadFactor, clip(f.Value))
		}
		if len(f.Data) == 0 {
			return fmt.Errorf("%w: ssh factor %s without its key", ErrBadFactor, f.Value)
		}
	case KindOIDC:
		iss, sub, ok := strings.Cut(f.Value, " ")
		if !ok || iss == "" || sub == "" {
			return fmt.Errorf("%w: oidc factor %q is not \"issuer subject\"", ErrBadFactor, clip(f.Value))
		}
	case KindOIDCProvider:
		if f.Value == "" || strings.ContainsAny(f.Value, " \n") {
			return fmt.Errorf("%w: oidc-provider factor %q is not an issuer URL", ErrBadFactor, clip(f.Value))
		}
	case KindEmail:
		if at := strings.LastIndexByte(f.Value, '@'); at <= 0 || at == len(f.Value)-1 || f.Value != strings.ToLower(f.Value) {
			return fmt.Errorf("%w: email factor %q is not a lower-case address", ErrBadFactor, clip(f.Value))
		}
	default:
		return fmt.Errorf("%w: unknown kind %q", ErrBadFactor, clip(string(f.Kind)))
	}
	return nil
}
