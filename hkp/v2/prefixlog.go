// prefixlog.go: the fingerprint prefix log, GET /pks/v2/prefixlog/{date}:
// which fingerprint prefixes changed on a day, so that a client refreshes
// only the keys it holds whose prefix is listed, and tells the server
// nothing about the others.

package v2

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kith-keyserver/kith/identity/keys"
)

// Lifetimes of the prefix log's answers, in its cache and in HTTP caches.
const (
	// pastDayTTL: a past day's log only loses prefixes (a key changed
	// again moves to a later day), so a stale answer costs a client an
	// extra fetch at worst.
	pastDayTTL = time.Hour
	// todayTTL: today's log grows. A client starts its next refresh an
	// hour before its last one (package hkp/refresh), so an answer this
	// old misses nothing.
	todayTTL = time.Minute
	// countTTL is how long the store's key count, which sets the prefix
	// length, is reused.
	countTTL = time.Minute
	// maxCachedDays bounds the cache: a day's answer is at most
	// 16^digits lines, and digits keeps 16^digits below a 16th of the
	// store, so 64 days of a store of 16 million keys (4 digits) hold at
	// most 25 MB.
	maxCachedDays = 64
	// maxConcurrentReads bounds the days read from the store at once: a
	// bulk load's day reads as many rows as it loaded, and a client asking
	// for many days could otherwise evict and reread it in parallel.
	maxConcurrentReads = 2
)

// PrefixLogOptions configure a PrefixLog. The zero value of each field
// means its default.
type PrefixLogOptions struct {
	// MinKeys is the fewest stored keys each prefix names on average
	// (keys.PrefixDigits); 0: keys.DefaultPrefixKeys.
	MinKeys int
	// Registerer, if set, receives the prefix log's metrics.
	Registerer prometheus.Registerer
	// Logger receives failures to read the store (nil: slog.Default()).
	Logger *slog.Logger
	// Now is the clock that says which day is today (nil: time.Now).
	Now func() time.Time
}

// PrefixLog serves GET /pks/v2/prefixlog/{date}, the fingerprint prefix
// log of draft-ietf-openpgp-hkp, as an http.Handler for Options.PrefixLog
// (the Handler adds CORS and the OPTIONS answer).
//
// DATE is a day, YYYY-MM-DD, in UTC. The answer is 200, text/plain, with
// one line (ending CRLF) for each distinct prefix of the primary
// fingerprints of the keys whose last change fell on that day: lower-case
// hex, all lines of one answer the same length, sorted; a day with no
// change, a day before any key and a day after today are answered with an
// empty body. A client learns the prefix length from the lines; it is
// keys.PrefixDigits of the store's size, so it grows with the store. A
// DATE that is not a day is 400. As in Hockeypuck (whose maintainer edits
// the draft), a log is one day's, not everything since: a client asks
// for each day since its last refresh.
//
// The answer holds no user ID, address or whole fingerprint, nothing but
// prefixes that each name many keys, and no key is read to make it. It
// is safe for concurrent use.
type PrefixLog struct {
	store   keys.ChangeLog
	minKeys int
	log     *slog.Logger
	now     func() time.Time
	metrics *prefixLogMetrics

	reads chan struct{} // a slot per store read in progress

	mu      sync.Mutex
	days    map[string]*dayLog // by date and digits
	count   int64
	countAt time.Time
}

// dayLog is one day's answer, or its computation in progress (ready not
// yet closed).
type dayLog struct {
	ready   chan struct{}
	body    []byte
	err     error
	expires time.Time
}

// NewPrefixLog returns a PrefixLog reading store.
func NewPrefixLog(store keys.ChangeLog, opts PrefixLogOptions) *PrefixLog {
	if opts.MinKeys <= 0 {
		opts.MinKeys = keys.DefaultPrefixKeys
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &PrefixLog{store: store, minKeys: opts.MinKeys, log: opts.Logger, now: opts.Now,
		metrics: newPrefixLogMetrics(opts.Registerer), days: map[string]*dayLog{},
		reads: make(chan struct{}, maxConcurrentReads)}
}

// dateRE is a day as the route takes it: exactly YYYY-MM-DD.
var dateRE = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)

// ServeHTTP answers one day's prefix log.
func (p *PrefixLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	date := r.PathValue("date")
	day, err := time.Parse(time.DateOnly, date)
	if !dateRE.MatchString(date) || err != nil {
		p.metrics.request("bad_request", 0)
		Error(w, http.StatusBadRequest, "not a date: the prefix log is by day, YYYY-MM-DD (UTC)")
		return
	}
	now := p.now().UTC()
	today := now.Truncate(24 * time.Hour)
	hd := w.Header()
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("X-Content-Type-Options", "nosniff")
	if day.After(today) {
		// Nothing has changed on a day to come; its log is not final.
		hd.Set("Cache-Control", "no-store")
		p.metrics.request("served", 0)
		return
	}
	ttl := pastDayTTL
	if day.Equal(today) {
		ttl = todayTTL
	}
	body, cached, err := p.day(r.Context(), day, now, ttl)
	if err != nil {
		if r.Context().Err() == nil {
			p.log.Error("hkp v2: prefix log", "date", date, "err", err)
		}
		p.metrics.request("error", 0)
		Error(w, http.StatusInternalServerError, "internal error: try again later")
		return
	}
	outcome := "served"
	if cached {
		outcome = "cached"
	}
	p.metrics.request(outcome, bytes.Count(body, []byte("\r\n")))
	hd.Set("Cache-Control", "public, max-age="+strconv.Itoa(int(ttl/time.Second)))
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
}

// day returns the body of day's log, from the cache when it has a fresh
// one; concurrent requests for a day not cached wait for one reading of
// the store.
func (p *PrefixLog) day(ctx context.Context, day, now time.Time, ttl time.Duration) (body []byte, cached bool, err error) {
	digits, err := p.digits(ctx, now)
	if err != nil {
		return nil, false, err
	}
	key := day.Format(time.DateOnly) + "/" + strconv.Itoa(digits)
	p.mu.Lock()
	if e := p.days[key]; e != nil {
		select {
		case <-e.ready:
			if now.Before(e.expires) {
				p.mu.Unlock()
				return e.body, true, nil
			}
		default:
			p.mu.Unlock()
			select {
			case <-e.ready:
			case <-ctx.Done():
				return nil, false, ctx.Err()
			}
			if errors.Is(e.err, errAbandoned) {
				return p.day(ctx, day, now, ttl)
			}
			if e.err != nil {
				return nil, false, e.err
			}
			return e.body, true, nil
		}
	}
	e := &dayLog{ready: make(chan struct{})}
	p.evictLocked(now)
	p.days[key] = e
	p.mu.Unlock()

	prefixes, err := p.read(ctx, day, digits)
	var b bytes.Buffer
	for _, pre := range prefixes {
		b.WriteString(pre)
		b.WriteString("\r\n")
	}
	p.mu.Lock()
	e.body, e.err, e.expires = b.Bytes(), err, now.Add(ttl)
	if err != nil && p.days[key] == e {
		delete(p.days, key)
	}
	close(e.ready)
	p.mu.Unlock()
	if err != nil {
		return nil, false, err
	}
	return e.body, false, nil
}

// errAbandoned: the request that was to read a day gave up waiting for a
// read slot; a request waiting for its answer reads it itself.
var errAbandoned = errors.New("gave up waiting to read the store")

// read reads one day's prefixes from the store once a read slot is free.
// Once begun, the reading outlives a client that gives up: others may
// wait on it.
func (p *PrefixLog) read(ctx context.Context, day time.Time, digits int) ([]string, error) {
	select {
	case p.reads <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", errAbandoned, ctx.Err())
	}
	defer func() { <-p.reads }()
	return p.store.ChangedPrefixes(context.WithoutCancel(ctx), day, day.AddDate(0, 0, 1), digits)
}

// evictLocked makes room for one more day: expired answers go first,
// then any finished one.
func (p *PrefixLog) evictLocked(now time.Time) {
	if len(p.days) < maxCachedDays {
		return
	}
	for k, e := range p.days {
		select {
		case <-e.ready:
			if !now.Before(e.expires) {
				delete(p.days, k)
			}
		default:
		}
	}
	for k, e := range p.days {
		if len(p.days) < maxCachedDays {
			return
		}
		select {
		case <-e.ready:
			delete(p.days, k)
		default:
		}
	}
}

// digits returns the prefix length for the store's current size.
func (p *PrefixLog) digits(ctx context.Context, now time.Time) (int, error) {
	p.mu.Lock()
	count, at := p.count, p.countAt
	p.mu.Unlock()
	if at.IsZero() || now.Sub(at) >= countTTL || now.Before(at) {
		n, err := p.store.CountKeys(ctx)
		if err != nil {
			return 0, fmt.Errorf("count keys: %w", err)
		}
		p.mu.Lock()
		p.count, p.countAt, count = n, now, n
		p.mu.Unlock()
	}
	d := keys.PrefixDigits(count, p.minKeys)
	p.metrics.setDigits(d)
	return d, nil
}

// prefixLogMetrics are the prefix log's collectors; nil records nothing.
type prefixLogMetrics struct {
	requests *prometheus.CounterVec
	prefixes prometheus.Counter
	digits   prometheus.Gauge
}

func newPrefixLogMetrics(reg prometheus.Registerer) *prefixLogMetrics {
	if reg == nil {
		return nil
	}
	m := &prefixLogMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kith_hkp_prefixlog_requests_total",
			Help: "Prefix log requests by outcome (served from the store, cached, bad_request, error). Each answered one is a step of a refresh that sends no key; the keys clients fetch after it count in kith_hkp_lookups_total.",
		}, []string{"outcome"}),
		prefixes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kith_hkp_prefixlog_prefixes_total",
			Help: "Fingerprint prefixes the prefix log answered, over every request.",
		}),
		digits: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kith_hkp_prefixlog_digits",
			Help: "The prefix log's current prefix length in hex digits, from the store's size.",
		}),
	}
	reg.MustRegister(m.requests, m.prefixes, m.digits)
	return m
}

func (m *prefixLogMetrics) request(outcome string, prefixes int) {
	if m != nil {
		m.requests.WithLabelValues(outcome).Inc()
		m.prefixes.Add(float64(prefixes))
	}
}

func (m *prefixLogMetrics) setDigits(d int) {
	if m != nil {
		m.digits.Set(float64(d))
	}
}
