package retry

import (
	"context"
	"time"
)

// Listen is one listening session on a notification channel (a
// PostgreSQL LISTEN, for Kith's stores): it closes ready once it listens,
// so that nothing notified from then on is missed, and returns when the
// listening stops, with the reason, or when ctx ends.
type Listen func(ctx context.Context, ready chan<- struct{}) error

// Hooks say what a follower does around each listening session. Any of
// them may be nil.
type Hooks struct {
	// Ready is called once a session listens (its Listen closed ready).
	// It runs while the session goes on, so notifications may arrive
	// before or while it runs.
	Ready func()
	// Lost is called when a session ends, whether or not it became
	// ready, and never while Ready runs: a cache that Ready enables and
	// Lost disables is therefore never left enabled by a late Ready.
	Lost func()
	// Failed is called after Lost, unless ctx has ended, with the
	// session's error and the wait before the next session, so that the
	// caller can log it.
	Failed func(err error, wait time.Duration)
}

// Follow keeps a listening session going until ctx ends: it calls listen,
// and when listen returns it calls it again after b's backoff (see Loop).
// It calls h.Ready once each session listens and h.Lost once it ends,
// which is how Kith's caches stay coherent with another node's writes:
// they are used only while their invalidations are being heard. Follow
// returns when ctx ends.
func Follow(ctx context.Context, b Backoff, listen Listen, h Hooks) {
	Loop(ctx, b, func(ctx context.Context) error {
		return session(ctx, listen, h)
	}, h.Failed)
}

// session runs one listening session with its Ready and Lost hooks.
func session(ctx context.Context, listen Listen, h Hooks) error {
	ready := make(chan struct{})
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-ready:
			if h.Ready != nil {
				h.Ready()
			}
		case <-sctx.Done():
		}
	}()
	err := listen(sctx, ready)
	cancel()
	<-done // Lost comes after any Ready
	if h.Lost != nil {
		h.Lost()
	}
	return err
}
