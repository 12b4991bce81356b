// handler.go: the Handler, what it needs, its routes, and the answers
// every route shares (errors, panics, keys).

package v2

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/ratelimit"
)

// Defaults for the zero Options fields.
const (
	// DefaultMaxResults caps the keys one lookup returns (as package
	// hkp's).
	DefaultMaxResults = 100
	// DefaultMaxAnswerSize caps the keys' bytes one answer carries (as
	// package hkp's).
	DefaultMaxAnswerSize = 16 << 20
)

// Options configure a Handler. The zero value of each field means its
// default.
type Options struct {
	// MaxResults caps the keys one lookup returns.
	MaxResults int
	// MaxAnswerSize caps the keys' bytes of one answer; a lookup over it
	// is refused with 400 before any key is read.
	MaxAnswerSize int
	// EmailLookupLimit counts each client's lookups by identity (the
	// wiring shares it with the other routes that look up by email);
	// past it the answer is 429. Nil: no limit.
	EmailLookupLimit *ratelimit.Limiter
	// PrefixLog, if set, serves GET /pks/v2/prefixlog/{date}; the
	// Handler adds the CORS headers and the OPTIONS answer.
	PrefixLog http.Handler
	// Logger receives the handler's logs (nil: slog.Default()).
	Logger *slog.Logger
}

// Handler serves HKP v2. It is safe for concurrent use.
type Handler struct {
	keys     keys.Finder
	verified identity.VerifiedEmailReader
	opts     Options
	log      *slog.Logger
}

// NewHandler returns a Handler that finds keys with finder and learns
// which addresses are verified from verified.
func NewHandler(finder keys.Finder, verified identity.VerifiedEmailReader, opts Options) *Handler {
	if opts.MaxResults <= 0 {
		opts.MaxResults = DefaultMaxResults
	}
	if opts.MaxAnswerSize <= 0 {
		opts.MaxAnswerSize = DefaultMaxAnswerSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Handler{keys: finder, verified: verified, opts: opts, log: opts.Logger}
}

// Register adds the v2 routes, and their OPTIONS answers, to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	Handle(mux, "GET", "/pks/v2/certs/by-vfingerprint/{version}/{fpr}", h.recover(h.serveByVFingerprint))
	Handle(mux, "GET", "/pks/v2/certs/by-keyid/{keyid}", h.recover(h.serveByKeyID))
	if h.opts.PrefixLog != nil {
		Handle(mux, "GET", "/pks/v2/prefixlog/{date}", h.opts.PrefixLog)
	}
}

// recover turns a panic into a 500 that says nothing of it.
func (h *Handler) recover(fn http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				h.log.Error("hkp v2: panic", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				Error(w, http.StatusInternalServerError, "internal error")
			}
		}()
		fn(w, r)
	})
}

// Error answers a failed v2 request: code, and msg as plain text.
func Error(w http.ResponseWriter, code int, msg string) {
	hd := w.Header()
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintln(w, msg)
}

// fail logs an internal failure and answers 500 without its detail.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	if r.Context().Err() == nil {
		h.log.Error("hkp v2: "+what, "path", r.URL.Path, "err", err)
	}
	Error(w, http.StatusInternalServerError, "internal error: try again later")
}

// writeKeys answers the stored keys' packets in binary, one key after
// the other, named name in Content-Disposition; none is 404.
func writeKeys(w http.ResponseWriter, ks []keys.Stored, name string) {
	if len(ks) == 0 {
		Error(w, http.StatusNotFound, "no key found")
		return
	}
	var b bytes.Buffer
	for _, k := range ks {
		b.Write(k.Packets)
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/pgp-keys")
	hd.Set("Content-Disposition", `attachment; filename="`+url.PathEscape(name)+`.pgp"`)
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.Write(b.Bytes())
}
