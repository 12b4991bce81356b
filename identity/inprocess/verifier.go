// verifier.go: a fake identity.Verifier for tests, with fake signatures
// that it checks as strictly as the real one checks real ones.

package inprocess

import (
	"bytes"
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kith-keyserver/kith/identity"
)

// The fake verifier implements the identity verifier.
var _ identity.Verifier = (*Verifier)(nil)

// Verifier is a fake identity.Verifier, for tests only: it verifies the
// fake signatures SignSSH and SignPGP make, never real ones. It is honest
// about them: a signature over another statement is refused with
// bad_signature, one by another key with wrong_key, an SSH one in another
// namespace with wrong_namespace, and a PGP one for a key it does not
// hold with unknown_key, so that tests of refusals mean something. The
// OpenPGP keys and the links they carry are set with SetPGPKey, and the
// logins it accepts with AddLogin. It is safe for concurrent use.
type Verifier struct {
	mu     sync.Mutex
	keys   map[string]pgpKey
	logins map[string]identity.Login // by ID token
}

type pgpKey struct {
	key   []byte
	links []identity.KeyLink
}

// NewVerifier returns a Verifier that holds no keys and accepts no
// logins.
func NewVerifier() *Verifier {
	return &Verifier{keys: map[string]pgpKey{}, logins: map[string]identity.Login{}}
}

// SetPGPKey stores (or replaces) the OpenPGP key with the fingerprint
// (upper-case hex): key is what VerifyPGP and PGPKeyLinks return as its
// bytes, links what PGPKeyLinks says it carries.
func (v *Verifier) SetPGPKey(fingerprint string, key []byte, links []identity.KeyLink) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.keys[fingerprint] = pgpKey{key: bytes.Clone(key), links: slices.Clone(links)}
}

// DeletePGPKey forgets the OpenPGP key with the fingerprint.
func (v *Verifier) DeletePGPKey(fingerprint string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.keys, fingerprint)
}

// AddLogin makes VerifyLogin accept logins with l's ID token, for l's
// account and (if set) l's email.
func (v *Verifier) AddLogin(l identity.Login) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.logins[l.IDToken] = l
}

const (
	sshMagic = "fake-sshsig\n"
	pgpMagic = "fake-pgpsig\n"
)

// SignSSH returns the fake SSH signature by the key with wire-form blob
// over statement in Kith's namespace, which Verifier.VerifySSH accepts.
func SignSSH(blob, statement []byte) []byte {
	return SignSSHNamespace("kith", blob, statement)
}

// SignSSHNamespace is SignSSH in another namespace than Kith's.
func SignSSHNamespace(namespace string, blob, statement []byte) []byte {
	return []byte(sshMagic + "namespace: " + namespace + "\nkey: " +
		base64.StdEncoding.EncodeToString(blob) + "\n\n" + string(statement))
}

// SignPGP returns the fake OpenPGP signature by the key with the
// fingerprint over statement, which Verifier.VerifyPGP accepts.
func SignPGP(fingerprint string, statement []byte) []byte {
	return []byte(pgpMagic + "key: " + fingerprint + "\n\n" + string(statement))
}

// parseSig splits a fake signature into its header fields and the signed
// statement.
func parseSig(magic string, sig []byte) (map[string]string, []byte, bool) {
	rest, ok := bytes.CutPrefix(sig, []byte(magic))
	if !ok {
		return nil, nil, false
	}
	head, body, ok := bytes.Cut(rest, []byte("\n\n"))
	if !ok {
		return nil, nil, false
	}
	fields := map[string]string{}
	for _, l := range strings.Split(string(head), "\n") {
		k, val, ok := strings.Cut(l, ": ")
		if !ok {
			return nil, nil, false
		}
		fields[k] = val
	}
	return fields, body, true
}

// VerifySSH checks a fake SSH signature (SignSSH): bad_signature if sig
// is not one or signs another statement, wrong_namespace if it is not in
// Kith's namespace, wrong_key if another key made it.
func (v *Verifier) VerifySSH(ctx context.Context, blob, statement, sig []byte) error {
	fields, body, ok := parseSig(sshMagic, sig)
	if !ok || !bytes.Equal(body, statement) {
		return identity.Refuse(identity.CodeBadSignature, "not a signature of the statement")
	}
	if fields["namespace"] != "kith" {
		return identity.Refuse(identity.CodeWrongNamespace, "signature for namespace %q, not \"kith\"", fields["namespace"])
	}
	key, err := base64.StdEncoding.DecodeString(fields["key"])
	if err != nil {
		return identity.Refuse(identity.CodeBadSignature, "not a signature of the statement")
	}
	if !bytes.Equal(key, blob) {
		return identity.Refuse(identity.CodeWrongKey, "signed by another SSH key")
	}
	return nil
}

// VerifyPGP checks a fake OpenPGP signature (SignPGP): unknown_key if
// the key is not stored, bad_signature if sig is not one or signs another
// statement, wrong_key if another key made it. It returns the stored
// key's bytes.
func (v *Verifier) VerifyPGP(ctx context.Context, fingerprint string, statement, sig []byte) ([]byte, error) {
	v.mu.Lock()
	k, ok := v.keys[fingerprint]
	v.mu.Unlock()
	if !ok {
		return nil, identity.Refuse(identity.CodeUnknownKey, "no OpenPGP key %s is stored", fingerprint)
	}
	fields, body, ok := parseSig(pgpMagic, sig)
	if !ok || !bytes.Equal(body, statement) {
		return nil, identity.Refuse(identity.CodeBadSignature, "not a signature of the statement")
	}
	if fields["key"] != fingerprint {
		return nil, identity.Refuse(identity.CodeWrongKey, "signed by another OpenPGP key")
	}
	return bytes.Clone(k.key), nil
}

// VerifyPGPPrimary is VerifyPGP: fake signatures have no subkeys.
func (v *Verifier) VerifyPGPPrimary(ctx context.Context, fingerprint string, statement, sig []byte) ([]byte, error) {
	return v.VerifyPGP(ctx, fingerprint, statement, sig)
}

// PGPKeyLinks returns the stored key and those of the links SetPGPKey
// gave it that have not expired at at; identity.ErrNotFound if it is not
// stored.
func (v *Verifier) PGPKeyLinks(ctx context.Context, fingerprint string, at time.Time) ([]byte, []identity.KeyLink, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	k, ok := v.keys[fingerprint]
	if !ok {
		return nil, nil, identity.ErrNotFound
	}
	var links []identity.KeyLink
	for _, l := range k.links {
		if l.Expires.IsZero() || l.Expires.After(at) {
			links = append(links, l)
		}
	}
	return bytes.Clone(k.key), links, nil
}

// JWKThumbprint names a fake JWK by its bytes with the white space
// taken out, so that one key written twice is one key, as a real
// thumbprint would have it.
func (v *Verifier) JWKThumbprint(jwk []byte) (string, error) {
	return strings.Join(strings.Fields(string(jwk)), ""), nil
}

// PublicPGPKey returns key unchanged: a fake key has no user IDs.
func (v *Verifier) PublicPGPKey(key []byte) ([]byte, error) {
	return bytes.Clone(key), nil
}

// VerifyLogin accepts a login whose ID token AddLogin registered, for the
// same account and, when the login names an email, the same email, and,
// when it names a nonce, the nonce the registered login named, and the
// claim values it names; it refuses any other with bad_signature.
func (v *Verifier) VerifyLogin(ctx context.Context, l identity.Login) error {
	v.mu.Lock()
	known, ok := v.logins[l.IDToken]
	v.mu.Unlock()
	if !ok || l.IDToken == "" || !known.Account.Same(l.Account) || !l.Email.IsZero() && !known.Email.Same(l.Email) ||
		l.Nonce != "" && known.Nonce != l.Nonce {
		return identity.Refuse(identity.CodeBadSignature, "the ID token does not verify")
	}
	for name, want := range l.Claims {
		if !slices.Equal(known.Claims[name], want) {
			return identity.Refuse(identity.CodeBadSignature, "the ID token's claim %s is not %q", name, want)
		}
	}
	return nil
}
