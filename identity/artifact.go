// artifact.go: private artifacts. Whatever a record holds of a person is
// kept outside its hashed, public entry: a provider-verified or mailed
// email address, a raw ID token (which carries the account's email, name
// and whatever else the provider put in it), an OpenPGP key's user IDs
// (the key as stored, and a user ID's packet and self-signature) and a
// statement that names an address. The entry holds a salted commitment
// to each; the store keeps the artifact and its salt beside the log,
// readable by the owner only, and erasing them (deleting the identity or
// the key, an operator's block) leaves the log verifiable.

package identity

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// ArtifactKind names what a private artifact is.
type ArtifactKind string

// The kinds of private artifacts.
const (
	// ArtifactIDToken is a record's ID token: the Signature of the full
	// record, empty in the public entry.
	ArtifactIDToken ArtifactKind = "id_token"
	// ArtifactEmail is an email address (provider-verified, mailed, or
	// a user ID's): the value of the record's To factor, empty in the
	// public entry.
	ArtifactEmail ArtifactKind = "email"
	// ArtifactStatement is a statement that names a person (a user ID
	// packet, an email statement): the record's Statement, empty in the
	// public entry.
	ArtifactStatement ArtifactKind = "statement"
	// ArtifactSignature is a signature over a person's data (a user ID's
	// self-certification): the record's Signature, empty in the public
	// entry.
	ArtifactSignature ArtifactKind = "signature"
	// ArtifactPGPKey is an OpenPGP key as the store held it, user IDs and
	// all. The record's SignerKey, in both forms, is the key without its
	// user IDs (what a third party needs to check the packets that sign a
	// link), and Reveal leaves it so: a checker reads the whole key with
	// Evidence.Artifact.
	ArtifactPGPKey ArtifactKind = "pgp_key"
	// ArtifactSubject is the subject of a pseudonymous OpenID Connect
	// account (PseudonymousOIDCFactor), whose commitment is the account's
	// pseudonym: every record carrying the account's ID token commits to
	// it with the account's one salt.
	ArtifactSubject ArtifactKind = "oidc_subject"
)

// SubjectArtifact is the artifact of an account's subject with its salt.
func SubjectArtifact(salt []byte, subject string) Artifact {
	return Artifact{Kind: ArtifactSubject, Salt: bytes.Clone(salt), Value: []byte(subject)}
}

// ArtifactSaltSize is the size of an artifact's salt.
const ArtifactSaltSize = 32

// Commitment is the salted hash of one private artifact, which a record's
// hash covers.
type Commitment struct {
	Kind ArtifactKind
	Hash []byte
}

// Artifact is a private artifact with the salt its commitment is made
// with: what the owner can hand to anyone to check a record.
type Artifact struct {
	Kind  ArtifactKind `json:"kind"`
	Salt  []byte       `json:"salt"`
	Value []byte       `json:"value"`
}

// artifactDomain separates artifact commitments from every other hash.
const artifactDomain = "kith artifact v1\x00"

// Commit returns the artifact's commitment: SHA-256 over "kith artifact
// v1", a NUL, then the kind, the salt and the value, each as a 4-byte
// big-endian length and the bytes.
func (a Artifact) Commit() Commitment {
	h := sha256.New()
	h.Write([]byte(artifactDomain))
	for _, b := range [][]byte{[]byte(a.Kind), a.Salt, a.Value} {
		h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(b))))
		h.Write(b)
	}
	return Commitment{Kind: a.Kind, Hash: h.Sum(nil)}
}

// Committed reports whether the record keeps an artifact of kind k out
// of its public entry.
func (e *Evidence) Committed(k ArtifactKind) bool {
	return slices.ContainsFunc(e.Commitments, func(c Commitment) bool { return c.Kind == k })
}

// Public returns the record as the public log shows it: the committed
// artifacts left out (an empty Signature for a committed ID token or
// signature, an empty Statement for a committed statement, an email
// factor without its value for a committed email) and no Artifacts. Its
// canonical encoding, and so its hash, is the record's.
func (e *Evidence) Public() Evidence {
	p := *e
	p.Artifacts = nil
	if e.Committed(ArtifactIDToken) || e.Committed(ArtifactSignature) {
		p.Signature = nil
	}
	if e.Committed(ArtifactStatement) {
		p.Statement = nil
	}
	if e.Committed(ArtifactEmail) {
		p.To = Factor{Kind: KindEmail}
	}
	return p
}

// Artifact returns the value of the record's artifact of kind k, when
// the record holds it (a full record, or a public one after Reveal).
func (e *Evidence) Artifact(k ArtifactKind) ([]byte, bool) {
	i := slices.IndexFunc(e.Artifacts, func(a Artifact) bool { return a.Kind == k })
	if i < 0 {
		return nil, false
	}
	return e.Artifacts[i].Value, true
}

// Revealed reports whether the record holds every artifact it commits
// to: a full record, or a public one whose artifacts were all revealed.
func (e *Evidence) Revealed() bool {
	for _, c := range e.Commitments {
		if _, ok := e.Artifact(c.Kind); !ok {
			return false
		}
	}
	return true
}

// ErrArtifactMismatch means an artifact does not open the record's
// commitment.
var ErrArtifactMismatch = errors.New("the artifact does not match the record's commitment")

// Reveal puts the artifacts back into a public record (the ID token into
// Signature, the email into To) after checking each against the record's
// commitment of its kind.
func (e *Evidence) Reveal(arts []Artifact) error {
	for _, a := range arts {
		i := slices.IndexFunc(e.Commitments, func(c Commitment) bool { return c.Kind == a.Kind })
		if i < 0 {
			return fmt.Errorf("record %d: %w: it commits to no %s", e.Seq, ErrArtifactMismatch, a.Kind)
		}
		if !bytes.Equal(a.Commit().Hash, e.Commitments[i].Hash) {
			return fmt.Errorf("record %d: %s: %w", e.Seq, a.Kind, ErrArtifactMismatch)
		}
		switch a.Kind {
		case ArtifactIDToken, ArtifactSignature:
			e.Signature = bytes.Clone(a.Value)
		case ArtifactStatement:
			e.Statement = bytes.Clone(a.Value)
		case ArtifactEmail:
			e.To = EmailFactor(string(a.Value))
		}
	}
	e.Artifacts = append(e.Artifacts, arts...)
	return nil
}

// commitArtifact commits the record to a, salt and all (an account's
// subject, whose salt is the account's own), unless it commits to an
// artifact of a's kind already.
func (e *Evidence) commitArtifact(a Artifact) {
	if e.Committed(a.Kind) {
		return
	}
	e.Artifacts = append(e.Artifacts, a)
	e.Commitments = append(e.Commitments, a.Commit())
}

// commit keeps value, an artifact of kind k, out of the record's public
// entry: it becomes one of Artifacts, with a fresh salt from r, and the
// record commits to it. The full record keeps the value in its field
// too, for the store; Public leaves it out. A record commits to each kind
// once.
func (e *Evidence) commit(r io.Reader, k ArtifactKind, value []byte) error {
	if e.Committed(k) {
		return nil
	}
	salt := make([]byte, ArtifactSaltSize)
	if _, err := io.ReadFull(r, salt); err != nil {
		return fmt.Errorf("identity: artifact salt: %w", err)
	}
	a := Artifact{Kind: k, Salt: salt, Value: bytes.Clone(value)}
	e.Artifacts = append(e.Artifacts, a)
	e.Commitments = append(e.Commitments, a.Commit())
	return nil
}

// makePrivate moves the record's ID token (and, with email, its To
// factor's address) into Artifacts, each with a fresh salt from r, and
// commits to them. The full record keeps both in place, for the store.
func (e *Evidence) makePrivate(r io.Reader, email bool) error {
	if len(e.Signature) > 0 {
		if err := e.commit(r, ArtifactIDToken, e.Signature); err != nil {
			return err
		}
	}
	if email {
		return e.commit(r, ArtifactEmail, []byte(e.To.Value))
	}
	return nil
}

// keepPersonalPrivate keeps out of a record's public entry what it holds of a
// person, as artifacts it commits to (see Evidence.commit), before it is
// appended: an email address it links (To), the statement and signature
// of a user ID's self-signature link, the statement of an email.verified
// record (which names the address), and an OpenPGP signer key's user IDs:
// SignerKey becomes publicKey(SignerKey), the key without them, and the
// whole key an ArtifactPGPKey. A record whose ID token is private commits
// to it too. Every record the Service appends passes through it.
func (e *Evidence) keepPersonalPrivate(r io.Reader, publicKey func([]byte) ([]byte, error)) error {
	if e.subject != nil {
		// The ID token names the subject: it is private whatever else it
		// holds.
		e.privateToken = true
		e.commitArtifact(*e.subject)
	}
	if e.privateToken {
		if err := e.makePrivate(r, false); err != nil {
			return err
		}
	}
	if e.To.Kind == KindEmail && e.To.Value != "" {
		if err := e.commit(r, ArtifactEmail, []byte(e.To.Value)); err != nil {
			return err
		}
	}
	switch e.Method {
	case MethodPGPUIDSelfSig:
		if err := e.commit(r, ArtifactStatement, e.Statement); err != nil {
			return err
		}
		if err := e.commit(r, ArtifactSignature, e.Signature); err != nil {
			return err
		}
	case MethodEmailVerified:
		if err := e.commit(r, ArtifactStatement, e.Statement); err != nil {
			return err
		}
	}
	if e.From.Kind == KindPGP && len(e.SignerKey) > 0 && !e.Committed(ArtifactPGPKey) {
		pub, err := publicKey(e.SignerKey)
		if err != nil {
			return fmt.Errorf("identity: public part of key %s: %w", e.From.Value, err)
		}
		if err := e.commit(r, ArtifactPGPKey, e.SignerKey); err != nil {
			return err
		}
		e.SignerKey = pub
	}
	return nil
}

// RecordArtifacts are the private artifacts of one record. In JSON (what
// the account page hands its owner and `kith verify-log --artifacts`
// reads), byte strings are base64.
type RecordArtifacts struct {
	Seq       int64      `json:"seq"`
	Artifacts []Artifact `json:"artifacts"`
}

// IdentityArtifacts returns the private artifacts of the records naming
// h and of the records about the OpenPGP keys proven for h (the links
// they carry, their email records), in log order, for its owner (the
// caller checks who asks).
func (s *Service) IdentityArtifacts(ctx context.Context, h Handle) ([]RecordArtifacts, error) {
	out, err := s.store.IdentityArtifacts(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("identity: artifacts of %s: %w", h, err)
	}
	_, recs, err := s.store.IdentityRecords(ctx, h)
	if errors.Is(err, ErrNotFound) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("identity: artifacts of %s: %w", h, err)
	}
	a := Assess(h, recs, s.now())
	var keys []Factor
	for _, e := range recs {
		for _, f := range []Factor{e.From, e.To} {
			if f.Kind == KindPGP && !slices.ContainsFunc(keys, f.Same) && a.Proven(f) {
				keys = append(keys, f)
			}
		}
	}
	for _, k := range keys {
		ka, err := s.store.KeyArtifacts(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("identity: artifacts of %s: %w", h, err)
		}
		out = append(out, ka...)
	}
	slices.SortFunc(out, func(a, b RecordArtifacts) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}
