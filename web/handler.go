// handler.go: the Handler, what it depends on (Deps) and how it is tuned
// (Options), its routes, and the plumbing every page shares: rendering,
// security headers, error pages and panic recovery.

package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/a-h/templ"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/maillink"
	"github.com/kith-keyserver/kith/identity/ratelimit"
	"github.com/kith-keyserver/kith/identity/session"
	"github.com/kith-keyserver/kith/oidc"
)

// Identities is what the pages need of the identity operations: the one
// authority for identity writes (*identity.Service is it).
type Identities interface {
	// Server is the server name statements carry.
	Server() string
	// Lookup returns an identity, the assessment of its evidence and the
	// records (without artifacts).
	Lookup(ctx context.Context, handle string) (identity.Identity, *identity.Assessment, []identity.Evidence, error)
	// WhoProves returns the handle of the identity for which f is proven.
	WhoProves(ctx context.Context, f identity.Factor) (identity.Handle, error)
	// IssueChallenge issues a statement to sign.
	IssueChallenge(ctx context.Context, purpose identity.Purpose, handle string, f identity.Factor) (*identity.Challenge, error)
	// AddWithSession links a factor with a consent login's approval;
	// RevokeWithSession unlinks one.
	AddWithSession(ctx context.Context, req identity.SessionAddRequest) error
	RevokeWithSession(ctx context.Context, statement []byte, consent identity.Consent) error
	// ClaimWithLogin, LinkLogin and RecordLoginEmail record logins.
	ClaimWithLogin(ctx context.Context, statement []byte, consent identity.Consent, first identity.Login) (identity.Identity, error)
	LinkLogin(ctx context.Context, statement []byte, by identity.Consent, l identity.Login) error
	RecordLoginEmail(ctx context.Context, h identity.Handle, l identity.Login) error
	// OIDCAccount returns the factor a login by the account is recorded
	// under and, for a pseudonym, its salt.
	OIDCAccount(ctx context.Context, issuer, subject string) (identity.Factor, []byte, error)
	// Claim creates an identity with a signed claim statement; Add links
	// a factor with signatures; LoginWithKey checks a signed login
	// statement (the pages' login without an OpenID provider).
	Claim(ctx context.Context, req identity.ClaimRequest) (identity.Identity, error)
	Add(ctx context.Context, req identity.AddRequest) error
	LoginWithKey(ctx context.Context, statement []byte, p identity.Proof) (identity.Handle, identity.Factor, error)
	// IdentityArtifacts returns the private artifacts of an identity's
	// records, for its owner.
	IdentityArtifacts(ctx context.Context, h identity.Handle) ([]identity.RecordArtifacts, error)
	// DeleteWithSession ends an identity.
	DeleteWithSession(ctx context.Context, statement []byte, consent identity.Consent) (identity.Handle, int, error)
}

// Providers is what login needs of the configured OpenID providers
// (*oidc.Providers is one).
type Providers interface {
	// Names lists the providers in configuration order.
	Names() []string
	// Get returns a provider by name.
	Get(name string) (*oidc.Provider, bool)
	// Begin and Finish run the authorization code flow; BeginWith
	// starts a consent login.
	Begin(w http.ResponseWriter, r *http.Request, name, next string) error
	BeginWith(w http.ResponseWriter, r *http.Request, name string, opts oidc.BeginOptions) error
	Finish(w http.ResponseWriter, r *http.Request, name string) (*oidc.Login, error)
}

// Deps are the parts the pages are built on.
type Deps struct {
	// Keys finds OpenPGP keys (identity/postgres.Store is one).
	Keys keys.Reader
	// Uploads is the upload path of OpenPGP keys (an identity/keys
	// Service).
	Uploads keys.Uploader
	// Identities runs the identity operations (challenges, links,
	// lookups).
	Identities Identities
	// Sessions keeps the login sessions.
	Sessions session.Store
	// Providers are the OpenID providers people log in with; nil or empty
	// means no login (the public pages still work).
	Providers Providers
	// VerifiedEmails, when set, marks the addresses verified by mail
	// ("verified by mail") on the search and key pages.
	VerifiedEmails identity.VerifiedEmailReader
	// Emails, with Mailer and VerifiedEmails, lets people verify and
	// manage their addresses in the browser (email.go): the upload
	// result's mail buttons, the pages mailed links open, and /manage.
	// Without them those pages answer 404.
	Emails Emails
	// Mailer mails the links (the VKS API's mails, package maillink's).
	Mailer *maillink.Mailer
}

// Defaults of Options.
const (
	// DefaultSessionLifetime is how long a session lasts after login.
	DefaultSessionLifetime = 30 * 24 * time.Hour
	// PendingLifetime is how long a first login may take to choose a
	// handle.
	PendingLifetime = 30 * time.Minute
	// DefaultMaxResults caps search results, as HKP does.
	DefaultMaxResults = 100
	// DefaultMaxUploadSize caps an upload form, as /pks/add does.
	DefaultMaxUploadSize = 5 << 20
	// touchInterval is how stale a session's LastSeen may be before a
	// request updates it.
	touchInterval = time.Minute
)

// Options tune the Handler. Zero fields take their defaults.
type Options struct {
	// CSRFKey keys the CSRF tokens of every form: at least 32 random
	// bytes, the same on every node, kept secret. It may be the OpenID
	// Connect cookie key (each use derives its own key). Required.
	CSRFKey []byte
	// SessionLifetime is how long a session lasts from login
	// (DefaultSessionLifetime when zero).
	SessionLifetime time.Duration
	// SessionIdle, when set, ends a session unused for that long.
	SessionIdle time.Duration
	// SecureCookies marks cookies Secure (and gives them the __Host-
	// prefix) even when the request did not come over TLS: set it behind
	// a TLS-terminating proxy. Requests over TLS always get Secure cookies.
	SecureCookies bool
	// MaxResults caps search results (DefaultMaxResults when zero).
	MaxResults int
	// MaxUploadSize caps an upload form in bytes (DefaultMaxUploadSize
	// when zero).
	MaxUploadSize int64
	// MailRequestsPerMinute caps the mail buttons one client (package
	// ratelimit's) may press a minute (DefaultMailRequestsPerMinute when
	// zero; negative: no cap).
	MailRequestsPerMinute int
	// UploadLimit counts each client's uploads (identity/ratelimit; the
	// wiring shares it with the other upload routes); nil: no limit.
	UploadLimit *ratelimit.Limiter
	// EmailLookupLimit counts each client's searches for an email
	// address (shared by the wiring with the other routes that look up
	// by email); nil: no limit.
	EmailLookupLimit *ratelimit.Limiter
	// Logger receives the handler's logs; slog.Default() when nil. No
	// token, code, secret or ID token is ever logged.
	Logger *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Handler serves the web pages. Make one with NewHandler.
type Handler struct {
	deps Deps
	opts Options
	log  *slog.Logger
	now  func() time.Time
	mux  *http.ServeMux
	// mailLimit caps mail requests per client (nil: no cap).
	mailLimit *ratelimit.Limiter
}

// NewHandler returns the web frontend. It fails when a required
// dependency or the CSRF key is missing.
func NewHandler(deps Deps, opts Options) (*Handler, error) {
	if deps.Keys == nil || deps.Uploads == nil || deps.Identities == nil || deps.Sessions == nil {
		return nil, errors.New("web: new handler: Keys, Identities and Sessions are required")
	}
	if len(opts.CSRFKey) < oidc.MinCSRFKeySize {
		return nil, fmt.Errorf("web: new handler: the CSRF key must be at least %d bytes", oidc.MinCSRFKeySize)
	}
	if opts.SessionLifetime <= 0 {
		opts.SessionLifetime = DefaultSessionLifetime
	}
	if opts.MaxResults <= 0 {
		opts.MaxResults = DefaultMaxResults
	}
	if opts.MaxUploadSize <= 0 {
		opts.MaxUploadSize = DefaultMaxUploadSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MailRequestsPerMinute == 0 {
		opts.MailRequestsPerMinute = DefaultMailRequestsPerMinute
	}
	h := &Handler{deps: deps, opts: opts, log: opts.Logger, now: opts.Now,
		mailLimit: ratelimit.New(opts.MailRequestsPerMinute, opts.Now)}
	h.mux = http.NewServeMux()
	h.Register(h.mux)
	return h, nil
}

// Register adds the pages' routes to mux, each behind the handler's panic
// recovery and security headers, so that a server's metrics see each
// route by its pattern.
func (h *Handler) Register(mux *http.ServeMux) {
	routes := []struct {
		pattern string
		fn      http.HandlerFunc
	}{
		{"GET /{$}", h.serveHome},
		{"GET /search", h.serveSearch},
		{"GET /keys/{fingerprint}", h.serveKey},
		{"GET /upload", h.serveUploadForm},
		{"POST /upload", h.serveUpload},
		{"POST /upload/email", h.serveUploadEmail},
		{"GET /email/confirm/{fpr}/{token}", h.serveEmailLink},
		{"POST /email/confirm/{fpr}/{token}", h.serveEmailConfirm},
		{"GET /manage", h.serveManageForm},
		{"POST /manage", h.serveManageRequest},
		{"GET /manage/{fpr}/{token}", h.serveManage},
		{"POST /manage/{fpr}/{token}/withdraw", h.serveManageWithdraw},
		{"POST /manage/{fpr}/{token}/delete", h.serveManageDelete},
		{"POST /manage/delete", h.serveManageDeleteVerify},
		{"GET /stats", h.serveStats},
		{"GET /u/{handle}", h.serveProfile},
		{"GET /login", h.serveLoginPage},
		{"GET /login/{provider}", h.serveBegin},
		{"POST /login/{provider}", h.serveBegin},
		{"GET /login/{provider}/callback", h.serveCallback},
		{"GET /login/choose-handle", h.serveChooseHandle},
		{"GET /claim", h.serveClaimForm},
		{"POST /claim", h.serveClaimChallenge},
		{"POST /claim/verify", h.serveClaimVerify},
		{"GET /claim/done", h.serveClaimed},
		{"GET /statement", h.serveStatement},
		{"GET /login/key", h.serveKeyLoginForm},
		{"POST /login/key", h.serveKeyLoginChallenge},
		{"POST /login/key/verify", h.serveKeyLoginVerify},
		{"POST /login/choose-handle", h.serveClaimHandle},
		{"POST /logout", h.serveLogout},
		{"GET /account", h.serveAccount},
		{"POST /account/challenge", h.serveChallenge},
		{"POST /account/verify", h.serveVerify},
		{"POST /account/unlink", h.serveUnlink},
		{"POST /account/sessions/end", h.serveEndSessions},
		{"GET /account/artifacts", h.serveArtifacts},
		{"POST /account/delete", h.serveDelete},
		{"GET /static/kith.css", serveCSS},
		{"GET /static/copy.js", serveCopyJS},
	}
	for _, rt := range routes {
		mux.Handle(rt.pattern, h.wrap(rt.fn))
	}
}

// ServeHTTP serves the pages.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// wrap sets the security headers and turns a panic into a 500 page.
func (h *Handler) wrap(fn http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				h.log.ErrorContext(r.Context(), "web: panic", slog.String("route", r.Pattern), slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
				h.fail(w, r, http.StatusInternalServerError, "Something went wrong", "The server failed; try again later.")
			}
		}()
		hd := w.Header()
		// No frames; styles and the one script (copy buttons) only from
		// here, nothing inline. form-action is left out: a login form
		// redirects to the provider.
		hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; base-uri 'none'; frame-ancestors 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		fn(w, r)
	})
}

// render writes a page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// Pages show who is logged in and carry CSRF tokens: never cached.
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := c.Render(r.Context(), w); err != nil && r.Context().Err() == nil {
		h.log.WarnContext(r.Context(), "web: render", slog.String("route", r.Pattern), slog.Any("error", err))
	}
}

// fail renders an error page with a title and an explanation for people.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, title, msg string) {
	p := h.page(w, r, title)
	h.render(w, r, status, errorPage(p, status, title, msg))
}

// internal logs an internal failure and renders a 500 page.
func (h *Handler) internal(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() == nil {
		h.log.ErrorContext(r.Context(), "web: internal error", slog.String("route", r.Pattern), slog.Any("error", err))
	}
	h.fail(w, r, http.StatusInternalServerError, "Something went wrong", "The server failed; try again later.")
}

// refusal renders an identity refusal (its message is for people) or, for
// any other error, a 500 page.
func (h *Handler) refusal(w http.ResponseWriter, r *http.Request, title string, err error) {
	code := identity.CodeOf(err)
	if code == "" {
		h.internal(w, r, err)
		return
	}
	status := http.StatusBadRequest
	switch code {
	case identity.CodeHandleTaken, identity.CodeFactorLinked, identity.CodeAlreadyLinked, identity.CodeAlreadyRevoked, identity.CodeNonceUsed:
		status = http.StatusConflict
	case identity.CodeUnknownIdentity, identity.CodeUnknownKey:
		status = http.StatusNotFound
	case identity.CodeNotProven, identity.CodeNotAuthorized:
		status = http.StatusForbidden
	case identity.CodeRateLimited, identity.CodeRecipientCapped:
		status = http.StatusTooManyRequests
	}
	var e *identity.Error
	errors.As(err, &e)
	h.fail(w, r, status, title, refusalText(e))
}

// refusalText is a refusal's message with its cause, which for refusals
// is written for people too.
func refusalText(e *identity.Error) string {
	if e == nil {
		return ""
	}
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}
