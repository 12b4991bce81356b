package api

import (
	"testing"
	"time"
)

// TestCacheSweepsExpiredHandles: a handle asked for once (a crawler, a
// typo, a miss) leaves the cache within a TTL after its answer expired,
// instead of staying until the cache holds max handles.
func TestCacheSweepsExpiredHandles(t *testing.T) {
	ttl := time.Minute
	c := newCache(100_000, ttl)
	c.enable()
	t0 := time.Unix(1000, 0)
	put := func(h string, now time.Time) {
		c.put(h, "keys", c.generation(), cached{body: []byte("x"), expires: now.Add(ttl)}, now)
	}
	put("once", t0)
	put("typo", t0)
	put("nora", t0.Add(30*time.Second))
	if len(c.handles) != 3 {
		t.Fatalf("%d handles cached, want 3", len(c.handles))
	}
	put("next", t0.Add(61*time.Second))
	_, once := c.handles["once"]
	_, typo := c.handles["typo"]
	_, nora := c.handles["nora"]
	_, next := c.handles["next"]
	if once || typo || !nora || !next || len(c.handles) != 2 {
		t.Errorf("after the sweep: %v, want nora and next", c.handles)
	}
}
