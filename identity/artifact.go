// artifact.go: private artifacts. A provider-verified email address and
// a raw ID token (which carries the account's email, name and whatever
// else the provider put in it) are kept outside the hashed, public entry:
// the entry holds a salted commitment to each, the store keeps the
// artifact and its salt beside the log, readable by the owner only, and
// erasing them (deleting the identity) leaves the log verifiable.

package identity

import (
	"bytes"
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
	// ArtifactEmail is a provider-verified email address: the value of
	// the record's To factor, empty in the public entry.
	ArtifactEmail ArtifactKind = "email"
)

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
// artifacts left out (an empty Signature for a committed ID token, an
// email factor without its value for a committed email) and no
// Artifacts. Its canonical encoding, and so its hash, is the record's.
func (e *Evidence) Public() Evidence {
	p := *e
	p.Artifacts = nil
	if e.Committed(ArtifactIDToken) {
		p.Signature = nil
	}
	if e.Committed(ArtifactEmail) {
		p.To = Factor{Kind: KindEmail}
	}
	return p
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
		case ArtifactIDToken:
			e.Signature = bytes.Clone(a.Value)
		case ArtifactEmail:
			e.To = EmailFactor(string(a.Value))
		}
	}
	e.Artifacts = append(e.Artifacts, arts...)
	return nil
}

// makePrivate moves the record's ID token (and, with email, its To
// factor's address) into Artifacts, each with a fresh salt from r, and
// commits to them. The full record keeps both in place, for the store.
func (e *Evidence) makePrivate(r io.Reader, email bool) error {
	add := func(k ArtifactKind, v []byte) error {
		salt := make([]byte, ArtifactSaltSize)
		if _, err := io.ReadFull(r, salt); err != nil {
			return fmt.Errorf("identity: artifact salt: %w", err)
		}
		a := Artifact{Kind: k, Salt: salt, Value: bytes.Clone(v)}
		e.Artifacts = append(e.Artifacts, a)
		e.Commitments = append(e.Commitments, a.Commit())
		return nil
	}
	if len(e.Signature) > 0 {
		if err := add(ArtifactIDToken, e.Signature); err != nil {
			return err
		}
	}
	if email {
		return add(ArtifactEmail, []byte(e.To.Value))
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
// h, for its owner (the caller checks who asks).
func (s *Service) IdentityArtifacts(ctx context.Context, h Handle) ([]RecordArtifacts, error) {
	out, err := s.store.IdentityArtifacts(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("identity: artifacts of %s: %w", h, err)
	}
	return out, nil
}
