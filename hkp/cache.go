// cache.go: the in-process cache of rendered lookup answers, and the rule
// that keeps it coherent with the store.
//
// What is cached: the whole answer (status, headers, body) of op=get,
// index, vindex and hget, found or not found, keyed by the normalised
// request (op, selector, options), so "0xABCD…" and "0xabcd…" share one
// entry. The cache is bounded by bytes (least recently used answers go
// first) and every answer also expires after Options.CacheTTL.
//
// The invalidation rule. A key change (a notification from any node, or an
// upload through this Handler, applied before its answer is sent) can
// alter the answer to a query in two ways only: the key was in the answer
// (its packets or flags changed, or it was deleted), or the key matches
// the query now (it is new, or gained a subkey, user ID or email). So each
// entry is indexed by the primary fingerprints it holds and by the term it
// selects with (a fingerprint, 64- or 32-bit key ID, email or digest), and
// a change of key K drops:
//   - every entry holding K;
//   - every entry whose term is one of K's terms now (its primary and
//     subkey fingerprints and key IDs, its emails, its digest);
//   - every word entry whose lexemes all occur among the lexemes of K's
//     user IDs. A lexeme is what the store matches words by: a run of
//     ASCII letters and digits, lower-cased (the store's tsvector, made in
//     the C locale, takes every other character for a separator), so this
//     is a superset of the keys the store's match returns, which needs
//     them in one user ID. Each word entry is indexed by its longest
//     lexeme, so a change looks only at the entries one of its lexemes
//     names, however many word answers are cached.
//
// Merging only adds packets, so the terms of an upload after the policy
// cover everything the merged key can newly match. When the key's current
// form cannot be read after a notification, or a notification may have
// been missed, the whole cache is dropped. A generation counter bumped on
// every key change was the simpler alternative; it was not taken because
// a pool peer sees a key change every few seconds from recon alone, which
// would keep the hit rate of a read-heavy server low for no reason.
//
// Races: a lookup notes the cache's epoch before it asks the store and
// stores its answer only if no invalidation happened since, so an answer
// read before a change can never be cached after that change's
// invalidation.
//
// The cache is used only while Handler.Run listens to notifications; with
// the listener down, other nodes' changes would go unseen.

package hkp

import (
	"container/list"
	"context"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kith-keyserver/kith/identity/keys"
)

// answer is one rendered lookup answer. It is immutable once built.
type answer struct {
	status      int
	contentType string
	// header holds extra header fields (name in canonical form, as
	// http.CanonicalHeaderKey gives it; value).
	header [][2]string
	body   []byte
	// stream, when set, writes the body instead of body (an answer too
	// large to hold in memory; never cacheable).
	stream func(ctx context.Context, w io.Writer) error
	// cacheable is false for answers that must not be kept (store errors).
	cacheable bool
}

// cacheEntry is one cached answer and what invalidates it.
type cacheEntry struct {
	key     string
	ans     *answer
	fps     []string // primary fingerprints in the answer (raw bytes)
	term    string   // the selector term ("" for word queries)
	words   []string // the words of a word query
	lexemes []string // their lexemes (keys.Lexemes), for invalidation
	expires time.Time
	size    int64
	elem    *list.Element
}

type entrySet map[*cacheEntry]struct{}

// cache is the answer cache. It is safe for concurrent use.
type cache struct {
	max     int64
	ttl     time.Duration
	now     func() time.Time
	metrics *metrics
	enabled atomic.Bool

	mu     sync.Mutex
	epoch  uint64
	bytes  int64
	byKey  map[string]*cacheEntry
	lru    list.List // front: most recently used
	byFP   map[string]entrySet
	byTerm map[string]entrySet
	// byLexeme indexes word entries by their longest lexeme; noLexeme
	// holds those without any, which the store matches nothing with.
	byLexeme map[string]entrySet
	noLexeme entrySet
}

// Per-entry bookkeeping counted against the size bound, beyond the body,
// the key and the term: the entry, its answer, its LRU element and its
// slots in the indexes (TestCacheSizeBoundCoversItsMemory measures it:
// about 800 bytes for a small answer). Each fingerprint adds
// fingerprintOverhead: its string and its own index set.
const (
	entryOverhead       = 640
	fingerprintOverhead = 192
)

func newCache(max int64, ttl time.Duration, now func() time.Time, m *metrics) *cache {
	return &cache{
		max: max, ttl: ttl, now: now, metrics: m,
		byKey:    make(map[string]*cacheEntry),
		byFP:     make(map[string]entrySet),
		byTerm:   make(map[string]entrySet),
		byLexeme: make(map[string]entrySet),
		noLexeme: make(entrySet),
	}
}

func (c *cache) usable() bool { return c.max > 0 && c.enabled.Load() }

// enable starts using the cache (Run calls it as it starts listening).
func (c *cache) enable() { c.enabled.Store(true) }

// disable stops using the cache and empties it.
func (c *cache) disable() {
	c.enabled.Store(false)
	c.flush()
}

// begin returns the epoch a lookup must present to put.
func (c *cache) begin() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// get returns the cached answer for key, or nil.
func (c *cache) get(key string) *answer {
	if !c.usable() {
		return nil
	}
	c.mu.Lock()
	e := c.byKey[key]
	if e == nil {
		c.mu.Unlock()
		c.metrics.miss()
		return nil
	}
	if c.now().After(e.expires) {
		c.remove(e)
		c.mu.Unlock()
		c.metrics.miss()
		return nil
	}
	c.lru.MoveToFront(e.elem)
	a := e.ans
	c.mu.Unlock()
	c.metrics.hit()
	return a
}

// put caches a under key unless the cache changed since epoch. fps are
// the primary fingerprints a holds; term or words say what it selects by.
func (c *cache) put(epoch uint64, key string, a *answer, fps []string, term string, words []string) {
	if !c.usable() || !a.cacheable {
		return
	}
	size := int64(len(a.body)+len(key)+len(term)+entryOverhead) + int64(len(fps))*fingerprintOverhead
	lexemes := keys.Lexemes(strings.Join(words, " "))
	for _, w := range words {
		size += int64(len(w)) + 32
	}
	for _, l := range lexemes {
		size += int64(len(l)) + 32
	}
	if size > c.max/16 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch {
		return
	}
	if old := c.byKey[key]; old != nil {
		c.remove(old)
	}
	e := &cacheEntry{key: key, ans: a, fps: fps, term: term, words: words, lexemes: lexemes, expires: c.now().Add(c.ttl), size: size}
	e.elem = c.lru.PushFront(e)
	c.byKey[key] = e
	c.bytes += size
	for _, fp := range fps {
		addTo(c.byFP, fp, e)
	}
	switch {
	case term != "":
		addTo(c.byTerm, term, e)
	case len(lexemes) > 0:
		addTo(c.byLexeme, longest(lexemes), e)
	default:
		c.noLexeme[e] = struct{}{}
	}
	// An entry expires a TTL after it was put, so one unused for longer
	// than the TTL has expired: drop those from the back of the LRU
	// list, so that the cache holds what was asked within the TTL, not
	// everything asked since the start until the bound is reached.
	now := c.now()
	for back := c.lru.Back(); back != nil && back.Value.(*cacheEntry) != e; back = c.lru.Back() {
		old := back.Value.(*cacheEntry)
		if now.Before(old.expires) {
			break
		}
		c.remove(old)
	}
	evicted := 0
	for c.bytes > c.max {
		last := c.lru.Back().Value.(*cacheEntry)
		c.remove(last)
		evicted++
	}
	c.metrics.evicted(evicted)
	c.metrics.size(c.bytes, len(c.byKey))
}

func addTo(m map[string]entrySet, k string, e *cacheEntry) {
	s := m[k]
	if s == nil {
		s = make(entrySet)
		m[k] = s
	}
	s[e] = struct{}{}
}

func removeFrom(m map[string]entrySet, k string, e *cacheEntry) {
	if s := m[k]; s != nil {
		delete(s, e)
		if len(s) == 0 {
			delete(m, k)
		}
	}
}

// remove drops e; c.mu is held.
func (c *cache) remove(e *cacheEntry) {
	if c.byKey[e.key] != e {
		return
	}
	delete(c.byKey, e.key)
	c.lru.Remove(e.elem)
	c.bytes -= e.size
	for _, fp := range e.fps {
		removeFrom(c.byFP, fp, e)
	}
	switch {
	case e.term != "":
		removeFrom(c.byTerm, e.term, e)
	case len(e.lexemes) > 0:
		removeFrom(c.byLexeme, longest(e.lexemes), e)
	default:
		delete(c.noLexeme, e)
	}
}

// flush drops everything.
func (c *cache) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	n := len(c.byKey)
	c.byKey = make(map[string]*cacheEntry)
	c.lru.Init()
	c.byFP = make(map[string]entrySet)
	c.byTerm = make(map[string]entrySet)
	c.byLexeme = make(map[string]entrySet)
	c.noLexeme = make(entrySet)
	c.bytes = 0
	c.metrics.dropped(n)
	c.metrics.size(0, 0)
}

// invalidate applies the rule of this file's comment for a change of the
// key with primary fingerprint fp, whose current terms are kt (nil: the
// key is gone).
func (c *cache) invalidate(fp []byte, kt *keyTerms) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	var drop []*cacheEntry
	for e := range c.byFP[string(fp)] {
		drop = append(drop, e)
	}
	if kt != nil {
		for _, t := range kt.terms {
			for e := range c.byTerm[t] {
				drop = append(drop, e)
			}
		}
		for l := range kt.lexemes {
			for e := range c.byLexeme[l] {
				if allIn(e.lexemes, kt.lexemes) {
					drop = append(drop, e)
				}
			}
		}
		for e := range c.noLexeme {
			if wordsMatch(e.words, kt.uids) {
				drop = append(drop, e)
			}
		}
	}
	n := 0
	for _, e := range drop {
		if c.byKey[e.key] == e {
			c.remove(e)
			n++
		}
	}
	c.metrics.dropped(n)
	c.metrics.size(c.bytes, len(c.byKey))
}

// longest returns the longest of ls (the first of those as long), the
// rarest lexeme an entry is likely to have.
func longest(ls []string) string {
	l := ls[0]
	for _, x := range ls[1:] {
		if len(x) > len(l) {
			l = x
		}
	}
	return l
}

// allIn reports whether every lexeme of ls is in set.
func allIn(ls []string, set map[string]bool) bool {
	for _, l := range ls {
		if !set[l] {
			return false
		}
	}
	return true
}

// wordsMatch reports whether every word occurs in one of uids (already
// lower-cased): how an entry without lexemes, which the store matches
// nothing with, is still judged, to err on the side of dropping.
func wordsMatch(words, uids []string) bool {
	for _, w := range words {
		found := false
		for _, u := range uids {
			if strings.Contains(u, w) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
