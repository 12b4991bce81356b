// parallel.go: reading sequentially and applying the policy on several
// goroutines, results delivered in input order (the bulk-load path).

package pgp

import (
	"context"
	"errors"
	"io"
	"runtime"
)

// Result is one key's outcome in ProcessParallel.
type Result struct {
	// Index is the key's 0-based position in the input (as in ReadError).
	Index int
	// Key is the key after the policy (nil when Err is set).
	Key *Key
	// Report counts what the policy dropped.
	Report Report
	// Err is a *ReadError for a bad key in the input, or the policy's
	// rejection (ErrNoSelfSignature, ...).
	Err error
}

// ProcessParallel reads every key from r, applies the policy to each on
// workers goroutines (GOMAXPROCS when workers <= 0), and calls fn with each
// Result in input order, from one goroutine. It stops at the end of the
// input (returning nil), when fn returns an error (returning it), when ctx
// is done, or on an error that ends the stream (an I/O error,
// ErrTooManyErrors, ErrResyncLimit).
func (p Policy) ProcessParallel(ctx context.Context, r *Reader, workers int, fn func(Result) error) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	type job struct {
		res  Result
		key  *Key
		done chan struct{}
	}
	jobs := make(chan *job, workers*4)
	order := make(chan *job, workers*applyGroupKeys*2)
	var readErr error

	go func() { // reader
		defer close(jobs)
		defer close(order)
		for i := 0; ; i++ {
			k, err := r.Next()
			var re *ReadError
			if err != nil && !errors.As(err, &re) {
				if err != io.EOF {
					readErr = err
				}
				return
			}
			j := &job{res: Result{Index: i, Err: err}, key: k, done: make(chan struct{})}
			if re != nil {
				j.res.Index = re.Index
			}
			select {
			case order <- j:
			case <-ctx.Done():
				return
			}
			if err != nil {
				close(j.done)
				continue
			}
			select {
			case jobs <- j:
			case <-ctx.Done():
				return
			}
		}
	}()
	for w := 0; w < workers; w++ {
		go func() {
			// Each worker checks the keys it takes as groups of up to
			// applyGroupKeys, ending a group early when no key is waiting,
			// so that a result is never held back for want of input.
			g := p.newKeyGroup()
			var group []*job
			finish := func() {
				for i, res := range g.finish() {
					j := group[i]
					j.res.Key, j.res.Report, j.res.Err = res.Key, res.Report, res.Err
					j.key = nil
					close(j.done)
				}
				group = group[:0]
			}
			take := func(j *job) {
				g.addKey(j.key)
				group = append(group, j)
			}
			for j := range jobs {
				take(j)
			more:
				for len(group) < applyGroupKeys {
					select {
					case j, ok := <-jobs:
						if !ok {
							break more
						}
						take(j)
					default:
						break more
					}
				}
				finish()
			}
		}()
	}
	for j := range order {
		select {
		case <-j.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := fn(j.res); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return readErr
}

// applyGroupKeys is how many keys ProcessParallel checks as one group at
// most: their Ed25519 signatures make one batch, whose doublings and
// generator term are then shared by all of them (about a sixth less CPU
// for a bulk load than a batch per key).
const applyGroupKeys = 16
