package postgres

import (
	"context"
	"fmt"
	"sync"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
)

// Group commit of single-key writes: AddKey calls that arrive while
// earlier ones are being written wait in a queue, and the next writer
// takes everything queued (up to maxGroupKeys distinct fingerprints) into
// one AddKeys transaction. Every caller still returns only after the
// transaction holding its key has committed, so an answered upload is as durable as before; what the
// queue saves is the round trips, the transaction overhead and, above
// all, the WAL flush each key would otherwise wait for on its own.
const (
	// maxGroupWriters is how many group transactions run at once: one
	// being flushed while the next is built keeps both cores busy without
	// taking the whole connection pool from readers.
	maxGroupWriters = 2
	// maxGroupKeys bounds one group transaction (below smallBatch, so a
	// group takes the few-round-trip INSERT path).
	maxGroupKeys = 32
	// secondGroupKeys is how many keys must be waiting before a second
	// writer starts beside a running one: each transaction costs the
	// database ~8 statements whatever it holds, so keys that a second
	// writer would take a few at a time are better left to the next
	// group of the first.
	secondGroupKeys = 4
)

// keyGroup is the queue of AddKey calls waiting for a writer.
type keyGroup struct {
	mu      sync.Mutex
	queue   []*queuedKey
	writers int // group transactions running
}

// queuedKey is one AddKey call.
type queuedKey struct {
	waiter  // leaders are writers; done is closed when written and err are set
	key     *pgp.Key
	fp      string
	written keys.Written
	err     error
}

// AddKey merges key, which has been through the policy, into the store:
// a new key is inserted; a known key is merged with the stored one
// (Policy.Merge) and rewritten only when the merge changed it. Key,
// user IDs and subkeys go in one transaction, which may also hold the
// keys of concurrent AddKey calls; AddKey returns once it has committed,
// with the outcome and, when it wrote, the key as stored.
func (s *Store) AddKey(ctx context.Context, key *pgp.Key) (keys.Written, error) {
	if len(key.Fingerprint()) == 0 {
		return keys.Written{}, fmt.Errorf("postgres: add key: no primary key packet")
	}
	if err := ctx.Err(); err != nil {
		return keys.Written{}, fmt.Errorf("postgres: add key: %w", err)
	}
	q := &queuedKey{waiter: newWaiter(), key: key, fp: string(key.Fingerprint())}
	g := &s.group
	g.mu.Lock()
	g.queue = append(g.queue, q)
	lead := g.roomForWriter()
	if lead {
		// Closed lead marks every writer, so that handOff never counts
		// this one twice while its key still waits in the queue (a
		// second upload of a fingerprint in the group being written).
		g.writers++
		close(q.lead)
	}
	g.mu.Unlock()
	if !lead {
		lead, err := q.await(ctx, &g.mu, func() { g.remove(q) }, func() {
			g.writers--
			g.handOff()
		})
		if err != nil {
			return keys.Written{}, fmt.Errorf("postgres: add key: %w", err)
		}
		if !lead {
			return q.written, q.err
		}
	}
	// This caller writes groups until its own key is written, then hands
	// the writer's place to the first caller still waiting.
	for {
		group := g.take()
		if len(group) > 0 {
			s.writeGroup(context.WithoutCancel(ctx), group)
		}
		select {
		case <-q.done:
		default:
			if len(group) > 0 {
				continue
			}
			// Another writer has this caller's key in flight.
		}
		g.mu.Lock()
		g.writers--
		g.handOff()
		g.mu.Unlock()
		<-q.done
		return q.written, q.err
	}
}

// take removes the next group from the queue: callers in arrival order,
// one per fingerprint (a second upload of the same key waits for the
// next group, so that each caller learns what its own upload changed).
func (g *keyGroup) take() []*queuedKey {
	g.mu.Lock()
	defer g.mu.Unlock()
	var group, rest []*queuedKey
	seen := map[string]bool{}
	for _, q := range g.queue {
		if len(group) == maxGroupKeys || seen[q.fp] {
			rest = append(rest, q)
			continue
		}
		seen[q.fp] = true
		q.taken = true
		group = append(group, q)
	}
	g.queue = rest
	return group
}

// remove drops q from the queue; g.mu is held.
func (g *keyGroup) remove(q *queuedKey) {
	for i, x := range g.queue {
		if x == q {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			return
		}
	}
}

// roomForWriter reports whether another writer may start: the first
// always, a second only for a queue worth a group of its own; g.mu is
// held.
func (g *keyGroup) roomForWriter() bool {
	return g.writers == 0 || (g.writers < maxGroupWriters && len(g.queue) >= secondGroupKeys)
}

// handOff makes the first waiting caller a writer when there is room;
// g.mu is held.
func (g *keyGroup) handOff() {
	if !g.roomForWriter() {
		return
	}
	for _, q := range g.queue {
		if q.leading() {
			continue
		}
		g.writers++
		close(q.lead)
		return
	}
}

// writeGroup stores a group in one transaction and tells each caller its
// outcome. When the transaction fails and the group holds more than one
// key, each key is retried alone, so that one key the store refuses
// fails only its own upload.
func (s *Store) writeGroup(ctx context.Context, group []*queuedKey) {
	if len(group) == 0 {
		return
	}
	keys := make([]*pgp.Key, len(group))
	for i, q := range group {
		keys[i] = q.key
	}
	changes, err := s.AddKeys(ctx, keys)
	if err != nil && len(group) > 1 {
		for _, q := range group {
			s.writeGroup(ctx, []*queuedKey{q})
		}
		return
	}
	for i, q := range group {
		if err != nil {
			q.err = err
		} else {
			q.written = changes[i]
		}
		close(q.done)
	}
}
