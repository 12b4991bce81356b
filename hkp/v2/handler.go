// handler.go: the Handler, what it needs, its routes, and the answers
// every route shares (errors, panics, keys).

package v2

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/maillink"
	"github.com/kith-keyserver/kith/identity/ratelimit"
)

// Defaults for the zero Options fields.
const (
	// DefaultMaxResults caps the keys one lookup returns (as package
	// hkp's): the draft's "a keyserver SHOULD limit the returned
	// bundle/index to a reasonable length".
	DefaultMaxResults = 100
	// DefaultMaxAnswerSize caps the keys' bytes one answer carries (as
	// package hkp's).
	DefaultMaxAnswerSize = 16 << 20
	// DefaultMaxBodySize caps a submission's body (as package hkp's
	// /pks/add, SKS's figure).
	DefaultMaxBodySize = 5 << 20
)

// MediaType is the content type of the v2 certificate answers: binary
// OpenPGP packets, never armored (the draft's section 7.1 makes binary a
// MUST for v2 lookups). It is the unparameterised type the draft's editor
// serves in Hockeypuck since the draft's adoption; submissions are read
// in it and in application/pgp-keys (armored or not).
const MediaType = "application/pgp"

// Corroborations tells which addresses of a key's user IDs a provider
// verified for the identity the key is proven for (identity.Service is
// one: identity.CorroboratedEmails is the rule).
type Corroborations interface {
	CorroboratedKeyEmails(ctx context.Context, key identity.Factor) ([]string, error)
}

// Options configure a Handler. The zero value of each field means its
// default.
type Options struct {
	// MaxResults caps the keys one lookup returns.
	MaxResults int
	// MaxAnswerSize caps the keys' bytes of one answer; a lookup over it
	// is refused with 400 before any key is read.
	MaxAnswerSize int
	// MaxBodySize caps a POST /pks/v2/certs body; larger bodies get 413.
	MaxBodySize int64
	// Uploads, if set, serves POST /pks/v2/certs through the one upload
	// path (an identity/keys Service, with its admission and budgets);
	// nil answers 501 there.
	Uploads keys.Uploader
	// UploadLimit counts each client's submissions (the wiring shares it
	// with the other upload routes); past it the answer is 429. Nil: no
	// limit.
	UploadLimit *ratelimit.Limiter
	// EmailLookupLimit counts each client's lookups by an address
	// (by-identity, index and canonical; the wiring shares it with the
	// other routes that look up by email); past it the answer is 429.
	// Nil: no limit.
	EmailLookupLimit *ratelimit.Limiter
	// VerifiedOnly makes by-identity and index answer for an address only
	// with keys for which it is verified by mail, as package hkp's email
	// searches do with hkp.email_lookup = "verified"; otherwise they
	// answer every key naming it, each user ID with its confidence.
	VerifiedOnly bool
	// Corroborations, if set, gives user IDs whose address a provider
	// verified their partial confidence; nil: such user IDs are claims.
	Corroborations Corroborations
	// PrefixLog, if set, serves GET /pks/v2/prefixlog/{date}; the
	// Handler adds the CORS headers and the OPTIONS answers. Nil: the
	// category answers 501, as the draft has a keyserver answer a
	// category it does not serve.
	PrefixLog http.Handler
	// Emails and Mailer, if both set (and Uploads), serve POST
	// /pks/v2/sendtoken and PUT /pks/v2/canonical/{identity} (token.go):
	// the token is a mailed verify link's, through the identity service's
	// rules (Emails, an *identity.Service) and package maillink's mail.
	// Unset: both answer 501.
	Emails Emails
	Mailer *maillink.Mailer
	// MailRequestLimit counts each client's sendtoken requests (the
	// mail_requests_per_minute budget); past it the answer is 429. Nil:
	// no limit.
	MailRequestLimit *ratelimit.Limiter
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
// which addresses are verified by mail from verified.
func NewHandler(finder keys.Finder, verified identity.VerifiedEmailReader, opts Options) *Handler {
	if opts.MaxResults <= 0 {
		opts.MaxResults = DefaultMaxResults
	}
	if opts.MaxAnswerSize <= 0 {
		opts.MaxAnswerSize = DefaultMaxAnswerSize
	}
	if opts.MaxBodySize <= 0 {
		opts.MaxBodySize = DefaultMaxBodySize
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Handler{keys: finder, verified: verified, opts: opts, log: opts.Logger}
}

// The lookup categories (the draft's section 5.1) Kith serves, by the
// path below /pks/v2/ that names them.
var lookups = []string{"certs/by-vfingerprint", "certs/by-keyid", "certs/by-identity", "index", "canonical"}

// Register adds the v2 routes, their OPTIONS answers, and the answers to
// the rest of /pks/v2/ (403, 501) to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	const p = "/pks/v2/"
	Handle(mux, "GET", p+"certs/by-vfingerprint/{version}/{fpr}", h.recover(h.serveByVFingerprint))
	Handle(mux, "GET", p+"certs/by-vfingerprint/{vfpr}", h.recover(h.serveByVFingerprint))
	Handle(mux, "GET", p+"certs/by-keyid/{keyid}", h.recover(h.serveByKeyID))
	Handle(mux, "GET", p+"certs/by-identity/{identity}", h.recover(h.serveByIdentity))
	Handle(mux, "GET", p+"index/{identity}", h.recover(h.serveIndex))
	tokens := h.opts.Emails != nil && h.opts.Mailer != nil && h.opts.Uploads != nil
	if tokens {
		canonical := h.recover(h.serveCanonical)
		put := h.recover(h.serveCanonicalPut)
		Handle(mux, "GET, PUT", p+"canonical/{identity}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut {
				put.ServeHTTP(w, r)
				return
			}
			canonical.ServeHTTP(w, r)
		}))
		// With and without the trailing slash (Hockeypuck's planned
		// route has one).
		mux.Handle("POST "+p+"sendtoken", CORS(h.recover(h.serveSendToken)))
		mux.Handle("POST "+p+"sendtoken/{$}", CORS(h.recover(h.serveSendToken)))
		mux.Handle("OPTIONS "+p+"sendtoken", preflight([]string{"POST"}, []string{"application/json"}))
	} else {
		Handle(mux, "GET", p+"canonical/{identity}", h.recover(h.serveCanonical))
	}
	categories := lookups
	if h.opts.PrefixLog != nil {
		Handle(mux, "GET", p+"prefixlog/{date}", h.recover(h.opts.PrefixLog.ServeHTTP))
		categories = append(categories[:len(categories):len(categories)], "prefixlog")
	}
	for _, c := range categories {
		if c == "canonical" && tokens {
			mux.Handle("OPTIONS "+p+c, Preflight("GET", "PUT"))
		} else {
			mux.Handle("OPTIONS "+p+c, Preflight("GET"))
		}
		// Section 5.1.7: OPTIONS on a category is feature detection; a
		// GET without an identifier SHOULD get an error such as 403.
		forbidden := CORS(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			Error(w, http.StatusForbidden, "give an identifier after /pks/v2/"+c+"/")
		}))
		mux.Handle("GET "+p+c, forbidden)
		mux.Handle("GET "+p+c+"/{$}", forbidden)
	}
	if h.opts.Uploads != nil {
		mux.Handle("POST "+p+"certs", CORS(h.recover(h.serveSubmit)))
		mux.Handle("OPTIONS "+p+"certs", preflight([]string{"POST"}, acceptedSubmissions))
	}
	// Section 4.2: "501 Not implemented" for a category or operation the
	// keyserver does not support (sendtoken and PUT canonical without
	// Options.Emails, an unknown category, a method a route does not
	// take).
	mux.Handle(p, CORS(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Error(w, http.StatusNotImplemented, "this HKP v2 category or operation is not implemented here")
	})))
}

// recover turns a panic into a 500 that says nothing of it. It and fail
// log the route's pattern, never the path, which may hold an address.
func (h *Handler) recover(fn http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				h.log.Error("hkp v2: panic", "route", r.Pattern, "panic", v, "stack", string(debug.Stack()))
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
		h.log.Error("hkp v2: "+what, "route", r.Pattern, "err", err)
	}
	Error(w, http.StatusInternalServerError, "internal error: try again later")
}

// writeKeys answers the keys' packets in binary, one key after the other
// (the draft's certificate bundle), named name in Content-Disposition;
// none is 404.
func writeKeys(w http.ResponseWriter, packets [][]byte, name string) {
	if len(packets) == 0 {
		Error(w, http.StatusNotFound, "no key found")
		return
	}
	n := 0
	for _, p := range packets {
		n += len(p)
	}
	body := make([]byte, 0, n)
	for _, p := range packets {
		body = append(body, p...)
	}
	hd := w.Header()
	hd.Set("Content-Type", MediaType)
	hd.Set("Content-Disposition", `attachment; filename="`+url.PathEscape(name)+`.pgp"`)
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.Write(body)
}
