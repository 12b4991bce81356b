package ratelimit

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"
)

func TestLimiterRefusesPastAMinutesBudgetAndRefills(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := New(3, func() time.Time { return now })
	from := func(addr string) (bool, string) {
		r := httptest.NewRequest("POST", "/", nil)
		r.RemoteAddr = addr
		w := httptest.NewRecorder()
		ok := l.Allow(w, r)
		return ok, w.Header().Get("Retry-After")
	}
	for i := range 3 {
		if ok, _ := from("192.0.2.1:1000"); !ok {
			t.Fatalf("request %d refused within the budget", i+1)
		}
	}
	if ok, retry := from("192.0.2.1:2000"); ok || retry != "20" {
		t.Fatalf("past the budget (another port, same address): allowed %v, Retry-After %q, want refused after 20 s", ok, retry)
	}
	if ok, _ := from("192.0.2.2:1000"); !ok {
		t.Fatal("another client was limited too")
	}
	now = now.Add(20 * time.Second) // 3 a minute: one every 20 seconds
	if ok, _ := from("192.0.2.1:1000"); !ok {
		t.Fatal("the budget did not refill by one in 20 seconds")
	}
	if ok, _ := from("192.0.2.1:1000"); ok {
		t.Fatal("the budget refilled by more than one in 20 seconds")
	}
}

func TestIPv6ClientsShareTheirSlash64(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := New(2, func() time.Time { return now })
	take := func(addr string) bool { ok, _ := l.Take(ClientOf(addr)); return ok }
	if !take("[2001:db8:1:2::1]:443") || !take("[2001:db8:1:2:ffff:ffff:ffff:ffff]:80") {
		t.Fatal("refused within the budget")
	}
	if take("[2001:db8:1:2:dead:beef::7]:1") {
		t.Error("a third address of the same /64 got a budget of its own")
	}
	if !take("[2001:db8:1:3::1]:443") {
		t.Error("the neighbouring /64 shares the budget")
	}
}

func TestClientOf(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"192.0.2.1:1234", "192.0.2.1/32"},
		{"192.0.2.1", "192.0.2.1/32"},
		{"[::ffff:192.0.2.1]:80", "192.0.2.1/32"},
		{"[2001:db8:a:b:c:d:e:f]:80", "2001:db8:a:b::/64"},
		{"2001:db8:a:b:c:d:e:f", "2001:db8:a:b::/64"},
		{"[fe80::1%eth0]:80", "fe80::/64"},
		{"[::1]:9", "::/64"},
		{"not an address", "invalid Prefix"},
		{"", "invalid Prefix"},
	} {
		if got := ClientOf(c.addr).String(); got != c.want {
			t.Errorf("ClientOf(%q) = %s, want %s", c.addr, got, c.want)
		}
	}
}

func TestNilLimiterAllowsEverything(t *testing.T) {
	l := New(-1, nil)
	if l != nil {
		t.Fatal("a negative limit made a limiter")
	}
	w := httptest.NewRecorder()
	for range 1000 {
		if !l.Allow(w, httptest.NewRequest("GET", "/", nil)) {
			t.Fatal("no limit refused a request")
		}
	}
}

// TestEvictionBoundsMemory: however many networks a sender has, the
// limiter keeps at most its maximum of clients.
func TestEvictionBoundsMemory(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := New(1, func() time.Time { return now })
	l.max = 100
	for i := range 1000 {
		l.Take(ClientOf(fmt.Sprintf("2001:db8:%x::1", i)))
		if n := len(l.buckets); n > l.max {
			t.Fatalf("%d clients kept, more than the maximum %d", n, l.max)
		}
	}
}
