// ratelimit.go: the Limiter, its buckets, and the client key.

package ratelimit

import (
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// Limiter counts each client's requests in a token bucket: perMinute
// tokens at most, refilled at perMinute a minute. It is node-local: with
// several nodes a client's budget is per node. A nil *Limiter allows
// every request. It is safe for concurrent use.
type Limiter struct {
	rate  float64 // tokens a second
	burst float64
	now   func() time.Time
	max   int

	mu      sync.Mutex
	buckets map[Client]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// DefaultMaxClients bounds the clients a Limiter remembers (about 100
// bytes each).
const DefaultMaxClients = 100_000

// New returns a Limiter that allows perMinute requests a minute per
// client, at once or spread out. perMinute < 0 means no limit: New
// returns nil, which allows everything; 0 is not a limit and panics (the
// settings refuse it). now is the clock (nil: time.Now).
func New(perMinute int, now func() time.Time) *Limiter {
	switch {
	case perMinute < 0:
		return nil
	case perMinute == 0:
		panic("ratelimit: a limit of 0 requests a minute")
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{rate: float64(perMinute) / 60, burst: float64(perMinute), now: now,
		max: DefaultMaxClients, buckets: map[Client]*bucket{}}
}

// Allow takes one request of r's client (by r.RemoteAddr) from its budget
// and reports whether there was one. When there was not, it sets w's
// Retry-After to the seconds until there is, and the caller answers 429
// in its own form.
func (l *Limiter) Allow(w http.ResponseWriter, r *http.Request) bool {
	if l == nil {
		return true
	}
	ok, wait := l.Take(ClientOf(r.RemoteAddr))
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	}
	return ok
}

// Take takes one request of client from its budget and reports whether
// there was one; when not, also how long until there is.
func (l *Limiter) Take(c Client) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[c]
	if b == nil {
		if len(l.buckets) >= l.max {
			l.evict(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[c] = b
	}
	if now.After(b.last) {
		b.tokens = min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
	}
	b.tokens--
	return true, 0
}

// evict makes room for a client: it forgets the clients whose buckets
// have refilled (as good as new), and when that is not a tenth of the
// limit, arbitrary others too (each then starts with a full budget
// again), so that the sweep runs at most once per tenth of the limit's
// new clients however many addresses a sender has.
func (l *Limiter) evict(now time.Time) {
	for c, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*l.rate >= l.burst {
			delete(l.buckets, c)
		}
	}
	for c := range l.buckets {
		if len(l.buckets) < l.max-l.max/10 {
			break
		}
		delete(l.buckets, c)
	}
}

// Client is whom a budget belongs to: an IPv4 address, or the /64 of an
// IPv6 address.
type Client netip.Prefix

// String is the client as a network ("192.0.2.1/32", "2001:db8::/64").
func (c Client) String() string { return netip.Prefix(c).String() }

// ClientOf is the client of a request's remote address ("host:port", or a
// bare address): the address for IPv4 (an IPv4-mapped IPv6 address is
// IPv4), its /64 for IPv6. An address that does not parse is a client of
// its own, the zero Client, shared by every such request.
func ClientOf(remoteAddr string) Client {
	a, err := netip.ParseAddr(remoteAddr)
	if err != nil {
		ap, err := netip.ParseAddrPort(remoteAddr)
		if err != nil {
			return Client{}
		}
		a = ap.Addr()
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return Client(netip.PrefixFrom(a, 32))
	}
	p, _ := a.Prefix(64)
	return Client(p)
}
