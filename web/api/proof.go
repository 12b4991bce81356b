// proof.go: answers that carry their proof. A lookup that serves linked
// keys (/users/{handle}.keys, .gpg and .json, /hosts/{name}.known_hosts
// and .json) answers ?proof=1 with a ProofBundle: the very answer, the
// records that justify each key it serves, and each record's C2SP
// tlog-proof against one signed checkpoint; so that a client checks the
// answer with a few kilobytes instead of walking the log.

package api

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/tlog"
)

// ProofBundle is the answer of a lookup asked with ?proof=1.
//
// It shows that each key in Keys is linked to the identity by records
// that are in the log the checkpoint signs. It does not show that no
// other key is linked, nor that a later record has not revoked one of
// these: only the whole log shows that (kith verify-log, kith monitor).
type ProofBundle struct {
	// Answer is the body of the same lookup without proof=1, byte for
	// byte; ContentType is its media type.
	Answer      string `json:"answer"`
	ContentType string `json:"content_type"`
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
	Keys []ProvenKey `json:"keys"`
	// Records are the records Keys name, each with its inclusion proof.
	Records []ProvenRecord `json:"records"`
}

// ProvenKey is one served factor and the records that justify it.
type ProvenKey struct {
	Kind  string `json:"kind"`
	Value string `json:"value"`
	// Records are the Seqs of the records, in log order.
	Records []int64 `json:"records"`
}

// ProvenRecord is one record and its inclusion proof.
type ProvenRecord struct {
	Record LogRecord `json:"record"`
	// Proof is the record's C2SP tlog-proof (entry index Seq-1) against
	// the bundle's checkpoint; empty when the record is newer than the
	// checkpoint (the next one, at most a checkpoint interval later,
	// covers it).
	Proof string `json:"proof,omitempty"`
}

// wantsProof reports whether r asks for a proof bundle.
func wantsProof(r *http.Request) bool { return r.URL.Query().Get("proof") == "1" }

// serveProof answers a lookup with its proof bundle: c is the answer as
// served without proof=1, served the factors it serves (proven for the
// identity a assesses, whose records are recs). Bundles are not cached:
// each holds the latest checkpoint, and a consistency proof for the
// asker.
func (h *Handler) serveProof(w http.ResponseWriter, r *http.Request, c cached, a *identity.Assessment, recs []identity.Evidence, served []identity.Factor) error {
	if h.tree == nil {
		return identity.Refuse(identity.CodeBadRequest, "this server has no transparency log to prove answers with")
	}
	if c.status != http.StatusOK {
		w.Header().Set("Content-Type", c.ctype)
		w.WriteHeader(c.status)
		w.Write(c.body)
		return nil
	}
	var old int64
	if s := r.URL.Query().Get("old"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return identity.Refuse(identity.CodeBadRequest, "old=%q is not a tree size", s)
		}
		old = v
	}
	ctx := r.Context()
	p, err := tlog.NewProver(ctx, h.tree)
	if err != nil {
		return err
	}
	b := ProofBundle{Answer: string(c.body), ContentType: c.ctype, Checkpoint: string(p.Checkpoint()),
		Keys: []ProvenKey{}, Records: []ProvenRecord{}}
	if old <= p.Size() {
		hashes, err := p.Consistency(ctx, old)
		if err != nil {
			return err
		}
		for _, hs := range hashes {
			b.Consistency = append(b.Consistency, base64.StdEncoding.EncodeToString(hs[:]))
		}
	}
	included := map[int64]bool{}
	for _, f := range served {
		seqs := a.Justification(f, recs)
		b.Keys = append(b.Keys, ProvenKey{Kind: string(f.Kind), Value: f.Value, Records: seqs})
		for _, seq := range seqs {
			if included[seq] {
				continue
			}
			included[seq] = true
			// The lookup's records are without their signed bytes: the
			// log's are whole.
			full, err := h.svc.Log(ctx, seq-1, 1)
			if err != nil {
				return err
			}
			if len(full) != 1 || full[0].Seq != seq {
				return fmt.Errorf("api: proof: record %d not in the log", seq)
			}
			lr, err := NewLogRecord(&full[0])
			if err != nil {
				return err
			}
			pr := ProvenRecord{Record: lr}
			if seq <= p.Size() {
				proof, err := p.Inclusion(ctx, seq-1)
				if err != nil {
					return err
				}
				pr.Proof = string(proof.Marshal())
			}
			b.Records = append(b.Records, pr)
		}
	}
	var out bytes.Buffer
	if err := jsonIndent(&out, b); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(out.Bytes())
	return nil
}

// provenFactors returns the factors of kind (any kind when empty) that
// are proven for the identity a assesses.
func provenFactors(a *identity.Assessment, kind identity.FactorKind) []identity.Factor {
	var out []identity.Factor
	for _, st := range a.Factors {
		if st.Level == identity.LevelProven && (kind == "" || st.Factor.Kind == kind) {
			out = append(out, st.Factor)
		}
	}
	return out
}
