// listen.go: the change notifications, in process: every write sends one
// keys.DigestChange per changed key to every listener, in commit order.

package inprocess

import (
	"context"
	"fmt"
	"sync"

	"github.com/kith-keyserver/kith/identity/keys"
)

// listener is one ListenKeyChanges call: a queue that writes append to
// without waiting, and that the call drains in order.
type listener struct {
	mu    sync.Mutex
	queue []keys.DigestChange
	wake  chan struct{} // holds a token when the queue may be non-empty
}

// notifyLocked queues cs for every listener; s.mu is held, so listeners
// see changes in the order the writes made them.
func (s *Store) notifyLocked(cs []keys.DigestChange) {
	if len(cs) == 0 {
		return
	}
	for l := range s.listeners {
		l.mu.Lock()
		l.queue = append(l.queue, cs...)
		l.mu.Unlock()
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// ListenKeyChanges calls fn, from one goroutine, for every key change
// made after it starts listening, until ctx ends; it then returns ctx's
// error.
func (s *Store) ListenKeyChanges(ctx context.Context, fn func(keys.DigestChange)) error {
	return s.WatchKeyChanges(ctx, nil, fn)
}

// WatchKeyChanges is ListenKeyChanges that closes ready (if not nil) once
// it listens.
func (s *Store) WatchKeyChanges(ctx context.Context, ready chan<- struct{}, fn func(keys.DigestChange)) error {
	l := &listener{wake: make(chan struct{}, 1)}
	s.mu.Lock()
	s.listeners[l] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	if ready != nil {
		close(ready)
	}
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("inprocess: listen: %w", ctx.Err())
		case <-l.wake:
		}
		l.mu.Lock()
		cs := l.queue
		l.queue = nil
		l.mu.Unlock()
		for _, c := range cs {
			fn(c)
		}
	}
}
