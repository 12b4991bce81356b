// handler.go: the API's handler, its options, routing, and the JSON error
// form every refusal takes.

package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/ratelimit"
	"github.com/kith-keyserver/kith/identity/retry"
	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/oidc"
)

// Watcher is a store that reports evidence appends from every node
// (identity/postgres.Store.WatchEvidence). With one, the handler caches
// lookups and drops them on each append; without one it does not cache.
type Watcher interface {
	WatchEvidence(ctx context.Context, ready chan<- struct{}, fn func(handle string)) error
}

// Options configure the handler.
type Options struct {
	// Service is the identity service, the one authority for identity
	// writes, shared with the other frontends.
	Service *identity.Service
	// Keys finds stored OpenPGP keys (for .gpg answers).
	Keys verify.KeyFinder
	// Watcher, when set, reports other nodes' evidence appends; the
	// handler then caches lookups (identity/postgres.Store is one).
	Watcher Watcher
	// Logger receives internal failures; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// CacheTTL bounds how long a lookup is cached on this node (and the
	// max-age clients are told); zero means 60 seconds.
	CacheTTL time.Duration
	// CacheSize bounds the number of cached handles; zero means 100,000.
	CacheSize int
	// Tree is the transparency log's tree (identity/postgres.Store is
	// one): with it, lookups answer ?proof=1 with a proof bundle (see
	// ProofBundle); without it, ?proof=1 is refused.
	Tree tlog.TreeReader
	// Providers are the OpenID providers a device login approving an SSH
	// certificate logs in at (see device.go); nil: none, and the device
	// endpoints refuse.
	Providers *oidc.Providers
	// ChallengesPerMinute is how many challenges one client (package
	// ratelimit's) may ask for a minute, at once or spread out; zero
	// means 30, negative means no limit.
	ChallengesPerMinute int
}

// Handler serves the API. Make one with NewHandler.
type Handler struct {
	svc      *identity.Service
	keys     verify.KeyFinder
	log      *slog.Logger
	now      func() time.Time
	ttl      time.Duration
	cache    *cache
	limit    *ratelimit.Limiter // nil: no limit
	mux      *http.ServeMux
	maxAgeHV string
	krl      krlCache
	tree     tlog.TreeReader // nil: no proof bundles
	// providers are the OpenID providers of device logins.
	providers *oidc.Providers
}

// defaultChallengesPerMinute is the default challenge rate per client.
const defaultChallengesPerMinute = 30

// maxBody bounds a request body: statements and signatures are a few KiB.
const maxBody = 256 << 10

// NewHandler returns the API handler. With a Watcher, it watches evidence
// appends until ctx ends, caching lookups meanwhile; the Service's own
// writes drop what they change before they return.
func NewHandler(ctx context.Context, opts Options) (*Handler, error) {
	if opts.Service == nil || opts.Keys == nil {
		return nil, errors.New("api: new handler: a Service and a key finder are needed")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = 60 * time.Second
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = 100_000
	}
	h := &Handler{
		svc: opts.Service, keys: opts.Keys, tree: opts.Tree, log: opts.Logger, now: opts.Now, ttl: opts.CacheTTL,
		cache: newCache(opts.CacheSize, opts.CacheTTL), providers: opts.Providers,
		maxAgeHV: fmt.Sprintf("public, max-age=%d", int(opts.CacheTTL.Seconds())),
	}
	if opts.ChallengesPerMinute == 0 {
		opts.ChallengesPerMinute = defaultChallengesPerMinute
	}
	h.limit = ratelimit.New(opts.ChallengesPerMinute, opts.Now)
	// Read your own writes: a write drops what it changed on this node
	// before it answers; other nodes drop it on the notification.
	h.svc.Subscribe(func(_ context.Context, handles []identity.Handle) {
		if handles == nil {
			h.cache.flush()
			return
		}
		for _, hd := range handles {
			h.cache.drop(string(hd))
			if name, ok := hd.Host(); ok {
				dropWellKnownHosts(h.cache, name)
			}
		}
	})
	if opts.Watcher != nil {
		go h.watch(ctx, opts.Watcher)
	}
	h.mux = http.NewServeMux()
	h.Register(h.mux)
	return h, nil
}

// Mux is where Register adds routes (*http.ServeMux is one).
type Mux interface {
	Handle(pattern string, handler http.Handler)
}

// Register adds the API's routes to mux, so that a server's metrics see
// each route by its pattern. Every /api/v1 route is in the OpenAPI
// document (openapi.json), which a test checks.
func (h *Handler) Register(mux Mux) {
	mux.Handle("GET /api/v1/openapi.json", h.wrap(serveOpenAPI))
	mux.Handle("POST /api/v1/challenges", h.wrap(h.postChallenge))
	mux.Handle("POST /api/v1/identities", h.wrap(h.postClaim))
	mux.Handle("POST /api/v1/identities/{handle}/factors", h.wrap(h.postAdd))
	mux.Handle("POST /api/v1/identities/{handle}/revocations", h.wrap(h.postRevoke))
	mux.Handle("POST /api/v1/keys/deletions", h.wrap(h.postKeyDeletion))
	mux.Handle("GET /api/v1/log", h.wrap(h.getLog))
	mux.Handle("GET /api/v1/ssh/{fingerprint...}", h.wrap(h.getSSH))
	mux.Handle("POST /api/v1/ssh/certificates", h.wrap(h.postCertificate))
	mux.Handle("POST /api/v1/ssh/device-authorizations", h.wrap(h.postDeviceAuthorization))
	mux.Handle("POST /api/v1/ssh/device-certificates", h.wrap(h.postDeviceCertificate))
	mux.Handle("GET /ssh/ca.pub", h.wrap(h.getCAKey))
	mux.Handle("GET /ssh/krl", h.wrap(h.getKRL))
	mux.Handle("GET /ssh/ca.known_hosts", h.wrap(h.getCertAuthority))
	mux.Handle("GET /.well-known/ssh-known-hosts", h.wrap(h.getWellKnownHosts))
	mux.Handle("GET /users/{file}", h.wrap(h.getUser))
	mux.Handle("GET /hosts/{file}", h.wrap(h.getHost))
}

// ServeHTTP serves the API's routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// wrap turns a handler that returns an error into an http.Handler: a
// refusal becomes its JSON error, anything else (a panic included) a 500
// that says nothing of the cause, which goes to the log.
func (h *Handler) wrap(fn func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				h.log.Error("api: panic", "route", r.Pattern, "panic", fmt.Sprint(p))
				writeError(w, http.StatusInternalServerError, "internal", "internal error")
			}
		}()
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		if err := fn(w, r); err != nil {
			h.fail(w, r, err)
		}
	})
}

// fail writes err as a JSON error.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ie *identity.Error
	if errors.As(err, &ie) {
		writeError(w, statusOf(ie.Code), string(ie.Code), ie.Error())
		return
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeError(w, http.StatusRequestEntityTooLarge, string(identity.CodeBadRequest), "request body too large")
		return
	}
	if errors.Is(err, context.Canceled) {
		return
	}
	h.log.Error("api: request failed", "route", r.Pattern, "err", err)
	writeError(w, http.StatusInternalServerError, "internal", "internal error")
}

// statusOf maps refusal codes to HTTP statuses.
func statusOf(c identity.Code) int {
	switch c {
	case identity.CodeUnknownIdentity, identity.CodeUnknownNonce, identity.CodeNotLinked, identity.CodeCADisabled:
		return http.StatusNotFound
	case identity.CodeRateLimited, identity.CodeRecipientCapped:
		return http.StatusTooManyRequests
	case identity.CodeHandleTaken, identity.CodeFactorLinked, identity.CodeAlreadyLinked, identity.CodeAlreadyRevoked, identity.CodeNonceUsed:
		return http.StatusConflict
	case identity.CodeExpired:
		return http.StatusGone
	case identity.CodeNotProven, identity.CodeNotAuthorized, identity.CodeHostNotAllowed, identity.CodePrincipalNotAllowed:
		return http.StatusForbidden
	case identity.CodeBadSignature, identity.CodeWrongNamespace, identity.CodeWrongKey, identity.CodeUnknownKey,
		identity.CodeStatementChanged, identity.CodeWrongServer, identity.CodeWrongPurpose, identity.CodeReservedHandle:
		return http.StatusUnprocessableEntity
	}
	return http.StatusBadRequest
}

// ErrorBody is the JSON form of every refusal.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var b ErrorBody
	b.Error.Code, b.Error.Message = code, msg
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// readJSON decodes a request body, refusing unknown fields.
func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return identity.RefuseErr(identity.CodeBadRequest, err, "bad JSON request")
	}
	return nil
}

// watch keeps the cache coherent with evidence appends: it caches only
// while listening, and drops everything whenever listening stops.
func (h *Handler) watch(ctx context.Context, w Watcher) {
	retry.Follow(ctx, retry.Backoff{}, func(ctx context.Context, ready chan<- struct{}) error {
		return w.WatchEvidence(ctx, ready, func(handle string) {
			if handle == "*" {
				h.cache.flush()
				return
			}
			h.cache.drop(handle)
		})
	}, retry.Hooks{
		Ready: h.cache.enable,
		Lost:  h.cache.disable,
		Failed: func(err error, wait time.Duration) {
			h.log.Warn("api: evidence notifications lost; lookups uncached until they are back", "err", err, "retry_in", wait.String())
		},
	})
}

// Listening reports whether lookups are cached: the evidence watcher is
// listening, so that another node's append will reach this node's cache.
// It is false without a Watcher, and while the watcher reconnects.
func (h *Handler) Listening() bool { return h.cache.enabled() }

func jsonIndent(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
