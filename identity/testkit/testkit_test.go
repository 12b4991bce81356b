package testkit

import (
	"testing"
	"time"
)

func TestPollWaitsForTheCondition(t *testing.T) {
	calls := 0
	if !Poll(time.Minute, func() bool { calls++; return calls == 4 }) {
		t.Fatal("Poll gave up on a condition that came true")
	}
	if calls != 4 {
		t.Fatalf("cond called %d times, want 4", calls)
	}
}

func TestPollGivesUpAfterItsTime(t *testing.T) {
	if Poll(10*time.Millisecond, func() bool { return false }) {
		t.Fatal("Poll reported a condition that never held")
	}
}

func TestToolFindsTheFirstInstalled(t *testing.T) {
	// sh is in every image the tests run in.
	if p := Tool(t, "kith-no-such-tool", "sh"); p == "" {
		t.Fatal("Tool found no sh")
	}
}
