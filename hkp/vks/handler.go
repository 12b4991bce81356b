// handler.go: the Handler, what it needs, and the routes.

package vks

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/mail"
	"github.com/kith-keyserver/kith/identity/maillink"
	"github.com/kith-keyserver/kith/identity/proof"
	"github.com/kith-keyserver/kith/identity/ratelimit"
)

// Emails is what the handler needs of the identity service: mailed
// links (the page a link opens, where it is followed, is package web's).
type Emails interface {
	RequestEmail(ctx context.Context, req identity.EmailRequest) error
	PendingEmails(ctx context.Context, key identity.Factor, emails []string) ([]string, error)
}

// The handler's limits.
const (
	// MaxUploadSize caps an upload's JSON body: a key is at most 1 MiB
	// (the policy's cap), armored a third more.
	MaxUploadSize = 4 << 20
	// MaxRequestSize caps a request-verify body.
	MaxRequestSize = 64 << 10
	// MaxAddresses caps the addresses of one request-verify.
	MaxAddresses = 10
	// UploadTokenTTL is how long an upload's token may ask for mails.
	UploadTokenTTL = time.Hour
	// DefaultRequestsPerMinute is how many mail requests (each naming up
	// to MaxAddresses) one client (package ratelimit's) may make a
	// minute: enough for a person, too few to flood mailboxes from one
	// address.
	DefaultRequestsPerMinute = 10
)

// Options configure a Handler.
type Options struct {
	// PublicURL is the server's URL as mails link to it, without a
	// trailing slash.
	PublicURL string
	// Server names the server in mails ("Kith <https://keys.example.org>").
	Server string
	// TokenKey (32 bytes, shared by every node) authenticates upload
	// tokens.
	TokenKey []byte
	// Mailer sends the verification mails.
	Mailer mail.Sender
	// RequestsPerMinute caps mail requests per client (package
	// ratelimit's; zero: the default; negative: no cap).
	RequestsPerMinute int
	// UploadLimit counts each client's uploads (shared by the wiring
	// with the other upload routes); nil: no limit.
	UploadLimit *ratelimit.Limiter
	// EmailLookupLimit counts each client's by-email lookups (shared by
	// the wiring with the other routes that look up by email); nil: no
	// limit.
	EmailLookupLimit *ratelimit.Limiter
	// Proofs, when set, proves by-email answers asked with ?proof=1
	// (package identity/proof); nil: such requests are answered 404.
	Proofs *proof.Source
	// Logger gets the handler's logs (nil: slog.Default()).
	Logger *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Handler serves the VKS API. It is safe for concurrent use.
type Handler struct {
	keys     keys.Finder
	uploads  keys.Uploader
	verified identity.VerifiedEmailReader
	emails   Emails
	opts     Options
	log      *slog.Logger
	limit    *ratelimit.Limiter // nil: no cap
	mailer   *maillink.Mailer
}

// NewHandler returns a Handler that finds keys with finder and stores
// uploads through uploads (an identity/keys Service).
func NewHandler(finder keys.Finder, uploads keys.Uploader, verified identity.VerifiedEmailReader, emails Emails, opts Options) (*Handler, error) {
	if len(opts.TokenKey) < 32 {
		return nil, fmt.Errorf("vks: new handler: the token key must have 32 bytes, not %d", len(opts.TokenKey))
	}
	if opts.Mailer == nil || opts.PublicURL == "" || opts.Server == "" {
		return nil, fmt.Errorf("vks: new handler: a mailer, a public URL and a server name are needed")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.RequestsPerMinute == 0 {
		opts.RequestsPerMinute = DefaultRequestsPerMinute
	}
	return &Handler{keys: finder, uploads: uploads, verified: verified, emails: emails, opts: opts, log: opts.Logger,
		limit:  ratelimit.New(opts.RequestsPerMinute, opts.Now),
		mailer: &maillink.Mailer{PublicURL: opts.PublicURL, Server: opts.Server, Mail: opts.Mailer}}, nil
}

// Register adds the routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.Handle("GET /vks/v1/by-fingerprint/{fpr}", h.recover(h.serveByFingerprint))
	mux.Handle("GET /vks/v1/by-keyid/{keyid}", h.recover(h.serveByKeyID))
	mux.Handle("GET /vks/v1/by-email/{email}", h.recover(h.serveByEmail))
	mux.Handle("POST /vks/v1/upload", h.recover(h.serveUpload))
	mux.Handle("POST /vks/v1/request-verify", h.recover(h.serveRequestVerify))
	mux.Handle("POST /vks/v1/request-withdraw", h.recover(h.serveRequestWithdraw))
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
				h.log.Error("vks: panic", "route", r.Pattern, "panic", v, "stack", string(debug.Stack()))
				jsonError(w, http.StatusInternalServerError, "internal error")
			}
		}()
		fn(w, r)
	})
}

// jsonError answers {"error": msg}, as keys.openpgp.org does.
func jsonError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// textError answers a lookup's failure in plain text.
func textError(w http.ResponseWriter, code int, msg string) {
	hd := w.Header()
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintln(w, msg)
}
