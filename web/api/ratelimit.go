// ratelimit.go: a per-client limit on how fast challenges are issued, so
// that one client cannot fill the challenge table.

package api

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// limiter is a token bucket per client IP: each client may take burst
// tokens at once and gets rate tokens back per second. It is node-local;
// with several nodes a client's limit is per node.
type limiter struct {
	rate, burst float64
	now         func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// maxBuckets bounds the limiter's memory; past it, full buckets (clients
// that have been quiet) are forgotten.
const maxBuckets = 100_000

func newLimiter(perMinute, burst int, now func() time.Time) *limiter {
	return &limiter{rate: float64(perMinute) / 60, burst: float64(burst), now: now, buckets: map[string]*bucket{}}
}

// allow takes a token for the request's client and reports whether there
// was one.
func (l *limiter) allow(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[host]
	if b == nil {
		if len(l.buckets) >= maxBuckets {
			l.forgetQuiet(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[host] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// forgetQuiet drops the buckets that have refilled.
func (l *limiter) forgetQuiet(now time.Time) {
	for host, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*l.rate >= l.burst {
			delete(l.buckets, host)
		}
	}
}
