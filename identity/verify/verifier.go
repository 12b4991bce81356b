// verifier.go: identity.Verifier over packages ssh, pgp and oidc,
// checking signatures against the keys the store holds.

package verify

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/oidc"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/ssh"
)

// KeyFinder finds stored OpenPGP keys (identity/postgres.Store is one).
type KeyFinder interface {
	FindKeys(ctx context.Context, q keys.Query) ([]keys.Stored, bool, error)
}

// Verifier checks possession proofs for package identity: SSHSIG with
// package ssh, OpenPGP signatures with package pgp against the stored key.
// It reads no clock: the links a key carries are derived at the instant
// the caller (the write that records them) names.
type Verifier struct {
	Keys KeyFinder
}

var _ identity.Verifier = (*Verifier)(nil)

// VerifySSH checks an armored SSHSIG by the key blob over statement in
// namespace "kith".
func (v *Verifier) VerifySSH(ctx context.Context, blob, statement, sig []byte) error {
	pub, err := ssh.ParsePublicKey(blob)
	if err != nil {
		return identity.RefuseErr(identity.CodeBadFactor, err, "bad SSH key")
	}
	return sshRefusal(ssh.VerifySignatureBy(sig, statement, ssh.Namespace, pub))
}

// sshRefusal gives an SSHSIG failure its refusal code.
func sshRefusal(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ssh.ErrWrongNamespace):
		return identity.RefuseErr(identity.CodeWrongNamespace, err, "the SSH signature is not for namespace %q: sign with ssh-keygen -Y sign -n %s", ssh.Namespace, ssh.Namespace)
	case errors.Is(err, ssh.ErrWrongKey):
		return identity.RefuseErr(identity.CodeWrongKey, err, "the SSH signature is by another key")
	}
	return identity.RefuseErr(identity.CodeBadSignature, err, "the SSH signature does not verify")
}

// StoredKey returns the stored key whose primary fingerprint is fp.
func (v *Verifier) StoredKey(ctx context.Context, fingerprint string) (*pgp.Key, error) {
	f, err := identity.ParsePGPFingerprint(fingerprint)
	if err != nil {
		return nil, identity.RefuseErr(identity.CodeBadFactor, err, "bad fingerprint")
	}
	fp, _ := hex.DecodeString(f.Value)
	// By the primary fingerprint alone: anyone may store keys carrying fp
	// as an encryption subkey (it needs no back-signature), and they must
	// not hide the key itself.
	keys, _, err := v.Keys.FindKeys(ctx, keys.Query{Fingerprints: [][]byte{fp}, Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("verify: find key %s: %w", f.Value, err)
	}
	for _, sk := range keys {
		if bytes.Equal(sk.Fingerprint, fp) {
			k, err := pgp.ParseKey(sk.Packets)
			if err != nil {
				return nil, fmt.Errorf("verify: stored key %s: %w", f.Value, err)
			}
			return k, nil
		}
	}
	return nil, identity.ErrNotFound
}

// VerifyPGP checks a cleartext or detached signature over statement by the
// stored key with the fingerprint.
func (v *Verifier) VerifyPGP(ctx context.Context, fingerprint string, statement, sig []byte) ([]byte, error) {
	return v.verifyPGP(ctx, fingerprint, statement, sig, false)
}

// VerifyPGPPrimary is VerifyPGP that accepts only a signature by the
// primary key itself: what a key's holder signs to delete the key.
func (v *Verifier) VerifyPGPPrimary(ctx context.Context, fingerprint string, statement, sig []byte) ([]byte, error) {
	return v.verifyPGP(ctx, fingerprint, statement, sig, true)
}

func (v *Verifier) verifyPGP(ctx context.Context, fingerprint string, statement, sig []byte, primaryOnly bool) ([]byte, error) {
	k, err := v.StoredKey(ctx, fingerprint)
	if errors.Is(err, identity.ErrNotFound) {
		return nil, identity.Refuse(identity.CodeUnknownKey, "no OpenPGP key %s is stored: upload it first", fingerprint)
	}
	if err != nil {
		return nil, err
	}
	signer, err := verifyPGP(k, statement, sig)
	if err != nil {
		return nil, err
	}
	if primaryOnly && signer.Subkey {
		return nil, identity.Refuse(identity.CodeWrongKey,
			"the OpenPGP signature is by subkey %016X; sign with the primary key (gpg --local-user %s!)", signer.KeyID, fingerprint)
	}
	return k.Bytes(), nil
}

// clearsignBegin starts a cleartext-signed message.
var clearsignBegin = []byte("-----BEGIN PGP SIGNED MESSAGE-----")

// verifyPGP checks sig over statement by k: a cleartext-signed copy of
// the statement, or a detached signature.
func verifyPGP(k *pgp.Key, statement, sig []byte) (pgp.Signer, error) {
	if bytes.HasPrefix(bytes.TrimLeft(sig, " \t\r\n"), clearsignBegin) {
		text, signer, err := pgp.VerifyCleartext(k, sig)
		if err != nil {
			return signer, pgpRefusal(err)
		}
		if !identity.SameStatement(text, statement) {
			return signer, identity.Refuse(identity.CodeStatementChanged, "the cleartext-signed text is not the statement")
		}
		return signer, nil
	}
	signer, err := pgp.VerifyDetached(k, statement, sig)
	return signer, pgpRefusal(err)
}

func pgpRefusal(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgp.ErrUnknownSigner):
		return identity.RefuseErr(identity.CodeWrongKey, err, "the OpenPGP signature is not by this key")
	}
	return identity.RefuseErr(identity.CodeBadSignature, err, "the OpenPGP signature does not verify")
}

// PGPKeyLinks returns the stored key and the links it carries at the
// instant at: authentication subkeys valid then as SSH keys, and the
// emails of self-signed user IDs valid then. A key with no valid
// self-signature then (a deleted key's tombstone, its user IDs gone)
// carries none.
func (v *Verifier) PGPKeyLinks(ctx context.Context, fingerprint string, at time.Time) ([]byte, []identity.KeyLink, error) {
	k, err := v.StoredKey(ctx, fingerprint)
	if err != nil {
		return nil, nil, err
	}
	links, err := keyLinks(k, at)
	if errors.Is(err, pgp.ErrNoSelfSignature) {
		return k.Bytes(), nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return k.Bytes(), links, nil
}

// JWKThumbprint returns the RFC 7638 thumbprint of a provider's signing
// JWK (oidc.JWKThumbprint).
func (v *Verifier) JWKThumbprint(jwk []byte) (string, error) {
	return oidc.JWKThumbprint(jwk)
}

// PublicPGPKey returns the key without its user IDs and user attributes:
// what a record shows of the OpenPGP key it carries.
func (v *Verifier) PublicPGPKey(key []byte) ([]byte, error) {
	return PublicKey(key)
}

// PublicKey returns an OpenPGP key (binary transferable public key)
// without its user IDs and user attributes (pgp.Key.WithoutUserIDs).
func PublicKey(key []byte) ([]byte, error) {
	k, err := pgp.ParseKey(key)
	if err != nil {
		return nil, fmt.Errorf("verify: public key: %w", err)
	}
	return k.WithoutUserIDs().Bytes(), nil
}

// policyAt is the policy the links a key carries are read with at the
// instant now: the default one, with now as its clock, so that the
// signatures it keeps are those it kept at the record's own time.
func policyAt(now time.Time) pgp.Policy {
	p := pgp.DefaultPolicy()
	p.Now = func() time.Time { return now }
	return p
}

// keyLinks lists the links the whole key k carries at time now:
// everything it reads, expiry and the policy's clock alike, is taken at
// now.
func keyLinks(k *pgp.Key, now time.Time) ([]identity.KeyLink, error) {
	return linksAt(k, now, true)
}

// linksAt is keyLinks for a whole key, or, with whole false, for a key's
// public part (pgp.Key.WithoutUserIDs), which carries only its auth
// subkeys' links, each expiring with the subkey (the primary key's own
// expiry is stated in the user IDs' self-signatures).
func linksAt(k *pgp.Key, now time.Time, whole bool) ([]identity.KeyLink, error) {
	p := policyAt(now)
	p.AllowNoSelfSignature = !whole
	applied, _, err := p.Apply(k)
	if err != nil {
		return nil, fmt.Errorf("verify: key links: %w", err)
	}
	d := applied.Describe()
	if d.Revoked || (!d.Expires.IsZero() && !d.Expires.After(now)) {
		return nil, nil
	}
	var links []identity.KeyLink
	for _, sk := range d.Subkeys {
		if !sk.Capabilities.Authenticate || sk.Revoked || (!sk.Expires.IsZero() && !sk.Expires.After(now)) || sk.PublicKey() == nil {
			continue
		}
		pub, err := ssh.FromOpenPGP(sk.PublicKey())
		if err != nil {
			continue // no SSH form (say, an Ed448 subkey): nothing to serve
		}
		stmt, sigs := componentPackets(applied, sk.Packet())
		if len(sigs) == 0 {
			continue
		}
		method := identity.MethodPGPAuthSubkey
		if sk.SignedBySubkey {
			method = identity.MethodPGPAuthSubkeySigned
		}
		links = append(links, identity.KeyLink{
			Method:    method,
			To:        identity.SSHFactor(ssh.FingerprintOf(pub).String(), pub.Marshal()),
			Label:     ssh.OpenPGPComment(sk.PublicKey()),
			Statement: stmt, Signature: sigs, Expires: minExpiry(sk.Expires, d.Expires),
		})
	}
	seen := map[string]bool{}
	for _, u := range d.UserIDs {
		if u.Email == "" || u.Revoked || (!u.Expires.IsZero() && !u.Expires.After(now)) || seen[u.Email] {
			continue
		}
		uid := pgp.Packet{Tag: pgp.TagUserID, Body: []byte(u.Text)}
		stmt, sigs := componentPackets(applied, uid)
		sigs = selfSignatures(sigs, d)
		if len(sigs) == 0 {
			continue
		}
		seen[u.Email] = true
		links = append(links, identity.KeyLink{
			Method: identity.MethodPGPUIDSelfSig, To: identity.EmailFactor(u.Email),
			Statement: stmt, Signature: sigs, Expires: minExpiry(u.Expires, d.Expires),
		})
	}
	return links, nil
}

func minExpiry(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// componentPackets finds the component c in k and returns it framed, and
// the signature packets that follow it, framed and concatenated.
func componentPackets(k *pgp.Key, c pgp.Packet) (component, sigs []byte) {
	ps := k.Packets()
	for i, p := range ps {
		if p.Tag != c.Tag || !bytes.Equal(p.Body, c.Body) {
			continue
		}
		var sp []pgp.Packet
		for _, q := range ps[i+1:] {
			if q.Tag != pgp.TagSignature {
				break
			}
			sp = append(sp, q)
		}
		if len(sp) == 0 {
			return nil, nil
		}
		return pgp.NewKey([]pgp.Packet{p}).Bytes(), pgp.NewKey(sp).Bytes()
	}
	return nil, nil
}

// selfSignatures keeps, of framed signature packets, those issued by the
// primary key itself.
func selfSignatures(framed []byte, d pgp.Description) []byte {
	var out []byte
	for rest := framed; len(rest) > 0; {
		n := framedLen(rest)
		if n <= 0 || n > len(rest) {
			break
		}
		one := rest[:n]
		rest = rest[n:]
		p, err := packet.Read(bytes.NewReader(one))
		if err != nil {
			continue
		}
		sig, ok := p.(*packet.Signature)
		if !ok {
			continue
		}
		self := (sig.IssuerFingerprint != nil && bytes.Equal(sig.IssuerFingerprint, d.Fingerprint)) ||
			(sig.IssuerKeyId != nil && *sig.IssuerKeyId == d.KeyID)
		if self {
			out = append(out, one...)
		}
	}
	return out
}

// framedLen returns the length of the first new-format packet in b
// (header and body), or 0.
func framedLen(b []byte) int {
	if len(b) < 2 || b[0]&0xC0 != 0xC0 {
		return 0
	}
	switch l := int(b[1]); {
	case l < 192:
		return 2 + l
	case l < 224:
		if len(b) < 3 {
			return 0
		}
		return 3 + ((l-192)<<8 + int(b[2]) + 192)
	case l == 255:
		if len(b) < 6 {
			return 0
		}
		return 6 + (int(b[2])<<24 | int(b[3])<<16 | int(b[4])<<8 | int(b[5]))
	}
	return 0
}
