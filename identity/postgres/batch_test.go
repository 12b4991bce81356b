package postgres

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/testkit"
)

// While yield says so, one batch runs at a time whatever max allows, and
// once a batch ends the waiting reads start as many batches as there is
// room for again.
func TestBatcherYieldsToWrites(t *testing.T) {
	for _, yielding := range []bool{true, false} {
		var writing atomic.Bool
		writing.Store(yielding)
		release := make(chan struct{})
		var started atomic.Int32
		b := &batcher[int, int]{
			max:      3,
			sameForm: func(a, b int) bool { return a == b },
			yield:    writing.Load,
			run: func(ctx context.Context, batch []*batched[int, int]) {
				started.Add(1)
				<-release
				for _, r := range batch {
					r.answer = r.q * 10
					close(r.done)
				}
			},
		}
		answers := make(chan int, 3)
		for q := range 3 {
			go func() {
				a, err := b.do(context.Background(), q) // three forms: a batch each
				if err != nil {
					t.Error(err)
				}
				answers <- a
			}()
		}
		testkit.Eventually(t, 10*time.Second, "the three reads ran or queued", func() bool {
			return b.inFlight()+b.queued() == 3 && started.Load() == int32(b.inFlight())
		})
		want := 3
		if yielding {
			want = 1
		}
		if n := b.inFlight(); n != want {
			t.Errorf("yielding %v: %d batches running, want %d", yielding, n, want)
		}
		writing.Store(false)
		close(release)
		sum := 0
		for range 3 {
			sum += <-answers
		}
		if sum != 30 || b.inFlight() != 0 || b.queued() != 0 {
			t.Errorf("yielding %v: answers summing to %d, %d batches running, %d queued", yielding, sum, b.inFlight(), b.queued())
		}
	}
}
