// Package retry holds Kith's one way of coming back after a fault: a
// capped, doubling backoff, the loop that reruns a long-lived task (a
// LISTEN session, the embedded PostgreSQL server) with it, and Follow, the
// loop that keeps a notification listener going and says when it listens.
// Every reconnecting part of Kith (the HKP and API caches' listeners, the
// recon tree's follower, recon gossip, the embedded cluster's supervisor)
// uses this package, so they all back off alike.
//
// It sits below the store, not in it, so that frontends can use it without
// importing the store. It does not decide what a failure means: the
// caller's run function reports it, and the caller's failed function logs
// it.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Default waits: the first retry comes after Min, each later one waits
// twice as long, up to Max. A run that lasted Healthy or longer counts as
// a recovery, and the next wait starts again from Min.
const (
	DefaultMin     = 100 * time.Millisecond
	DefaultMax     = 10 * time.Second
	DefaultHealthy = time.Minute
)

// Backoff says how long to wait between attempts. The zero value uses the
// defaults above.
type Backoff struct {
	// Min is the first wait; 0 means DefaultMin.
	Min time.Duration
	// Max caps the wait; 0 means DefaultMax.
	Max time.Duration
	// Healthy is how long a run must last for the backoff to reset; 0
	// means DefaultHealthy.
	Healthy time.Duration
	// Jitter, between 0 and 1, lengthens each wait by a random fraction
	// of itself up to Jitter, so that waiters that failed together (the
	// nodes of a pool whose peer went down) do not come back in step.
	// Min and Max bound the wait before the jitter: with Jitter 0.5 the
	// first wait is from Min to 1.5 Min. 0 means no jitter.
	Jitter float64

	next time.Duration
}

func (b *Backoff) min() time.Duration {
	if b.Min > 0 {
		return b.Min
	}
	return DefaultMin
}

func (b *Backoff) max() time.Duration {
	if b.Max > 0 {
		return b.Max
	}
	return DefaultMax
}

func (b *Backoff) healthy() time.Duration {
	if b.Healthy > 0 {
		return b.Healthy
	}
	return DefaultHealthy
}

// Next returns the wait before the next attempt (jittered) and doubles
// the one after.
func (b *Backoff) Next() time.Duration {
	if b.next == 0 {
		b.next = b.min()
	}
	d := b.next
	b.next = min(2*b.next, b.max())
	if j := min(b.Jitter, 1); j > 0 {
		d += time.Duration(rand.Float64() * j * float64(d))
	}
	return d
}

// Reset makes the next wait Min again.
func (b *Backoff) Reset() { b.next = 0 }

// Wait sleeps for d or until ctx ends; it reports whether ctx is still
// live.
func Wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Loop calls run until ctx ends, waiting by b between calls. After each
// call that returns while ctx is live it calls failed (if not nil) with
// run's error and the wait before the next call, so that the caller can
// log the attempt. A call that lasted b.Healthy or longer resets the
// backoff. Loop returns when ctx ends.
func Loop(ctx context.Context, b Backoff, run func(ctx context.Context) error, failed func(err error, wait time.Duration)) {
	for ctx.Err() == nil {
		start := time.Now()
		err := run(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) >= b.healthy() {
			b.Reset()
		}
		wait := b.Next()
		if failed != nil {
			failed(err, wait)
		}
		if !Wait(ctx, wait) {
			return
		}
	}
}
