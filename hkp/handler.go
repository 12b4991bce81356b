// handler.go: the Handler, its options, the store interface it needs, and
// the plumbing every route shares (routing, error answers, panics).

package hkp

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/ratelimit"
	"github.com/kith-keyserver/kith/identity/retry"
	"github.com/kith-keyserver/kith/pgp"
)

// Store is what the HKP frontend reads of the key store: lookups, and
// the change notifications that keep its answer cache coherent. A zero
// keys.DigestChange (no fingerprint) means changes may have been missed;
// the Handler then drops its whole cache.
type Store interface {
	keys.Reader
	keys.Listener
}

// Defaults for the zero Options fields.
const (
	// DefaultMaxResults caps the keys one lookup returns (Hockeypuck's
	// figure).
	DefaultMaxResults = 100
	// DefaultMaxBodySize caps a /pks/add body (SKS's figure).
	DefaultMaxBodySize = 5 << 20
	// DefaultCacheSize bounds the answer cache, in bytes.
	DefaultCacheSize = 64 << 20
	// DefaultCacheTTL is how long a cached answer may be served. The
	// notifications keep the cache coherent; the TTL only bounds the
	// damage of a notification that never arrived.
	DefaultCacheTTL = 5 * time.Minute
	// DefaultMaxHashQueryDigests caps the digests of one hashquery
	// (SKS asks for 100 at a time).
	DefaultMaxHashQueryDigests = 1000
	// DefaultMaxAnswerSize caps the keys' bytes one op=get or
	// /pks/hashquery answer may carry: a broader get is refused with 400
	// before any key is read; a hashquery answers the keys that fit.
	DefaultMaxAnswerSize = 16 << 20
	// DefaultStatsTTL is how long the store's statistics are reused.
	DefaultStatsTTL = 10 * time.Second
)

// Options configure a Handler. The zero value of each field means its
// default.
type Options struct {
	// MaxResults caps the keys one lookup returns. An index over it is
	// cut with a note; a get over it is refused with 400.
	MaxResults int
	// MaxBodySize caps a /pks/add request body; larger bodies get 413.
	MaxBodySize int64
	// MaxHashQueryDigests caps the digests of one /pks/hashquery request.
	MaxHashQueryDigests int
	// MaxAnswerSize caps the keys' bytes (before armor) of one op=get,
	// op=hget or /pks/hashquery answer. A get over it is refused with 400;
	// a hashquery answers the keys that fit and
	// leaves the rest out, for the peer to ask again after its next round
	// (an error would make SKS drop the whole batch).
	MaxAnswerSize int
	// UploadLimit counts each client's POST /pks/add (identity/ratelimit;
	// the wiring shares it with the other upload routes); past it the
	// answer is 429. Nil: no limit.
	UploadLimit *ratelimit.Limiter
	// EmailLookupLimit counts each client's lookups by email (op=get,
	// index and vindex of an address, cached or not; the wiring shares it
	// with the other routes that look up by email); past it the answer
	// is 429. Nil: no limit.
	EmailLookupLimit *ratelimit.Limiter
	// CacheSize bounds the answer cache in bytes; negative disables it.
	CacheSize int64
	// CacheTTL is the longest a cached answer is served.
	CacheTTL time.Duration
	// StatsTTL is how long store statistics are reused by op=stats.
	StatsTTL time.Duration
	// Version is the server's version, shown by op=stats.
	Version string
	// Hostname is the server's public host name, Nodename this node's
	// name and Contact how to reach the operator (an OpenPGP key's
	// fingerprint or ID, or an address), as op=stats shows them.
	Hostname, Nodename, Contact string
	// HTTPAddr and ReconAddr are the HKP and recon addresses op=stats
	// announces (":PORT"); ReconAddr is empty when recon is off.
	HTTPAddr, ReconAddr string
	// Peers, if set, lists the recon peers op=stats shows.
	Peers func(ctx context.Context) []PeerStatus
	// ExtraStats, if set, adds fields to op=stats' JSON under "extra"
	// (the HTML page leaves them out).
	ExtraStats func(ctx context.Context) map[string]any
	// Logger receives the handler's logs (nil: slog.Default()).
	Logger *slog.Logger
	// Registerer, if set, receives the handler's Prometheus collectors.
	Registerer prometheus.Registerer
	// Now returns the current time (nil: time.Now); for expiry flags.
	Now func() time.Time
	// VerifiedEmails, when set, makes email searches answer only keys
	// whose address is verified by mail (hkp.email_lookup = "verified");
	// nil answers every key naming the address, as SKS does. Such
	// answers are not cached: a verification changes them without
	// changing any key.
	VerifiedEmails identity.VerifiedEmailReader
}

func (o Options) withDefaults() Options {
	if o.MaxResults <= 0 {
		o.MaxResults = DefaultMaxResults
	}
	if o.MaxBodySize <= 0 {
		o.MaxBodySize = DefaultMaxBodySize
	}
	if o.MaxHashQueryDigests <= 0 {
		o.MaxHashQueryDigests = DefaultMaxHashQueryDigests
	}
	if o.MaxAnswerSize <= 0 {
		o.MaxAnswerSize = DefaultMaxAnswerSize
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.CacheTTL <= 0 {
		o.CacheTTL = DefaultCacheTTL
	}
	if o.StatsTTL <= 0 {
		o.StatsTTL = DefaultStatsTTL
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Handler serves HKP. Create it with NewHandler, serve it (ServeHTTP, or
// Register on a mux) and run Run for as long as it serves: the answer cache
// is used only while Run listens to the store's change notifications.
// A Handler is safe for concurrent use.
type Handler struct {
	store   Store
	uploads keys.Uploader
	opts    Options
	log     *slog.Logger
	cache   *cache
	stats   *statsCache
	metrics *metrics
	mux     *http.ServeMux
	// changes counts the notifications handled (for tests).
	changes atomic.Int64
	// own holds the terms of keys written on this node until their
	// notifications come back.
	own ownChanges
	// digestReads counts the changed keys a notification had to read
	// from the store (for tests).
	digestReads atomic.Int64
}

// maxOwnChanges bounds ownChanges: past it, the terms remembered first are
// forgotten, and a notification still to come for them reads its key.
const maxOwnChanges = 10_000

// ownChanges remembers, by digest, the terms of the keys written on this
// node (told before the write commits, KeysWriting, and as stored after
// it, KeysChanged), so that the notification of such a write, which this
// node receives too, needs no read of the key from the store: the terms
// of a key are those of the key at its digest. Terms no notification
// takes (a key the write merged into another form, or left unchanged)
// are forgotten oldest first once maxOwnChanges newer ones came.
type ownChanges struct {
	mu sync.Mutex
	m  map[[16]byte]ownTerms
	// order holds the digests in the order they were remembered, a ring
	// of maxOwnChanges slots whose next slot to reuse is order[next].
	order []ownSlot
	next  int
	seq   uint64 // how many were remembered, to tell a slot's entry apart
}

// ownTerms is a remembered key's terms and the seq it was remembered at.
type ownTerms struct {
	kt  *keyTerms
	seq uint64
}

// ownSlot is one slot of ownChanges.order.
type ownSlot struct {
	digest [16]byte
	seq    uint64
}

// termsOf returns k's terms, remembered by k's digest: the terms already
// remembered for it, or computed now.
func (o *ownChanges) termsOf(k *pgp.Key) *keyTerms {
	d := k.Digest()
	o.mu.Lock()
	t, ok := o.m[d]
	o.mu.Unlock()
	if ok {
		return t.kt
	}
	kt := termsOfKey(k) // outside the lock: it parses user IDs
	o.add(d, kt)
	return kt
}

// add remembers kt as the terms of the key at digest, forgetting the
// oldest remembered terms when maxOwnChanges are held.
func (o *ownChanges) add(digest [16]byte, kt *keyTerms) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[[16]byte]ownTerms{}
		o.order = make([]ownSlot, 0, maxOwnChanges)
	}
	o.seq++
	if len(o.order) < maxOwnChanges {
		o.order = append(o.order, ownSlot{digest, o.seq})
	} else {
		old := o.order[o.next]
		if t, ok := o.m[old.digest]; ok && t.seq == old.seq {
			delete(o.m, old.digest)
		}
		o.order[o.next] = ownSlot{digest, o.seq}
		o.next = (o.next + 1) % maxOwnChanges
	}
	o.m[digest] = ownTerms{kt, o.seq}
}

// take returns and forgets the terms remembered for digest.
func (o *ownChanges) take(digest [16]byte) (*keyTerms, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t, ok := o.m[digest]
	delete(o.m, digest)
	return t.kt, ok
}

// remembered is how many keys' terms o holds.
func (o *ownChanges) remembered() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.m)
}

// NewHandler returns a Handler serving HKP lookups from store and
// sending uploads through the upload path uploads (an identity/keys
// Service). The wiring subscribes the Handler to that Service
// (keys.Service.Subscribe), so that a write on this node drops the
// answers it outdates before it returns.
func NewHandler(store Store, uploads keys.Uploader, opts Options) *Handler {
	opts = opts.withDefaults()
	h := &Handler{
		store:   store,
		uploads: uploads,
		opts:    opts,
		log:     opts.Logger,
		metrics: newMetrics(opts.Registerer),
	}
	h.cache = newCache(opts.CacheSize, opts.CacheTTL, opts.Now, h.metrics)
	h.stats = &statsCache{ttl: opts.StatsTTL}
	h.mux = http.NewServeMux()
	h.Register(h.mux)
	return h
}

// KeysWriting remembers the terms of keys about to be written on this
// node, before the write commits: the notification of the write, which
// this node receives too, can come before the write returns
// (KeysChanged), and then needs no read of the key from the store. It
// implements keys.Subscriber.
func (h *Handler) KeysWriting(_ context.Context, ks []*pgp.Key) {
	for _, k := range ks {
		h.own.termsOf(k)
	}
}

// KeysChanged drops this node's answers that keys written on this node
// outdate, before the write that changed them answers: read your own
// writes, whatever path (HKP, the pages, recon) wrote. It implements
// keys.Subscriber.
func (h *Handler) KeysChanged(_ context.Context, changed []*pgp.Key) {
	for _, k := range changed {
		h.cache.invalidate(k.Fingerprint(), h.own.termsOf(k))
	}
}

// routes are the patterns the Handler serves, as Register adds them.
var routes = []string{"GET /pks/lookup", "POST /pks/add", "POST /pks/hashquery"}

// Register adds the HKP routes to mux (so that the caller's request
// metrics see each route's pattern). Each route is wrapped in the
// handler's panic recovery.
func (h *Handler) Register(mux *http.ServeMux) {
	for _, p := range routes {
		mux.Handle(p, h.recover(h.route(p)))
	}
}

func (h *Handler) route(pattern string) http.Handler {
	switch pattern {
	case "GET /pks/lookup":
		return http.HandlerFunc(h.serveLookup)
	case "POST /pks/add":
		return http.HandlerFunc(h.serveAdd)
	case "POST /pks/hashquery":
		return http.HandlerFunc(h.serveHashQuery)
	}
	panic("hkp: unknown route " + pattern)
}

// ServeHTTP serves the HKP routes; other paths get 404, other methods 405.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// Run listens to the store's key changes and keeps the answer cache
// coherent with them, until ctx ends; it then returns nil. While the
// listener is down (it is restarted with package retry's backoff) the
// cache is emptied and not used; it is used again, empty, once the
// listener is back.
func (h *Handler) Run(ctx context.Context) error {
	retry.Follow(ctx, retry.Backoff{}, h.listen, retry.Hooks{
		Ready: h.cache.enable,
		Lost:  h.cache.disable,
		Failed: func(err error, wait time.Duration) {
			h.log.Warn("hkp: key change notifications lost; cache off until they are back", "err", err, "retry_in", wait.String())
		},
	})
	return nil
}

// listen runs one listening session.
func (h *Handler) listen(ctx context.Context, ready chan<- struct{}) error {
	return h.store.WatchKeyChanges(ctx, ready, h.keyChanged)
}

// Listening reports whether the answer cache is in use (Run listens to
// the store's key changes).
func (h *Handler) Listening() bool { return h.cache.enabled.Load() }

// keyChanged is the notification callback.
func (h *Handler) keyChanged(c keys.DigestChange) {
	defer h.changes.Add(1)
	if len(c.Fingerprint) == 0 {
		h.cache.flush()
		return
	}
	// Learn what the key is now, so that answers it may now belong to are
	// dropped too. The lookup runs outside the cache lock.
	var terms *keyTerms
	if c.New != ([16]byte{}) {
		// A write on this node (KeysWriting): its terms are known. The
		// answers it outdated are dropped before it returns; this drops
		// those that readers cached from the old form meanwhile.
		if kt, ok := h.own.take(c.New); ok {
			h.cache.invalidate(c.Fingerprint, kt)
			return
		}
		h.digestReads.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		keys, err := h.store.KeysByDigest(ctx, [][16]byte{c.New})
		cancel()
		switch {
		case err != nil:
			h.log.Warn("hkp: reading a changed key; dropping the whole cache", "fingerprint", fmt.Sprintf("%X", c.Fingerprint), "err", err)
			h.cache.flush()
			return
		case len(keys) == 1:
			terms = termsOfStored(&keys[0])
		default:
			// Changed again (or deleted) since: the later notification
			// carries the newer form, whose terms cover this one's (merging
			// only adds). Drop the answers holding the key now.
			terms = nil
		}
	}
	h.cache.invalidate(c.Fingerprint, terms)
}

// recover answers 500 for a panic that reached it and logs it; every
// expected bad input is answered with a 4xx before this.
func (h *Handler) recover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				h.log.Error("hkp: panic serving request", "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				httpError(w, http.StatusInternalServerError, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// httpError answers a plain-text error. HKP clients show the body to
// their users, so msg says what to do.
func httpError(w http.ResponseWriter, code int, msg string) {
	hd := w.Header()
	hd.Del("Content-Length")
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprintln(w, msg)
}
