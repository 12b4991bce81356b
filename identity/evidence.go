// evidence.go: evidence records, the append-only log that says how each
// factor came to be linked, and their canonical, hash-chained encoding.

package identity

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Method says how an evidence record links its ends.
type Method string

// The methods of evidence.
const (
	// MethodPGPUIDSelfSig: an OpenPGP key's self-signed user ID names an
	// email address. A claim by the key's holder, never proof of the
	// mailbox. Statement: the user ID packet; Signature: the
	// self-certification packet; SignerKey: the key.
	MethodPGPUIDSelfSig Method = "pgp.uid-selfsig"
	// MethodPGPAuthSubkey: the SSH key is an authentication subkey of the
	// OpenPGP key, bound by the key's binding signature. Statement: the
	// subkey packet; Signature: the binding signature packet; SignerKey:
	// the key.
	MethodPGPAuthSubkey Method = "pgp.auth-subkey"
	// MethodPGPAuthSubkeySigned: as MethodPGPAuthSubkey, and the binding
	// embeds a signature by the subkey itself (a primary-key binding
	// signature): the SSH key's holder made the binding too, so it proves
	// possession. Statement, Signature and SignerKey as for
	// MethodPGPAuthSubkey.
	MethodPGPAuthSubkeySigned Method = "pgp.auth-subkey-signed"
	// MethodPGPChallenge: the holder of the OpenPGP key signed a challenge
	// statement (cleartext or detached signature).
	MethodPGPChallenge Method = "pgp.challenge"
	// MethodSSHChallenge: the holder of the SSH key signed a challenge
	// statement with `ssh-keygen -Y sign -n kith` (SSHSIG).
	MethodSSHChallenge Method = "ssh.challenge"
	// MethodOIDCLogin: the account authenticated at its provider; the
	// signature is the ID token.
	MethodOIDCLogin Method = "oidc.login"
	// MethodOIDCEmailVerified: the provider asserted the email address in
	// an ID token.
	MethodOIDCEmailVerified Method = "oidc.email-verified"
	// MethodPGPCertification: a third-party key certified a user ID.
	MethodPGPCertification Method = "pgp.certification"
	// MethodRevocation: the link to the To factor (or, without one, the
	// record named by Revokes) no longer holds. Signed by a factor proven
	// for the identity, or, for links a key carries itself, issued by the
	// server when the key stopped carrying them.
	MethodRevocation Method = "revocation"
	// MethodOIDCKeySet: a provider signing key Kith fetched from the
	// provider's JWK set and verified a login with, recorded before the
	// first record whose ID token it verifies, so that verify-log checks
	// tokens only against keys the log published earlier (which anyone
	// can compare with what the provider published). From: the provider
	// (KindOIDCProvider, its issuer); Statement: what was fetched, when;
	// SignerKey: the JWK, exactly as the provider published it. The
	// server's word, checkable against the provider, not a proof.
	MethodOIDCKeySet Method = "oidc.jwks"
)

// KeyCarried reports whether m is a link an OpenPGP key carries itself
// (recorded without an identity, from the key's own packets).
func (m Method) KeyCarried() bool {
	return m == MethodPGPAuthSubkey || m == MethodPGPAuthSubkeySigned || m == MethodPGPUIDSelfSig
}

// Purpose is what a signed statement asks for.
type Purpose string

// The purposes of challenges and the records they produce.
const (
	// PurposeClaim: take a handle, with the signing factor as its first.
	PurposeClaim Purpose = "claim"
	// PurposeAdd: link another factor to an identity.
	PurposeAdd Purpose = "add"
	// PurposeRevoke: unlink a factor from an identity.
	PurposeRevoke Purpose = "revoke"
	// PurposeDelete: end an identity at its holder's request. The
	// statement names the account that approves it; each revocation the
	// deletion writes keeps it (Service.DeleteWithSession).
	PurposeDelete Purpose = "delete"
	// PurposeDeleteKey: the holder of an OpenPGP key asks the server to
	// replace it by its tombstone (Service.DeleteKey). It names no handle
	// and appends no evidence.
	PurposeDeleteKey Purpose = "delete-key"
	// PurposeLogin: open a session on the pages with a proven key. A
	// login writes no record: it proves possession to this server only.
	PurposeLogin Purpose = "login"
)

// Valid reports whether p is one of the purposes.
func (p Purpose) Valid() bool {
	return p == PurposeClaim || p == PurposeAdd || p == PurposeRevoke || p == PurposeLogin || p == PurposeCertificate || p == PurposeDelete
}

// Evidence is one record of the evidence log. A record links From to To
// (factor to factor) or, with To zero, From to the identity named by
// Handle. Records are never changed: a later record with Method
// MethodRevocation undoes a link.
//
// Which records an identity's factors are proven by is for the assurance
// rules (Assess) to say; a record itself is only what was shown, kept so
// that anyone can re-verify it.
type Evidence struct {
	// Seq is the record's position in the log, from 1, without gaps.
	Seq int64
	// Method says how the ends are linked.
	Method Method
	// Purpose is the statement's purpose for challenge records and
	// revocations, empty for links a key carries itself.
	Purpose Purpose
	// Handle names the identity the record concerns; empty for links
	// that hold whoever holds the key (pgp.auth-subkey, pgp.uid-selfsig).
	Handle Handle
	// From is the factor that signed or asserted.
	From Factor
	// To is the other factor, or zero when the record links From to the
	// identity.
	To Factor
	// Label is a short, displayable note: the comment served after an SSH
	// key line (for an auth subkey, what gpg --export-ssh-key writes).
	Label string
	// Statement and Signature are the exact bytes that were signed and
	// the signature (or token), verbatim.
	Statement []byte
	Signature []byte
	// SignerKey is From's public key material when the record was made:
	// the SSH key blob, or the OpenPGP transferable public key (binary)
	// as the store held it.
	SignerKey []byte
	// Created is when the record was appended; Expires, when not zero,
	// when its link stops holding.
	Created time.Time
	Expires time.Time
	// Revokes, in a revocation, is the Seq of the record it revokes.
	Revokes int64
	// Consent, in a record whose ID token authorises its statement (a
	// login made to approve it), is the random value the token's nonce
	// commits with: the nonce is ConsentNonce(Statement, Consent), so the
	// provider's signature covers the statement. Empty in every other
	// record.
	Consent []byte
	// Commitments are the salted hashes of the record's private
	// artifacts (an ID token, a provider-verified email), which its hash
	// covers in their place: see Public.
	Commitments []Commitment
	// Artifacts are the private artifacts themselves, never hashed and
	// never in the public log; nil when read from it, or once erased.
	Artifacts []Artifact
	// Erased, in a record read from the log, says the store no longer
	// holds its artifacts (its identity was deleted): the server's word,
	// outside the hash.
	Erased bool
	// privateToken: the Service is to keep the record's ID token out of
	// its public entry when it appends it.
	privateToken bool
	// subject, for a record carrying the ID token of a pseudonymous
	// account, is its subject's artifact, which the record commits to.
	subject *Artifact
	// PrevHash is the Hash of record Seq-1 (ZeroHash for record 1), and
	// Hash is the SHA-256 of this record's canonical encoding, which
	// covers PrevHash.
	PrevHash []byte
	Hash     []byte
}

// HashSize is the size of a record hash.
const HashSize = sha256.Size

// ZeroHash is the PrevHash of the log's first record.
var zeroHash [HashSize]byte

// ZeroHash returns the PrevHash of the log's first record: 32 zero bytes.
func ZeroHash() []byte { return bytes.Clone(zeroHash[:]) }

// encodingMagic starts every canonical encoding; the version changes if the
// field list ever does. Version 1 is the encoding of every record without
// a Consent or Commitments; version 2 adds them.
const (
	encodingMagic   = "kith evidence v1\x00"
	encodingMagicV2 = "kith evidence v2\x00"
)

// CanonicalBytes returns the record's canonical encoding, the bytes its
// Hash is computed over: the magic "kith evidence v1" and a NUL, then every
// field but Hash, Consent, Commitments and Artifacts in declaration order,
// integers as 8-byte big-endian (times as Unix microseconds, zero meaning
// none) and strings and byte strings as a 4-byte big-endian length and
// the bytes. A record with a Consent or Commitments starts with "kith
// evidence v2" and a NUL instead and ends, after PrevHash, with Consent as
// a byte string, the number of Commitments as 4 bytes big-endian, and each
// commitment's kind and hash as strings. It encodes the public form
// (Public): a committed ID token as an empty Signature, a committed
// email as an empty To value and data. So the records made before there
// were consents or commitments keep their encoding, and erasing an
// artifact changes no hash.
func (e *Evidence) CanonicalBytes() []byte {
	p := e.Public()
	v2 := len(p.Consent) > 0 || len(p.Commitments) > 0
	var b []byte
	if v2 {
		b = append(b, encodingMagicV2...)
	} else {
		b = append(b, encodingMagic...)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(p.Seq))
	str := func(s []byte) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	str([]byte(p.Method))
	str([]byte(p.Purpose))
	str([]byte(p.Handle))
	for _, f := range []Factor{p.From, p.To} {
		str([]byte(f.Kind))
		str([]byte(f.Value))
		str(f.Data)
	}
	str([]byte(p.Label))
	str(p.Statement)
	str(p.Signature)
	str(p.SignerKey)
	b = binary.BigEndian.AppendUint64(b, uint64(micros(p.Created)))
	b = binary.BigEndian.AppendUint64(b, uint64(micros(p.Expires)))
	b = binary.BigEndian.AppendUint64(b, uint64(p.Revokes))
	str(p.PrevHash)
	if v2 {
		str(p.Consent)
		b = binary.BigEndian.AppendUint32(b, uint32(len(p.Commitments)))
		for _, c := range p.Commitments {
			str([]byte(c.Kind))
			str(c.Hash)
		}
	}
	return b
}

// ComputeHash returns the SHA-256 of the record's canonical encoding.
func (e *Evidence) ComputeHash() []byte {
	h := sha256.Sum256(e.CanonicalBytes())
	return h[:]
}

// Seal sets the record's place in the log: its Seq after prev's, its
// PrevHash, and its Hash. prevSeq is 0 and prevHash nil for the first
// record. Times are cut to microseconds, the precision the store keeps.
func (e *Evidence) Seal(prevSeq int64, prevHash []byte) {
	e.Seq = prevSeq + 1
	if prevHash == nil {
		prevHash = ZeroHash()
	}
	e.PrevHash = bytes.Clone(prevHash)
	e.Created = TruncateTime(e.Created)
	e.Expires = TruncateTime(e.Expires)
	e.Hash = e.ComputeHash()
}

// TruncateTime returns t in UTC cut to whole microseconds (the zero time
// stays zero).
func TruncateTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.UnixMicro(t.UnixMicro()).UTC()
}

func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// ErrChainBroken means the log's hash chain does not hold.
var ErrChainBroken = errors.New("evidence chain broken")

// ChainError names the first record at which a chain check failed.
type ChainError struct {
	Seq    int64
	Reason string
}

// Error returns the record and the reason.
func (e *ChainError) Error() string {
	return fmt.Sprintf("record %d: %s", e.Seq, e.Reason)
}

// Unwrap returns ErrChainBroken.
func (e *ChainError) Unwrap() error { return ErrChainBroken }

// CheckLink checks that e follows the record with prevSeq and prevHash
// (0 and nil for the first record) and that its Hash is its own. It does
// not check signatures.
func CheckLink(e *Evidence, prevSeq int64, prevHash []byte) error {
	if prevHash == nil {
		prevHash = zeroHash[:]
	}
	if e.Seq != prevSeq+1 {
		return &ChainError{Seq: e.Seq, Reason: fmt.Sprintf("sequence number %d follows %d", e.Seq, prevSeq)}
	}
	if !bytes.Equal(e.PrevHash, prevHash) {
		return &ChainError{Seq: e.Seq, Reason: fmt.Sprintf("previous hash %x is not record %d's hash %x", e.PrevHash, prevSeq, prevHash)}
	}
	if got := e.ComputeHash(); !bytes.Equal(got, e.Hash) {
		return &ChainError{Seq: e.Seq, Reason: fmt.Sprintf("content hashes to %x, record says %x", got, e.Hash)}
	}
	return nil
}
