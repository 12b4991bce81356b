// handler.go: the log's HTTP face: /log/checkpoint, /log/key and the
// tiles under /log/tile/, as C2SP tlog-tiles lays them out.

package tlog

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
)

// Handler serves the log under /log/.
type Handler struct {
	store TreeReader
	vkey  string
	log   *slog.Logger
}

// NewHandler returns the handler serving the tree in store, whose
// checkpoints verify with the verifier key vkey (Key.VerifierKey).
func NewHandler(store TreeReader, vkey string, logger *slog.Logger) *Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{store: store, vkey: vkey, log: logger}
}

// Register adds the log's routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /log/checkpoint", h.checkpoint)
	mux.HandleFunc("GET /log/key", h.key)
	mux.HandleFunc("GET /log/tile/{path...}", h.tile)
}

func (h *Handler) checkpoint(w http.ResponseWriter, r *http.Request) {
	_, signed, err := h.store.Checkpoint(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if signed == nil {
		http.Error(w, "no checkpoint signed yet", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(signed)
}

func (h *Handler) key(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte(h.vkey + "\n"))
}

func (h *Handler) tile(w http.ResponseWriter, r *http.Request) {
	t, err := ParseTilePath("tile/" + r.PathValue("path"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	data, err := ReadTile(r.Context(), h.store, t)
	if errors.Is(err, ErrTileNotFound) {
		http.Error(w, "tile not in the signed tree", http.StatusNotFound)
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	// A tile's bytes never change, partial ones included: a wider tile
	// has another path.
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data)
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	h.log.Error("tlog: request failed", "path", r.URL.Path, "err", err)
	http.Error(w, "internal error", http.StatusInternalServerError)
}
