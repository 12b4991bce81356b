package retry

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestFollowCallsReadyOnceListeningAndLostAfterEachSession(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lost := errors.New("connection lost")
	var (
		mu     sync.Mutex
		events []string
	)
	record := func(e string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	readyRan := make(chan struct{}, 3)
	sessions := 0
	Follow(ctx, Backoff{Min: time.Millisecond, Healthy: time.Hour}, func(ctx context.Context, ready chan<- struct{}) error {
		sessions++
		switch sessions {
		case 1:
			// Fails before it listens: no Ready.
			return lost
		case 2:
			close(ready)
			<-readyRan // a Lost now must come after that Ready
			return lost
		default:
			close(ready)
			cancel()
			<-ctx.Done()
			return ctx.Err()
		}
	}, Hooks{
		Ready: func() { record("ready"); readyRan <- struct{}{} },
		Lost:  func() { record("lost") },
		Failed: func(err error, wait time.Duration) {
			if !errors.Is(err, lost) {
				t.Errorf("Failed got %v, want %v", err, lost)
			}
			record("failed")
		},
	})
	// The third session ends with ctx: Lost, but no Failed. Its Ready
	// may or may not have run, as ctx ended at once.
	want := []string{"lost", "failed", "ready", "lost", "failed"}
	if len(events) < len(want) || !slices.Equal(events[:len(want)], want) {
		t.Fatalf("hooks called %v, want %v then the last session's", events, want)
	}
	if last := events[len(events)-1]; last != "lost" {
		t.Fatalf("hooks called %v: the last session did not end with Lost", events)
	}
}
