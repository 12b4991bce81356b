// Package logjson is the JSON form of the evidence log's records (what
// GET /api/v1/log serves), shared by every frontend that serves records
// and by the clients that re-verify them.
//
// What it does not own: the records and their canonical encoding
// (identity), their verification (identity/verify).
package logjson

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/armor"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/pgp"
)

// LogPage is the answer of GET /api/v1/log.
type LogPage struct {
	Records []LogRecord `json:"records"`
	// Next is the URL of the next page, empty on the last one.
	Next string `json:"next,omitempty"`
}

// LogRecord is one evidence record with every byte needed to re-verify it.
// Byte strings are base64 (standard, padded), hashes hex.
type LogRecord struct {
	Seq     int64       `json:"seq"`
	Method  string      `json:"method"`
	Purpose string      `json:"purpose,omitempty"`
	Handle  string      `json:"handle,omitempty"`
	From    JSONFactor  `json:"from"`
	To      *JSONFactor `json:"to,omitempty"`
	Label   string      `json:"label,omitempty"`
	// Statement and Signature are the signed bytes and the signature (or
	// token), verbatim.
	Statement []byte `json:"statement"`
	Signature []byte `json:"signature"`
	// SignerKey is the signer's key blob for an SSH signer;
	// SignerKeyArmored is the OpenPGP signer's key: as the store held it
	// in records made before keys were private artifacts, and without its
	// user IDs (the whole key being an artifact the record commits to) in
	// later ones.
	SignerKey        []byte     `json:"signer_key,omitempty"`
	SignerKeyArmored string     `json:"signer_key_armored,omitempty"`
	Created          time.Time  `json:"created"`
	Expires          *time.Time `json:"expires,omitempty"`
	Revokes          int64      `json:"revokes,omitempty"`
	// Consent is the salt a consent login's nonce commits with (see
	// identity.ConsentNonce); absent in other records.
	Consent []byte `json:"consent,omitempty"`
	// Commitments are the salted hashes of the record's private
	// artifacts (an ID token, an email address, a user ID and its
	// self-signature, a statement naming an address, the whole OpenPGP
	// key), which the record's hash covers in their place; Erased says
	// the server no longer holds some of those artifacts (the identity or
	// the key was deleted, or an operator blocked it), and is not covered
	// by the hash.
	Commitments []JSONCommitment `json:"commitments,omitempty"`
	Erased      bool             `json:"artifacts_erased,omitempty"`
	PrevHash    string           `json:"prev_hash"`
	Hash        string           `json:"hash"`
}

// JSONCommitment is a commitment to a private artifact; Hash is hex.
type JSONCommitment struct {
	Kind string `json:"kind"`
	Hash string `json:"hash"`
}

// JSONFactor is a factor in JSON.
type JSONFactor struct {
	Kind  string `json:"kind"`
	Value string `json:"value"`
	// Data is the SSH key blob.
	Data []byte `json:"data,omitempty"`
}

func jsonFactor(f identity.Factor) JSONFactor {
	return JSONFactor{Kind: string(f.Kind), Value: f.Value, Data: f.Data}
}

func (j JSONFactor) factor() identity.Factor {
	return identity.Factor{Kind: identity.FactorKind(j.Kind), Value: j.Value, Data: j.Data}
}

// NewLogRecord returns the JSON form of e.
func NewLogRecord(e *identity.Evidence) (LogRecord, error) {
	r := LogRecord{
		Seq: e.Seq, Method: string(e.Method), Purpose: string(e.Purpose), Handle: string(e.Handle),
		From: jsonFactor(e.From), Label: e.Label,
		Statement: nonNil(e.Statement), Signature: nonNil(e.Signature),
		Created: e.Created.UTC(), Revokes: e.Revokes, Consent: e.Consent, Erased: e.Erased,
		PrevHash: hex.EncodeToString(e.PrevHash), Hash: hex.EncodeToString(e.Hash),
	}
	for _, c := range e.Commitments {
		r.Commitments = append(r.Commitments, JSONCommitment{Kind: string(c.Kind), Hash: hex.EncodeToString(c.Hash)})
	}
	if !e.To.IsZero() {
		to := jsonFactor(e.To)
		r.To = &to
	}
	if !e.Expires.IsZero() {
		t := e.Expires.UTC()
		r.Expires = &t
	}
	if e.From.Kind == identity.KindPGP && len(e.SignerKey) > 0 {
		k, err := pgp.ParseKey(e.SignerKey)
		if err != nil {
			return r, fmt.Errorf("logjson: record %d: signer key: %w", e.Seq, err)
		}
		var b bytes.Buffer
		if err := pgp.WriteArmored(&b, k); err != nil {
			return r, fmt.Errorf("logjson: record %d: %w", e.Seq, err)
		}
		// The armor must give back the very bytes the hash covers.
		if !bytes.Equal(k.Bytes(), e.SignerKey) {
			return r, fmt.Errorf("logjson: record %d: signer key is not in canonical form", e.Seq)
		}
		r.SignerKeyArmored = b.String()
	} else {
		r.SignerKey = e.SignerKey
	}
	return r, nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Evidence returns the record as identity.Evidence, the form its hash and
// signatures are checked in.
func (r LogRecord) Evidence() (*identity.Evidence, error) {
	e := &identity.Evidence{
		Seq: r.Seq, Method: identity.Method(r.Method), Purpose: identity.Purpose(r.Purpose),
		Handle: identity.Handle(r.Handle), From: r.From.factor(), Label: r.Label,
		Statement: r.Statement, Signature: r.Signature, SignerKey: r.SignerKey,
		Created: r.Created.UTC(), Revokes: r.Revokes, Consent: r.Consent, Erased: r.Erased,
	}
	for _, c := range r.Commitments {
		h, err := hex.DecodeString(c.Hash)
		if err != nil {
			return nil, fmt.Errorf("commitment %s: %w", c.Kind, err)
		}
		e.Commitments = append(e.Commitments, identity.Commitment{Kind: identity.ArtifactKind(c.Kind), Hash: h})
	}
	if r.To != nil {
		e.To = r.To.factor()
	}
	if r.Expires != nil {
		e.Expires = r.Expires.UTC()
	}
	if r.SignerKeyArmored != "" {
		blk, err := armor.Decode(bytes.NewReader([]byte(r.SignerKeyArmored)))
		if err != nil {
			return nil, fmt.Errorf("signer key armor: %w", err)
		}
		if e.SignerKey, err = io.ReadAll(blk.Body); err != nil {
			return nil, fmt.Errorf("signer key armor: %w", err)
		}
	}
	var err error
	if e.PrevHash, err = hex.DecodeString(r.PrevHash); err != nil {
		return nil, fmt.Errorf("prev_hash: %w", err)
	}
	if e.Hash, err = hex.DecodeString(r.Hash); err != nil {
		return nil, fmt.Errorf("hash: %w", err)
	}
	return e, nil
}
