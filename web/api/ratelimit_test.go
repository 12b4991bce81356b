package api

import (
	"net/http/httptest"
	"testing"
	"time"
)

func TestLimiterRefusesPastTheBurstAndRefills(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := newLimiter(60, 3, func() time.Time { return now })
	from := func(addr string) bool {
		r := httptest.NewRequest("POST", "/api/v1/challenges", nil)
		r.RemoteAddr = addr
		return l.allow(r)
	}
	for i := range 3 {
		if !from("192.0.2.1:1000") {
			t.Fatalf("request %d refused within the burst", i+1)
		}
	}
	if from("192.0.2.1:2000") {
		t.Fatal("request past the burst allowed (another port, same address)")
	}
	if !from("192.0.2.2:1000") {
		t.Fatal("another client was limited too")
	}
	now = now.Add(time.Second) // 60 a minute: one token a second
	if !from("192.0.2.1:1000") || from("192.0.2.1:1000") {
		t.Fatal("the bucket did not refill by one token a second")
	}
}
