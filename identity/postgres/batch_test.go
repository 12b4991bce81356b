package postgres

import (
	"context"
	"errors"
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
			run: func(ctx context.Context, qs []int) ([]int, error) {
				started.Add(1)
				<-release
				answers := make([]int, len(qs))
				for i, q := range qs {
					answers[i] = q * 10
				}
				return answers, nil
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

// A batch's error reaches every read of the batch, and the reads queued
// behind it are answered by the next batch.
func TestBatcherTellsEveryReadItsBatchsError(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	b := &batcher[int, int]{
		max:      1,
		sameForm: func(a, b int) bool { return true },
		run: func(ctx context.Context, qs []int) ([]int, error) {
			if calls.Add(1) == 1 {
				<-release // the first read, alone, holds the one place
				return []int{qs[0]}, nil
			}
			return nil, errors.New("broken statement")
		},
	}
	first := make(chan error, 1)
	go func() {
		_, err := b.do(context.Background(), 0)
		first <- err
	}()
	testkit.Eventually(t, 10*time.Second, "the first read runs", func() bool { return calls.Load() == 1 })
	errs := make(chan error, 4)
	for q := range 4 {
		go func() {
			_, err := b.do(context.Background(), q+1)
			errs <- err
		}()
	}
	testkit.Eventually(t, 10*time.Second, "four reads queued", func() bool { return b.queued() == 4 })
	close(release)
	if err := <-first; err != nil {
		t.Errorf("the first read: %v", err)
	}
	for range 4 {
		if err := <-errs; err == nil || err.Error() != "broken statement" {
			t.Errorf("a queued read: %v, want the batch's error", err)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d statements, want 2 (the four queued reads in one)", n)
	}
}
