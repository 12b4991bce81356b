// A limiter for log lines that anyone can cause (a connection from an
// address that is not a peer), so that they cannot flood the log.

package recon

import (
	"sync"
	"time"
)

// overflowKey stands for every key that arrives while the limiter
// already tracks its maximum of keys.
const overflowKey = "\x00others"

// logLimiter allows one log line per key (e.g. a remote IP) per period
// and counts the lines it suppressed meanwhile. It tracks at most max keys;
// when that many were seen within a period, the keys beyond them share one
// allowance, so its memory stays bounded whatever the number of remote
// addresses. It is safe for concurrent use.
type logLimiter struct {
	every time.Duration
	max   int
	now   func() time.Time

	mu    sync.Mutex
	last  map[string]limitEntry
	swept time.Time // when expired keys were last forgotten
}

type limitEntry struct {
	at         time.Time // when a line was last allowed
	suppressed int       // lines refused since
}

func newLogLimiter(every time.Duration, max int, now func() time.Time) *logLimiter {
	return &logLimiter{every: every, max: max, now: now, last: make(map[string]limitEntry)}
}

// allow reports whether a line for key may be written now and, if so, how
// many lines for key (or for the keys over the maximum) it suppressed
// since the last one it allowed.
func (l *logLimiter) allow(key string) (bool, int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.last[key]
	if !ok && len(l.last) >= l.max {
		if now.Sub(l.swept) >= l.every {
			// At most once a period, so that a flood of new keys costs
			// no more than a map lookup each.
			l.sweep(now)
		}
		if len(l.last) >= l.max {
			key = overflowKey
			e, ok = l.last[key]
		}
	}
	if ok && now.Sub(e.at) < l.every {
		e.suppressed++
		l.last[key] = e
		return false, 0
	}
	l.last[key] = limitEntry{at: now}
	return true, e.suppressed
}

// sweep forgets the keys whose period is over; l.mu must be held.
func (l *logLimiter) sweep(now time.Time) {
	l.swept = now
	for k, e := range l.last {
		if now.Sub(e.at) >= l.every {
			delete(l.last, k)
		}
	}
}
