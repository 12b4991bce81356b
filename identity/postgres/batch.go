package postgres

// batch.go: reads that wait for a connection, answered together. A read
// that finds every connection of the pool busy waits in a queue, and the
// next free connection answers every waiting read of its form with one
// statement: PostgreSQL spends most of a read of one key on the statement
// around it (the round trip, binding, starting and ending the executor),
// not on the key, and so does Go. In pgbench, one statement for eight
// keys read three times as many keys a second as eight statements. A read
// that finds a connection free runs at once, alone: nothing waits to
// gather a batch.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// maxBatch bounds the reads of one statement.
	maxBatch = 64
	// batchTimeout bounds the statement of a batch of several reads: no
	// one request's cancellation stops it. A read alone runs under its
	// own context.
	batchTimeout = 30 * time.Second
)

// batcher runs reads of type Q, answered by A, in batches of one form
// (sameForm) while they wait for a connection; run answers a batch with
// one statement: the answer of each read, in order, or an error for all.
type batcher[Q, A any] struct {
	mu       sync.Mutex
	queue    []*batched[Q, A]
	running  int // batches in flight
	max      int // batches at once: the pool's connections
	sameForm func(a, b Q) bool
	run      func(ctx context.Context, qs []Q) ([]A, error)
	// yield, when set and true, lets one batch run at a time, whatever
	// max says: the store's key writes are running, and they share the
	// cores with the reads.
	yield func() bool
	// reads and batches count what ran, for the metrics.
	reads, batches atomic.Int64
}

// batched is one read of a batcher: runBatch sets answer or err, then
// closes done.
type batched[Q, A any] struct {
	waiter
	q      Q
	answer A
	err    error
}

// waiter is a caller of a queue whose callers take turns to lead: a
// leader does the work of those waiting (batcher's reads, keyGroup's
// writes) until its own is done, then hands its place on.
type waiter struct {
	taken bool          // a leader has this caller's work
	lead  chan struct{} // closed to make this caller a leader
	done  chan struct{} // closed when this caller's work is done
}

func newWaiter() waiter {
	return waiter{lead: make(chan struct{}), done: make(chan struct{})}
}

// leading reports whether w was made a leader. A caller whose work another
// leader did may have been handed a leader's place just before its work
// was taken; it must then leave as a leader, giving the place back, or
// the count of leaders would stay one too high and, with no room for a
// leader, callers would wait for ever.
func (w *waiter) leading() bool { return closed(w.lead) }

// await waits, for a caller not made a leader when it queued, until
// another leader did its work (false), it is made a leader (true), or ctx
// ends while its work is still queued: then, with mu (the queue's lock)
// held, leave removes it from the queue, giveBack returns a leader's
// place it was handed meanwhile, and await returns ctx's error. Work a
// leader has taken is waited for whatever ctx says.
func (w *waiter) await(ctx context.Context, mu *sync.Mutex, leave, giveBack func()) (bool, error) {
	select {
	case <-w.done:
		return w.leading(), nil
	case <-w.lead:
		return true, nil
	case <-ctx.Done():
	}
	mu.Lock()
	if !w.taken {
		leave()
		if w.leading() {
			giveBack()
		}
		mu.Unlock()
		return false, ctx.Err()
	}
	mu.Unlock()
	select {
	case <-w.done:
		return w.leading(), nil
	case <-w.lead:
		return true, nil
	}
}

// closed reports whether ch is closed.
func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// do runs q, with the reads waiting beside it when it has to wait too.
func (b *batcher[Q, A]) do(ctx context.Context, q Q) (A, error) {
	r := &batched[Q, A]{waiter: newWaiter(), q: q}
	b.mu.Lock()
	b.queue = append(b.queue, r)
	lead := b.room()
	if lead {
		b.running++
		close(r.lead)
	}
	b.mu.Unlock()
	if !lead {
		lead, err := r.await(ctx, &b.mu, func() { b.remove(r) }, func() {
			b.running--
			b.handOff()
		})
		if err != nil {
			var none A
			return none, err
		}
		if !lead {
			return r.answer, r.err
		}
	}
	// This caller runs batches until its own read is answered, then gives
	// its place to the first caller still waiting.
	for {
		batch := b.take(r)
		if len(batch) == 0 {
			break // another batch has this caller's read
		}
		b.reads.Add(int64(len(batch)))
		b.batches.Add(1)
		if len(batch) == 1 && batch[0] == r {
			b.runBatch(ctx, batch) // alone: its own context
		} else {
			bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
			b.runBatch(bctx, batch)
			cancel()
		}
		if closed(r.done) {
			break
		}
	}
	b.mu.Lock()
	b.running--
	b.handOff()
	b.mu.Unlock()
	<-r.done
	return r.answer, r.err
}

// runBatch answers batch with run and tells each read its answer, or
// run's error.
func (b *batcher[Q, A]) runBatch(ctx context.Context, batch []*batched[Q, A]) {
	qs := make([]Q, len(batch))
	for i, r := range batch {
		qs[i] = r.q
	}
	answers, err := b.run(ctx, qs)
	if err == nil && len(answers) != len(batch) {
		err = fmt.Errorf("postgres: %d answers for %d reads", len(answers), len(batch))
	}
	for i, r := range batch {
		if err != nil {
			r.err = err
		} else {
			r.answer = answers[i]
		}
		close(r.done)
	}
}

// take removes the next batch from the queue: own, when still queued,
// and the reads of its form; otherwise those of the first read's form.
func (b *batcher[Q, A]) take(own *batched[Q, A]) []*batched[Q, A] {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		return nil
	}
	form := b.queue[0]
	if !own.taken {
		form = own
	}
	var batch, rest []*batched[Q, A]
	for _, r := range b.queue {
		if len(batch) < maxBatch && b.sameForm(r.q, form.q) {
			r.taken = true
			batch = append(batch, r)
		} else {
			rest = append(rest, r)
		}
	}
	b.queue = rest
	return batch
}

// remove drops r from the queue; b.mu is held.
func (b *batcher[Q, A]) remove(r *batched[Q, A]) {
	for i, x := range b.queue {
		if x == r {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			return
		}
	}
}

// room reports whether another batch may run; b.mu is held.
func (b *batcher[Q, A]) room() bool {
	if b.yield != nil && b.yield() {
		return b.running < 1
	}
	return b.running < max(b.max, 1)
}

// handOff makes the first waiting read run the next batch when there is
// room; b.mu is held.
func (b *batcher[Q, A]) handOff() {
	for _, r := range b.queue {
		if !b.room() {
			return
		}
		if closed(r.lead) {
			continue
		}
		b.running++
		close(r.lead)
	}
}

// queued is how many reads wait for a batch.
func (b *batcher[Q, A]) queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// inFlight is how many batches run.
func (b *batcher[Q, A]) inFlight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running
}
