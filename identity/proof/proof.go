// Package proof makes the proof bundles that lookups answer ?proof=1
// with: the very answer, the records that justify each key it serves,
// and each record's C2SP tlog-proof against one signed checkpoint, so
// that a client checks an answer with a few kilobytes instead of walking
// the log. Every frontend that serves linked keys (web/api's /users and
// /hosts lookups, VKS by-email, WKD) builds its bundle here.
//
// A bundle shows that each key it lists is linked by records that are in
// the log the checkpoint signs. It does not show that no other key is
// linked, nor that a later record has not revoked one of these: only the
// whole log shows that.
//
// What it does not own: which records justify a key (identity's
// Assessment.Justification, or the frontend's own rule), the proofs
// (identity/tlog), the records' JSON (identity/logjson), checking a
// bundle (web/api/client).
package proof

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/logjson"
	"github.com/kith-keyserver/kith/identity/tlog"
)

// Bundle is the answer of a lookup asked with ?proof=1.
type Bundle struct {
	// Answer is the body of the same lookup without proof=1, byte for
	// byte (base64 in AnswerBase64 when it is not text, as WKD's binary
	// keys); ContentType is its media type.
	Answer       string `json:"answer,omitempty"`
	AnswerBase64 []byte `json:"answer_base64,omitempty"`
	ContentType  string `json:"content_type"`
	// Checkpoint is the signed checkpoint (a C2SP signed note, with the
	// witnesses' cosignatures it has) that every proof is against.
	Checkpoint string `json:"checkpoint"`
	// Consistency, when the request named old=N, is the RFC 6962
	// consistency proof (base64 hashes) from the tree of N entries to
	// the checkpoint's.
	Consistency []string `json:"consistency,omitempty"`
	// Keys are the keys (and, in an identity document, every other
	// proven factor) the answer serves, each with the records that
	// justify it.
	Keys []Key `json:"keys"`
	// Records are the records Keys name, each with its inclusion proof.
	Records []Record `json:"records"`
}

// Key is one served factor and the records that justify it.
type Key struct {
	Kind  string `json:"kind"`
	Value string `json:"value"`
	// Address, in an answer by address (VKS, WKD), is the address the
	// key is served for.
	Address string `json:"address,omitempty"`
	// Records are the Seqs of the records, in log order.
	Records []int64 `json:"records"`
}

// Record is one record and its inclusion proof.
type Record struct {
	Record logjson.LogRecord `json:"record"`
	// Artifacts open commitments of the record that the answer already
	// discloses (the address an answer by address was asked for), so
	// that the client can check what the record commits to.
	Artifacts []identity.Artifact `json:"artifacts,omitempty"`
	// Proof is the record's C2SP tlog-proof (entry index Seq-1) against
	// the bundle's checkpoint; empty when the record is newer than the
	// checkpoint (the next one, at most a checkpoint interval later,
	// covers it).
	Proof string `json:"proof,omitempty"`
}

// Justified is a served factor and what justifies it.
type Justified struct {
	Factor identity.Factor
	// Address, for an answer by address, is the address.
	Address string
	// Records are the justifying records' Seqs.
	Records []int64
	// Open are artifacts to disclose with a record, by Seq.
	Open map[int64][]identity.Artifact
}

// Log reads records from the evidence log (identity.Service.Log): the
// records after seq after, at most limit, whole.
type Log func(ctx context.Context, after int64, limit int) ([]identity.Evidence, error)

// Build returns the bundle of an answer (body, of media type ctype) that
// serves keys, against the latest checkpoint tree holds, with the
// consistency proof from the tree of old entries when old > 0 and not
// beyond it. tlog.ErrNoCheckpoint before the first checkpoint.
func Build(ctx context.Context, tree tlog.TreeReader, log Log, body []byte, ctype string, text bool, keys []Justified, old int64) (*Bundle, error) {
	p, err := tlog.NewProver(ctx, tree)
	if err != nil {
		return nil, err
	}
	b := &Bundle{ContentType: ctype, Checkpoint: string(p.Checkpoint()), Keys: []Key{}, Records: []Record{}}
	if text {
		b.Answer = string(body)
	} else {
		b.AnswerBase64 = body
	}
	if old > 0 && old <= p.Size() {
		hashes, err := p.Consistency(ctx, old)
		if err != nil {
			return nil, err
		}
		for _, hs := range hashes {
			b.Consistency = append(b.Consistency, base64.StdEncoding.EncodeToString(hs[:]))
		}
	}
	included := map[int64]int{}
	for _, k := range keys {
		b.Keys = append(b.Keys, Key{Kind: string(k.Factor.Kind), Value: k.Factor.Value, Address: k.Address, Records: k.Records})
		for _, seq := range k.Records {
			if i, ok := included[seq]; ok {
				b.Records[i].Artifacts = append(b.Records[i].Artifacts, k.Open[seq]...)
				continue
			}
			// A lookup's records are without their signed bytes: the
			// log's are whole.
			full, err := log(ctx, seq-1, 1)
			if err != nil {
				return nil, err
			}
			if len(full) != 1 || full[0].Seq != seq {
				return nil, fmt.Errorf("proof: record %d not in the log", seq)
			}
			lr, err := logjson.NewLogRecord(&full[0])
			if err != nil {
				return nil, err
			}
			r := Record{Record: lr, Artifacts: k.Open[seq]}
			if seq <= p.Size() {
				pr, err := p.Inclusion(ctx, seq-1)
				if err != nil {
					return nil, err
				}
				r.Proof = string(pr.Marshal())
			}
			included[seq] = len(b.Records)
			b.Records = append(b.Records, r)
		}
	}
	return b, nil
}

// ParseOld reads the old=N of a proof request: the size of the
// checkpoint the client saw last (0 when s is empty).
func ParseOld(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("old=%q is not a tree size", s)
	}
	return v, nil
}

// Source is what a frontend that answers by address needs to prove its
// answers (identity.Service has Log and EmailVerification).
type Source struct {
	Tree              tlog.TreeReader
	Log               Log
	EmailVerification func(ctx context.Context, key identity.Factor, email string) (int64, identity.Artifact, error)
}

// ByAddress returns the bundle of an answer by the address addr (VKS
// by-email, WKD) serving keys: each key is justified by the email.verified
// record that verifies addr for it, with the artifact that opens the
// record's commitment to addr.
func (s *Source) ByAddress(ctx context.Context, body []byte, ctype string, text bool, keys []identity.Factor, addr string, old int64) (*Bundle, error) {
	var js []Justified
	for _, k := range keys {
		seq, art, err := s.EmailVerification(ctx, k, addr)
		if err != nil {
			return nil, fmt.Errorf("proof: %s for %s: %w", k, addr, err)
		}
		js = append(js, Justified{Factor: k, Address: addr, Records: []int64{seq}, Open: map[int64][]identity.Artifact{seq: {art}}})
	}
	return Build(ctx, s.Tree, s.Log, body, ctype, text, js, old)
}
