// proof.go: answers that carry their proof. A lookup that serves linked
// keys (/users/{handle}.keys, .gpg and .json, /hosts/{name}.known_hosts
// and .json) answers ?proof=1 with a proof bundle (package
// identity/proof): the very answer, the records that justify each key it
// serves, and each record's C2SP tlog-proof against one signed
// checkpoint.

package api

import (
	"bytes"
	"errors"
	"net/http"
	"strings"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/proof"
	"github.com/kith-keyserver/kith/identity/tlog"
)

// ProofBundle is the answer of a lookup asked with ?proof=1.
type ProofBundle = proof.Bundle

// ProvenKey is one served factor and the records that justify it.
type ProvenKey = proof.Key

// ProvenRecord is one record and its inclusion proof.
type ProvenRecord = proof.Record

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
	old, err := proof.ParseOld(r.URL.Query().Get("old"))
	if err != nil {
		return identity.RefuseErr(identity.CodeBadRequest, err, "bad old")
	}
	var keys []proof.Justified
	for _, f := range served {
		keys = append(keys, proof.Justified{Factor: f, Records: a.Justification(f, recs)})
	}
	text := !strings.HasPrefix(c.ctype, "application/octet-stream")
	b, err := proof.Build(r.Context(), h.tree, h.svc.Log, c.body, c.ctype, text, keys, old)
	if errors.Is(err, tlog.ErrNoCheckpoint) {
		// A new log, before its first checkpoint (seconds): nothing to
		// prove against yet.
		w.Header().Set("Retry-After", "2")
		http.Error(w, "no checkpoint signed yet", http.StatusServiceUnavailable)
		return nil
	}
	if err != nil {
		return err
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

// provenFactors returns the factors of kind (any kind but addresses when
// empty) that are proven for the identity a assesses. Addresses are left
// out of an identity document's bundle: the records that prove one
// commit to it, and the document's bundle opens no commitment (VKS and
// WKD answers by address prove the keys verified for it).
func provenFactors(a *identity.Assessment, kind identity.FactorKind) []identity.Factor {
	var out []identity.Factor
	for _, st := range a.Factors {
		if st.Level == identity.LevelProven && (kind == "" && st.Factor.Kind != identity.KindEmail || st.Factor.Kind == kind) {
			out = append(out, st.Factor)
		}
	}
	return out
}
