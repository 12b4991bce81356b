// limit.go: a per-client cap on mail requests.

package vks

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// limiter counts each client IP's requests in fixed one-minute windows.
// It is node-local: with several nodes a client's cap is per node (the
// per-address window, kept in the database, holds across nodes).
type limiter struct {
	perMinute int
	now       func() time.Time

	mu     sync.Mutex
	window time.Time
	counts map[string]int
}

func newLimiter(perMinute int, now func() time.Time) *limiter {
	return &limiter{perMinute: perMinute, now: now, counts: map[string]int{}}
}

// allow counts a request of r's client and reports whether it is within
// the cap.
func (l *limiter) allow(r *http.Request) bool {
	if l.perMinute < 0 {
		return true
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	w := l.now().Truncate(time.Minute)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !w.Equal(l.window) {
		l.window, l.counts = w, map[string]int{}
	}
	l.counts[host]++
	return l.counts[host] <= l.perMinute
}
