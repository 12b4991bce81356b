// cache.go: this node's cache of rendered lookups, dropped per handle by
// evidence notifications and bounded in size and age.

package api

import (
	"sync"
	"time"
)

// cached is one rendered answer.
type cached struct {
	status  int
	ctype   string
	body    []byte
	etag    string
	expires time.Time
}

// cache maps handle and variant to a rendered answer. It is off until
// enabled (when the notification listener runs), so that it never serves
// what a missed notification made stale.
type cache struct {
	mu      sync.Mutex
	on      bool
	gen     uint64 // bumped by every drop, so a lookup racing one is not stored
	max     int
	handles map[string]map[string]cached
	// Every ttl, put drops the handles whose answers have all expired,
	// so that the cache holds what was asked within about two TTLs, not
	// every handle ever asked for until max is reached.
	ttl       time.Duration
	nextSweep time.Time
}

func newCache(max int, ttl time.Duration) *cache {
	return &cache{max: max, ttl: ttl, handles: map[string]map[string]cached{}}
}

func (c *cache) get(handle, variant string, now time.Time) (cached, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.on {
		return cached{}, false
	}
	e, ok := c.handles[handle][variant]
	if !ok || !now.Before(e.expires) {
		return cached{}, false
	}
	return e, true
}

// generation returns the current generation, to pass to put.
func (c *cache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// put stores an answer computed after generation gen, unless something was
// dropped since.
func (c *cache) put(handle, variant string, gen uint64, e cached, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.on || gen != c.gen {
		return
	}
	if !now.Before(c.nextSweep) {
		c.sweep(now)
		c.nextSweep = now.Add(c.ttl)
	}
	m := c.handles[handle]
	if m == nil {
		if len(c.handles) >= c.max {
			// Full: start over rather than track recency; the store
			// answers misses quickly.
			c.handles = map[string]map[string]cached{}
		}
		m = map[string]cached{}
		c.handles[handle] = m
	}
	m[variant] = e
}

// sweep drops the handles none of whose answers is fresh at now.
func (c *cache) sweep(now time.Time) {
	for h, m := range c.handles {
		fresh := false
		for _, e := range m {
			if now.Before(e.expires) {
				fresh = true
				break
			}
		}
		if !fresh {
			delete(c.handles, h)
		}
	}
}

func (c *cache) drop(handle string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	delete(c.handles, handle)
}

func (c *cache) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.handles = map[string]map[string]cached{}
}

// enable turns the cache on. retry.Follow calls it once the listener
// listens, and never after the disable that ends that session.
func (c *cache) enable() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.on = true
}

// enabled reports whether the cache is on.
func (c *cache) enabled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.on
}

func (c *cache) disable() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.on = false
	c.gen++
	c.handles = map[string]map[string]cached{}
}
