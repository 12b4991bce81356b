package postgres

// lookups.go: lookups by primary fingerprint, the commonest read (gpg
// --recv-keys), answered together. A lookup that finds every connection
// of the pool busy waits in a queue, and the next free connection answers
// every lookup waiting (of one form) with one statement: PostgreSQL spends
// most of a one-key lookup on the statement around it (the round trip,
// binding, starting and ending the executor), not on the key, and so does
// Go. In pgbench, one statement for eight keys read three times as many
// keys a second as eight statements. A lookup that finds a connection
// free runs at once, alone: nothing waits to gather a batch.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kith-keyserver/kith/identity/keys"
)

const (
	// maxLookupBatch bounds the fingerprints of one statement.
	maxLookupBatch = 64
	// lookupBatchTimeout bounds a batch's statement: it answers several
	// requests, so no one request's cancellation stops it.
	lookupBatchTimeout = 30 * time.Second
)

// lookupGroup is the queue of lookups waiting for a connection.
type lookupGroup struct {
	mu      sync.Mutex
	queue   []*pendingLookup
	running int // batches in flight
	max     int // batches at once: the pool's connections
	// lookups and batches count what ran, for the metrics.
	lookups, batches atomic.Int64
}

// pendingLookup is one lookup by primary fingerprint.
type pendingLookup struct {
	fp       []byte
	userIDs  bool  // read the user IDs too
	readUpTo int64 // read the packets when at most this many bytes
	taken    bool  // a batch has it
	lead     chan struct{}
	done     chan struct{} // closed when key, found and err are set
	key      keys.Stored
	found    bool
	err      error
}

// sameForm reports whether l and m can share a statement.
func (l *pendingLookup) sameForm(m *pendingLookup) bool {
	return l.userIDs == m.userIDs && l.readUpTo == m.readUpTo
}

// leading reports whether l was made to run a batch.
func (l *pendingLookup) leading() bool {
	select {
	case <-l.lead:
		return true
	default:
		return false
	}
}

// lookupPrimary reads the one key whose primary fingerprint is fp when no
// other key has fp as a subkey's (primaryFingerprintsSQL), with its user
// IDs or not, with its packets when they are at most readUpTo bytes;
// found is false when fp names no key so (none, or a subkey), for the
// general statement to answer.
func (s *Store) lookupPrimary(ctx context.Context, fp []byte, userIDs bool, readUpTo int64) (key keys.Stored, found bool, err error) {
	l := &pendingLookup{fp: fp, userIDs: userIDs, readUpTo: readUpTo, lead: make(chan struct{}), done: make(chan struct{})}
	g := &s.lookups
	g.mu.Lock()
	g.queue = append(g.queue, l)
	lead := g.room()
	if lead {
		g.running++
		close(l.lead)
	}
	g.mu.Unlock()
	if !lead {
		select {
		case <-l.done:
			if !l.leading() {
				return l.key, l.found, l.err
			}
		case <-l.lead:
		case <-ctx.Done():
			g.mu.Lock()
			if !l.taken {
				g.remove(l)
				if l.leading() {
					// Made a leader meanwhile: give the place on.
					g.running--
					g.handOff()
				}
				g.mu.Unlock()
				return keys.Stored{}, false, ctx.Err()
			}
			g.mu.Unlock()
			select {
			case <-l.done:
				if !l.leading() {
					return l.key, l.found, l.err
				}
			case <-l.lead:
			}
		}
	}
	// This caller runs batches until its own lookup is answered, then
	// gives its place to the first caller still waiting.
	for {
		batch := g.take(l)
		if len(batch) == 0 {
			break // another batch has this caller's lookup
		}
		s.runLookups(ctx, batch)
		if l.answered() {
			break
		}
	}
	g.mu.Lock()
	g.running--
	g.handOff()
	g.mu.Unlock()
	<-l.done
	return l.key, l.found, l.err
}

// answered reports whether l's batch has answered it.
func (l *pendingLookup) answered() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// take removes the next batch from the queue: own, when still queued,
// and the lookups of its form; otherwise those of the first lookup's form.
func (g *lookupGroup) take(own *pendingLookup) []*pendingLookup {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 {
		return nil
	}
	form := g.queue[0]
	if !own.taken {
		form = own
	}
	var batch, rest []*pendingLookup
	for _, l := range g.queue {
		if len(batch) < maxLookupBatch && l.sameForm(form) {
			l.taken = true
			batch = append(batch, l)
		} else {
			rest = append(rest, l)
		}
	}
	g.queue = rest
	return batch
}

// remove drops l from the queue; g.mu is held.
func (g *lookupGroup) remove(l *pendingLookup) {
	for i, x := range g.queue {
		if x == l {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			return
		}
	}
}

// room reports whether another batch may run; g.mu is held.
func (g *lookupGroup) room() bool { return g.running < max(g.max, 1) }

// handOff makes the first waiting lookup run the next batch when there
// is room; g.mu is held.
func (g *lookupGroup) handOff() {
	if !g.room() {
		return
	}
	for _, l := range g.queue {
		if l.leading() {
			continue
		}
		g.running++
		close(l.lead)
		return
	}
}

// runLookups answers a batch of lookups of one form with one statement
// and tells each its outcome. Lookups of the same fingerprint share the
// key read.
func (s *Store) runLookups(ctx context.Context, batch []*pendingLookup) {
	g := &s.lookups
	g.lookups.Add(int64(len(batch)))
	g.batches.Add(1)
	fps := make([][]byte, 0, len(batch))
	seen := make(map[string]bool, len(batch))
	for _, l := range batch {
		if !seen[string(l.fp)] {
			seen[string(l.fp)] = true
			fps = append(fps, l.fp)
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookupBatchTimeout)
	defer cancel()
	found, err := s.scanKeys(ctx, keys.Query{NoUserIDs: !batch[0].userIDs}, primaryFingerprintsSQL(batch[0].userIDs), fps, batch[0].readUpTo)
	byFP := make(map[string]keys.Stored, len(found))
	for _, k := range found {
		byFP[string(k.Fingerprint)] = k
	}
	for _, l := range batch {
		if err != nil {
			l.err = fmt.Errorf("read keys by fingerprint: %w", err)
		} else {
			l.key, l.found = byFP[string(l.fp)]
		}
		close(l.done)
	}
}

// primaryFingerprintsSQL is the statement that reads, for each
// fingerprint of the array $1, the one key whose primary fingerprint it
// is when no other key has it as a subkey's, with its packets when they
// are at most $2 bytes. The array reaches the plan only through an
// InitPlan: PostgreSQL then keeps one generic plan, where it planned
// every call anew for the array as a parameter (~0.5 ms, more than the
// statement's run).
func primaryFingerprintsSQL(userIDs bool) string {
	columns, join := readColumns("octet_length(k.packets)", userIDs)
	return `SELECT ` + columns + `
			FROM unnest((SELECT $1::bytea[])) AS f(fp) JOIN keys k ON k.fingerprint = f.fp ` + join + `
			WHERE NOT EXISTS (SELECT 1 FROM subkeys s WHERE s.fingerprint = f.fp AND s.key_ref <> k.id)`
}
