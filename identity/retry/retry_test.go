package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBackoffDoublesUpToMaxAndResets(t *testing.T) {
	b := Backoff{Min: time.Second, Max: 5 * time.Second}
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next())
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits %v, want %v", got, want)
		}
	}
	b.Reset()
	if d := b.Next(); d != time.Second {
		t.Fatalf("after Reset: %v, want 1s", d)
	}
}

func TestLoopReportsEachFailureAndStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	boom := errors.New("connection lost")
	runs := 0
	var waits []time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		Loop(ctx, Backoff{Min: time.Millisecond, Max: 4 * time.Millisecond, Healthy: time.Hour},
			func(ctx context.Context) error {
				runs++
				if runs == 5 {
					cancel()
					return ctx.Err()
				}
				return boom
			},
			func(err error, wait time.Duration) {
				if !errors.Is(err, boom) {
					t.Errorf("failed got %v", err)
				}
				waits = append(waits, wait)
			})
	}()
	<-done
	if runs != 5 {
		t.Fatalf("run called %d times, want 5", runs)
	}
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond}
	if len(waits) != len(want) {
		t.Fatalf("failed called with waits %v, want %v (none after the context ended)", waits, want)
	}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
}

func TestLoopResetsAfterAHealthyRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs := 0
	var waits []time.Duration
	Loop(ctx, Backoff{Min: time.Millisecond, Max: time.Second, Healthy: 20 * time.Millisecond},
		func(ctx context.Context) error {
			runs++
			switch runs {
			case 3:
				// A long, healthy session: the next wait starts over.
				<-time.After(25 * time.Millisecond)
			case 4:
				cancel()
			}
			return errors.New("lost")
		},
		func(err error, wait time.Duration) { waits = append(waits, wait) })
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, time.Millisecond}
	if len(waits) != len(want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
}

func TestBackoffJitterLengthensWithinBounds(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 50 {
		b := Backoff{Min: time.Second, Max: 8 * time.Second, Jitter: 0.5}
		var prev time.Duration
		for i, base := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second} {
			d := b.Next()
			if d < base || d >= base+base/2 {
				t.Fatalf("wait %d = %v, want in [%v, %v)", i, d, base, base+base/2)
			}
			if i < 4 && d <= prev {
				t.Fatalf("wait %d = %v, not longer than the one before (%v)", i, d, prev)
			}
			prev = d
			if i == 0 {
				seen[d] = true
			}
		}
	}
	if len(seen) < 2 {
		t.Errorf("50 first waits were all %v: no jitter", seen)
	}
}
