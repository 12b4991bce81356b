package testkit

import (
	"net"
	"strconv"
	"strings"
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

func TestAnyToolFindsTheFirstInstalled(t *testing.T) {
	// sh and cat are in every image the tests run in.
	if p := AnyTool(t, "kith-no-such-tool", "sh"); p == "" {
		t.Fatal("AnyTool found no sh")
	}
	if p := Tool(t, "sh", "cat"); p == "" || !strings.HasSuffix(p, "/sh") {
		t.Fatalf("Tool(sh, cat) = %q, want the path of sh", p)
	}
}

func TestToolSkipsWhenOneIsMissing(t *testing.T) {
	if CI() {
		t.Skip("under CI=true a missing tool fails the test")
	}
	var skipped bool
	t.Run("sub", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Tool(t, "sh", "kith-no-such-tool")
	})
	if !skipped {
		t.Fatal("Tool with one tool missing did not skip")
	}
}

// TestFreePortIsBelowTheEphemeralRange: FreePort's ports come from below
// the range the kernel hands out for port-0 listeners and outgoing
// connections, and are free to bind.
func TestFreePortIsBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	for range 20 {
		port := FreePort(t)
		if port < freePortFloor || port >= low {
			t.Fatalf("FreePort gave %d, outside [%d, %d)", port, freePortFloor, low)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d: %v", port, err)
		}
		l.Close()
	}
}
