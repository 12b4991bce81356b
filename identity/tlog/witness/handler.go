// handler.go: the witness's HTTP face: POST <prefix>/add-checkpoint,
// and GET <prefix>/<origin hash>/checkpoint for monitors.

package witness

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/sumdb/note"
	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/identity/tlog/policy"
)

// Prefix is where Kith serves the witness API: its submission and its
// monitoring prefix are PUBLIC_URL/witness.
const Prefix = "/witness"

// maxRequest bounds an add-checkpoint body: an old size line, at most
// 63 proof lines and a checkpoint with a few signatures fit in far less.
const maxRequest = 64 << 10

// maxProofLines is the longest consistency proof a client may send.
const maxProofLines = 63

// Cosigned is what a witness remembers of a log: the last checkpoint it
// cosigned.
type Cosigned struct {
	// Size and Root are the checkpoint's tree.
	Size int64
	Root xtlog.Hash
	// Checkpoint is the checkpoint with the witness's cosignature; nil
	// before the first.
	Checkpoint []byte
}

// Store keeps the last checkpoint cosigned per origin
// (identity/postgres.Store is one).
type Store interface {
	// UpdateCosigned calls fn with what was last cosigned for origin
	// (size 0 and the empty tree's root when nothing was), holding a
	// lock on it until fn returns, and stores what fn returns when its
	// error is nil; so a check against the stored size and the update
	// are atomic across every node sharing the store.
	UpdateCosigned(ctx context.Context, origin string, fn func(last Cosigned) (Cosigned, error)) error
	// LastCosigned returns what was last cosigned for origin; a
	// Checkpoint of nil when nothing was.
	LastCosigned(ctx context.Context, origin string) (Cosigned, error)
}

// EmptyRoot is the root hash of the empty tree (RFC 6962: SHA-256 of
// nothing).
var EmptyRoot = xtlog.Hash(sha256.Sum256(nil))

// Handler serves the witness API for the logs of a policy.
type Handler struct {
	policy   *policy.Policy
	signer   *tlog.Cosigner
	store    Store
	log      *slog.Logger
	requests *prometheus.CounterVec
}

// HandlerOptions configures a Handler.
type HandlerOptions struct {
	// Logger gets refusals and failures; nil discards them.
	Logger *slog.Logger
	// Registerer gets the metrics; nil records none.
	Registerer prometheus.Registerer
}

// NewHandler returns a witness that cosigns, with signer, checkpoints of
// the logs p lists (its witnesses and quorum play no part), keeping its
// state in store.
func NewHandler(p *policy.Policy, signer *tlog.Cosigner, store Store, opts HandlerOptions) *Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{policy: p, signer: signer, store: store, log: opts.Logger}
	if opts.Registerer != nil {
		h.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kith_witness_requests_total",
			Help: "add-checkpoint requests to this witness by log origin (\"unknown\" for a log not in witness.policy) and outcome (cosigned, conflict, unknown_log, forbidden, bad_request, inconsistent, error); inconsistent means a log showed a fork or a rewrite.",
		}, []string{"origin", "outcome"})
		opts.Registerer.MustRegister(h.requests)
	}
	return h
}

// count records a request's outcome.
func (h *Handler) count(origin, outcome string) {
	if h.requests == nil {
		return
	}
	if _, ok := h.policy.Log(origin); !ok {
		origin = "unknown"
	}
	h.requests.WithLabelValues(origin, outcome).Inc()
}

// outcomes names the refusals' statuses for the metrics.
var outcomes = map[int]string{
	http.StatusBadRequest:          "bad_request",
	http.StatusNotFound:            "unknown_log",
	http.StatusForbidden:           "forbidden",
	http.StatusConflict:            "conflict",
	http.StatusUnprocessableEntity: "inconsistent",
}

// Register adds the witness's routes under Prefix to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST "+Prefix+"/add-checkpoint", h.addCheckpoint)
	mux.HandleFunc("GET "+Prefix+"/{origin}/checkpoint", h.checkpoint)
}

// requestError is an add-checkpoint refusal with its HTTP status.
type requestError struct {
	status int
	msg    string
	// known is the size last cosigned, for 409.
	known int64
	// outcome names the refusal in the metrics when its status alone
	// does not (a 409 for a fork is "inconsistent", not "conflict").
	outcome string
}

func (e *requestError) Error() string { return e.msg }

// maxQuoted bounds what a refusal quotes of a request: refusals are
// logged, and a stranger's 64 KiB line must not become a log line.
const maxQuoted = 128

// clip is b cut to maxQuoted bytes, for a refusal's message.
func clip(b []byte) []byte {
	if len(b) > maxQuoted {
		return b[:maxQuoted]
	}
	return b
}

func refuse(status int, format string, args ...any) *requestError {
	return &requestError{status: status, msg: fmt.Sprintf(format, args...)}
}

func (h *Handler) addCheckpoint(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequest))
	if err != nil {
		http.Error(w, "request too large or unreadable", http.StatusBadRequest)
		return
	}
	sigs, err := h.AddCheckpoint(r.Context(), body)
	var origin string
	if _, signed, ok := bytes.Cut(body, []byte("\n\n")); ok {
		o, _, _ := bytes.Cut(signed, []byte("\n"))
		origin = string(o)
	}
	var re *requestError
	switch {
	case errors.As(err, &re) && re.outcome != "":
		h.count(origin, re.outcome)
	case errors.As(err, &re):
		h.count(origin, outcomes[re.status])
	case err != nil:
		h.count(origin, "error")
	default:
		h.count(origin, "cosigned")
	}
	switch {
	case errors.As(err, &re) && re.status == http.StatusConflict:
		w.Header().Set("Content-Type", "text/x.tlog.size")
		w.WriteHeader(http.StatusConflict)
		fmt.Fprintf(w, "%d\n", re.known)
		return
	case errors.As(err, &re):
		h.log.Info("witness: refused a checkpoint", "status", re.status, "reason", re.msg)
		http.Error(w, re.msg, re.status)
		return
	case err != nil:
		if r.Context().Err() == nil {
			h.log.Error("witness: add-checkpoint", "err", err)
		}
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write(sigs)
}

// AddCheckpoint handles an add-checkpoint request body and returns the
// cosignature lines; a refusal is an error whose status the handler
// answers.
func (h *Handler) AddCheckpoint(ctx context.Context, body []byte) ([]byte, error) {
	head, signed, ok := bytes.Cut(body, []byte("\n\n"))
	if !ok {
		return nil, refuse(http.StatusBadRequest, "want an old size line, proof lines, an empty line and a checkpoint")
	}
	lines := strings.Split(string(head), "\n")
	sizeText, ok := strings.CutPrefix(lines[0], "old ")
	old, err := strconv.ParseInt(sizeText, 10, 64)
	if !ok || err != nil || old < 0 || strconv.FormatInt(old, 10) != sizeText {
		return nil, refuse(http.StatusBadRequest, "bad old size line %q", clip([]byte(lines[0])))
	}
	if len(lines)-1 > maxProofLines {
		return nil, refuse(http.StatusBadRequest, "%d proof lines, at most %d", len(lines)-1, maxProofLines)
	}
	proof := make(xtlog.TreeProof, 0, len(lines)-1)
	for _, l := range lines[1:] {
		hash, err := xtlog.ParseHash(l)
		if err != nil {
			return nil, refuse(http.StatusBadRequest, "bad proof line %q", clip([]byte(l)))
		}
		proof = append(proof, hash)
	}
	origin, _, _ := bytes.Cut(signed, []byte("\n"))
	l, ok := h.policy.Log(string(origin))
	if !ok {
		return nil, refuse(http.StatusNotFound, "unknown log %q", clip(origin))
	}
	n, err := note.Open(signed, note.VerifierList(l.Verifier))
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	switch {
	case errors.As(err, &unverified) || errors.As(err, &invalid):
		return nil, refuse(http.StatusForbidden, "the checkpoint is not signed by the log's key")
	case err != nil:
		return nil, refuse(http.StatusBadRequest, "malformed checkpoint: %v", err)
	}
	c, err := tlog.ParseCheckpoint([]byte(n.Text))
	if err != nil {
		return nil, refuse(http.StatusBadRequest, "%v", err)
	}
	if old > c.Size {
		return nil, refuse(http.StatusBadRequest, "old size %d is beyond the checkpoint's %d", old, c.Size)
	}
	if c.Size == 0 && c.Root != EmptyRoot {
		return nil, refuse(http.StatusUnprocessableEntity, "a checkpoint of size 0 must have the empty tree's root")
	}
	if old == 0 && len(proof) > 0 {
		return nil, refuse(http.StatusUnprocessableEntity, "a proof from size 0")
	}
	var sigs []byte
	err = h.store.UpdateCosigned(ctx, c.Origin, func(last Cosigned) (Cosigned, error) {
		if last.Size != old {
			return last, &requestError{status: http.StatusConflict, msg: "old size is not the size last cosigned", known: last.Size}
		}
		switch {
		case old == c.Size:
			if last.Root != c.Root {
				// C2SP tlog-witness: "If they don't match, the witness
				// MUST respond with a 409 Conflict".
				h.log.Warn("witness: a fork: two checkpoints of one size with different roots", "origin", c.Origin, "size", c.Size, "root", c.Root.String(), "cosigned_root", last.Root.String())
				return last, &requestError{status: http.StatusConflict, known: last.Size, outcome: "inconsistent",
					msg: fmt.Sprintf("the checkpoint's root is not the one cosigned for size %d", c.Size)}
			}
		case old > 0:
			if err := xtlog.CheckTree(proof, c.Size, c.Root, old, last.Root); err != nil {
				h.log.Warn("witness: an inconsistent checkpoint", "origin", c.Origin, "old", old, "size", c.Size, "err", err)
				return last, refuse(http.StatusUnprocessableEntity, "the consistency proof from %d to %d does not verify", old, c.Size)
			}
		}
		cosigned, err := h.signer.Cosign(logSigned(n))
		if err != nil {
			return last, err
		}
		_, lines, _ := tlog.SplitNote(cosigned)
		sigs = append(lines[len(lines)-1], '\n')
		return Cosigned{Size: c.Size, Root: c.Root, Checkpoint: cosigned}, nil
	})
	if err != nil {
		var re *requestError
		if errors.As(err, &re) {
			return nil, re
		}
		return nil, fmt.Errorf("witness: %s: %w", c.Origin, err)
	}
	return sigs, nil
}

// logSigned is the note with the log's verified signatures only: what a
// witness stores and serves with its own cosignature added.
func logSigned(n *note.Note) []byte {
	b := append([]byte(n.Text), '\n')
	for _, s := range n.Sigs {
		b = fmt.Appendf(b, "— %s %s\n", s.Name, s.Base64)
	}
	return b
}

func (h *Handler) checkpoint(w http.ResponseWriter, r *http.Request) {
	want := r.PathValue("origin")
	for _, l := range h.policy.Logs {
		sum := sha256.Sum256([]byte(l.Origin()))
		if hex.EncodeToString(sum[:]) != want {
			continue
		}
		last, err := h.store.LastCosigned(r.Context(), l.Origin())
		if err != nil {
			if r.Context().Err() == nil {
				h.log.Error("witness: read the last cosigned checkpoint", "origin", l.Origin(), "err", err)
			}
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		if last.Checkpoint == nil {
			break
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(last.Checkpoint)
		return
	}
	http.Error(w, "no checkpoint cosigned for that origin", http.StatusNotFound)
}
