package hkp

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
)

// cachedAnswer reports whether the answer to query is cached.
func (ts *testServer) cachedAnswer(query string) bool {
	ts.t.Helper()
	v, _ := url.ParseQuery(query)
	l, err := parseLookup(v)
	if err != nil {
		ts.t.Fatal(err)
	}
	c := ts.h.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byKey[l.cacheKey()] != nil
}

// deafStore delivers no change notifications, so that only the
// Handler's own invalidation after an upload keeps its cache right.
type deafStore struct{ *postgres.Store }

func (s deafStore) ListenKeyChanges(ctx context.Context, fn func(keys.DigestChange)) error {
	<-ctx.Done()
	return ctx.Err()
}

func (s deafStore) WatchKeyChanges(ctx context.Context, ready chan<- struct{}, fn func(keys.DigestChange)) error {
	close(ready)
	<-ctx.Done()
	return ctx.Err()
}

func TestCacheShowsNewUserIDAtOnce(t *testing.T) {
	ts := newTestServerOn(t, deafStore{pgtest.NewStore(t)}, Options{})
	e := newEntity(t, "Frank Cached", "frank@example.org", 400)
	if r := ts.add(armored(t, binaryKey(t, e))); r.code != 200 {
		t.Fatal(r.code, r.body)
	}
	queries := []string{
		"op=index&options=mr&search=0x" + fpHex(e),
		"op=get&options=mr&search=0x" + fpHex(e),
		"op=index&options=mr&search=frank@example.org",
		"op=index&options=mr&search=frank",
		"op=index&options=mr&search=frank@work.example", // 404 now
		"op=index&options=mr&search=consultant",         // 404 now
	}
	for _, q := range queries {
		ts.lookup(q)
		if !ts.cachedAnswer(q) {
			t.Fatalf("%s: not cached", q)
		}
	}
	if err := e.AddUserId("Frank Consultant", "", "frank@work.example", laterConfig(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if r := ts.add(armored(t, binaryKey(t, e))); r.code != 200 || !strings.Contains(r.body, "1 updated") {
		t.Fatal(r.code, r.body)
	}
	for _, q := range queries {
		r := ts.lookup(q)
		if r.code != 200 {
			t.Errorf("%s after the new user ID: %d %s", q, r.code, r.body)
			continue
		}
		if strings.Contains(q, "op=index") && !strings.Contains(r.body, "uid:Frank Consultant <frank@work.example>:") {
			t.Errorf("%s: stale answer:\n%s", q, r.body)
		}
		if strings.Contains(q, "op=get") {
			k, err := pgp.ParseKey([]byte(r.body))
			if err != nil || len(k.Describe().UserIDs) != 2 {
				t.Errorf("get: stale key (%v)", err)
			}
		}
	}
}

func TestCacheKeepsUnrelatedAnswersOnChange(t *testing.T) {
	ts := newTestServer(t, Options{})
	a := newEntity(t, "Grace Hopper", "grace@example.org", 410)
	b := newEntity(t, "Ada Lovelace", "ada@example.org", 411)
	ts.mustAdd(armored(t, binaryKey(t, a), binaryKey(t, b)))
	keep := []string{"op=get&options=mr&search=0x" + fpHex(b), "op=index&options=mr&search=ada", "op=index&options=mr&search=ada@example.org"}
	for _, q := range keep {
		ts.lookup(q)
	}
	if err := a.AddUserId("Grace Navy", "", "grace@navy.example", laterConfig(time.Hour)); err != nil {
		t.Fatal(err)
	}
	ts.mustAdd(armored(t, binaryKey(t, a)))
	for _, q := range keep {
		if !ts.cachedAnswer(q) {
			t.Errorf("%s: dropped by an unrelated change", q)
		}
	}
}

func TestCacheSeesChangesFromAnotherNode(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	open := func() *postgres.Store {
		s, err := postgres.Open(context.Background(), dbURL, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	ts := newTestServerOn(t, open(), Options{})
	other := open() // another node on the same database
	policy := pgp.DefaultPolicy()
	addElsewhere := func(bin []byte) {
		t.Helper()
		k, err := pgp.ParseKey(bin)
		if err != nil {
			t.Fatal(err)
		}
		applied, _, err := policy.Apply(k)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.AddKey(context.Background(), applied); err != nil {
			t.Fatal(err)
		}
	}

	h := newEntity(t, "Heidi Remote", "heidi@example.org", 420)
	ts.mustAdd(armored(t, binaryKey(t, h)))
	// This node's own write comes back as a notification too, before or
	// after the write returns: either way it reads nothing, as the
	// upload path told the Handler of the key before it was stored.
	testkit.Eventually(t, 10*time.Second, "this node's own notification", func() bool { return ts.h.changes.Load() >= 1 })
	own := ts.h.digestReads.Load()
	if own != 0 {
		t.Fatalf("the notification of a write on this node read %d keys from the store", own)
	}
	newcomer := newEntity(t, "Ivan Remote", "ivan@example.org", 421)
	byFP := "op=index&options=mr&search=0x" + fpHex(h)
	byWord := "op=index&options=mr&search=remote"
	missing := "op=get&options=mr&search=0x" + fpHex(newcomer)
	for _, q := range []string{byFP, byWord, missing} {
		ts.lookup(q)
		if !ts.cachedAnswer(q) {
			t.Fatalf("%s not cached", q)
		}
	}

	if err := h.AddUserId("Heidi Elsewhere", "", "heidi@elsewhere.example", laterConfig(time.Hour)); err != nil {
		t.Fatal(err)
	}
	addElsewhere(binaryKey(t, h))
	addElsewhere(binaryKey(t, newcomer))
	testkit.Eventually(t, 10*time.Second, "the other node's new user ID", func() bool {
		return strings.Contains(ts.lookup(byFP).body, "uid:Heidi Elsewhere <heidi@elsewhere.example>:")
	})
	testkit.Eventually(t, 10*time.Second, "the other node's new key by ID", func() bool { return ts.lookup(missing).code == 200 })
	testkit.Eventually(t, 10*time.Second, "the other node's new key by word", func() bool {
		return strings.HasPrefix(ts.lookup(byWord).body, "info:1:2\n")
	})
	// The other node's writes are read to learn what they changed.
	if n := ts.h.digestReads.Load() - own; n != 2 {
		t.Errorf("notifications from another node read %d keys, want 2", n)
	}
}

// blockingStore is a Store whose FindKeys waits for a signal, to let a
// change happen while a lookup is in flight.
type blockingStore struct {
	Store
	entered chan struct{}
	release chan struct{}
	key     keys.Stored
}

func (s *blockingStore) FindKeys(ctx context.Context, q keys.Query) ([]keys.Stored, bool, error) {
	s.entered <- struct{}{}
	<-s.release
	return []keys.Stored{s.key}, false, nil
}

func TestCacheDoesNotKeepAnswerReadBeforeChange(t *testing.T) {
	fp := make([]byte, 20)
	st := &blockingStore{entered: make(chan struct{}), release: make(chan struct{}),
		key: keys.Stored{Fingerprint: fp, Algorithm: 22, Created: testTime, UserIDs: []keys.StoredUserID{{Text: "Old"}}}}
	h := NewHandler(st, nil, Options{Logger: quietLogger()})
	h.cache.enable()
	q := "op=index&options=mr&search=0x" + strings.Repeat("00", 20)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/pks/lookup?"+q, nil))
	}()
	<-st.entered
	h.keyChangedLocally(fp) // the key changes while the old answer is read
	close(st.release)
	<-done
	v, _ := url.ParseQuery(q)
	l, _ := parseLookup(v)
	if h.cache.get(l.cacheKey()) != nil {
		t.Error("an answer read before a change was cached after it")
	}
}

func (h *Handler) keyChangedLocally(fp []byte) { h.cache.invalidate(fp, &keyTerms{}) }

func TestCacheEvictsLeastRecentlyUsedWithinSize(t *testing.T) {
	c := newCache(32*1024, time.Minute, time.Now, nil)
	c.enable()
	body := make([]byte, 700)
	for i := 0; i < 40; i++ {
		c.put(c.begin(), fmt.Sprint("k", i), &answer{status: 200, body: body, cacheable: true}, []string{fmt.Sprint("fp", i)}, fmt.Sprint("t", i), nil)
		c.get("k0") // keep k0 hot
	}
	if c.bytes > c.max {
		t.Errorf("%d bytes cached, bound %d", c.bytes, c.max)
	}
	if c.get("k0") == nil || c.get("k1") != nil || c.get("k39") == nil {
		t.Error("eviction is not least recently used")
	}
	if len(c.byFP) != len(c.byKey) || len(c.byTerm) != len(c.byKey) {
		t.Errorf("indexes out of step: %d keys, %d fps, %d terms", len(c.byKey), len(c.byFP), len(c.byTerm))
	}
}

func TestCacheExpiresAfterTTL(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newCache(1<<20, time.Minute, func() time.Time { return now }, nil)
	c.enable()
	c.put(c.begin(), "k", &answer{status: 200, cacheable: true}, nil, "t", nil)
	if c.get("k") == nil {
		t.Fatal("not cached")
	}
	now = now.Add(61 * time.Second)
	if c.get("k") != nil {
		t.Error("served after its TTL")
	}
}

func TestCacheIsOffWithoutListener(t *testing.T) {
	st := pgtest.NewStore(t)
	h := NewHandler(st, nil, Options{Logger: quietLogger()})
	srv := httptest.NewServer(h)
	defer srv.Close()
	res, err := http.Get(srv.URL + "/pks/lookup?op=index&options=mr&search=nobody")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 404 || len(h.cache.byKey) != 0 || h.Listening() {
		t.Errorf("code %d, %d cached answers without a listener", res.StatusCode, len(h.cache.byKey))
	}
}

// TestCacheSizeBoundCoversItsMemory: the bytes the cache counts against
// its bound are at least the heap its entries take, so that the bound
// bounds memory. Entries are shaped like a lookup's: a key naming a
// fingerprint, a small answer (a miss) or a 1 KiB one, one fingerprint
// and a term, each indexed.
func TestCacheSizeBoundCoversItsMemory(t *testing.T) {
	for _, bodySize := range []int{16, 1024} {
		c := newCache(1<<40, time.Hour, time.Now, nil)
		c.enable()
		const n = 20000
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := 0; i < n; i++ {
			fp := fmt.Sprintf("%040X", i)
			body := make([]byte, bodySize)
			c.put(c.begin(), "get|m|fp:"+fp, &answer{status: 200, contentType: "application/pgp-keys", body: body, cacheable: true},
				[]string{fp[:20]}, "fp:"+fp, nil)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		used := int64(after.HeapInuse) - int64(before.HeapInuse)
		t.Logf("%d entries with %d-byte bodies: %d bytes counted, %d bytes of heap (%d and %d per entry)",
			n, bodySize, c.bytes, used, c.bytes/n, used/n)
		if c.bytes < used {
			t.Errorf("%d-byte bodies: the cache counts %d bytes, its entries take %d", bodySize, c.bytes, used)
		}
		runtime.KeepAlive(c)
	}
}

// TestCacheDropsEntriesUnusedForTheTTL: an answer nobody asked for within
// the TTL leaves the cache when the next answer is put, instead of
// holding memory until the size bound pushes it out.
func TestCacheDropsEntriesUnusedForTheTTL(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newCache(1<<20, time.Minute, func() time.Time { return now }, nil)
	c.enable()
	c.put(c.begin(), "old", &answer{status: 200, cacheable: true}, []string{"fp1"}, "t1", nil)
	c.put(c.begin(), "hot", &answer{status: 200, cacheable: true}, []string{"fp2"}, "t2", nil)
	now = now.Add(30 * time.Second)
	c.put(c.begin(), "mid", &answer{status: 200, cacheable: true}, []string{"fp3"}, "t3", nil)
	now = now.Add(31 * time.Second)
	c.get("hot") // expired too: a get drops it
	c.put(c.begin(), "new", &answer{status: 200, cacheable: true}, []string{"fp4"}, "t4", nil)
	if _, ok := c.byKey["old"]; ok {
		t.Error("an entry unused for longer than the TTL is still held")
	}
	if c.byKey["mid"] == nil || c.byKey["new"] == nil {
		t.Errorf("entries within the TTL were dropped: %v", c.byKey)
	}
	want := c.byKey["mid"].size + c.byKey["new"].size
	if len(c.byKey) != 2 || c.bytes != want || len(c.byFP) != 2 || len(c.byTerm) != 2 {
		t.Errorf("after the sweep: %d entries, %d bytes (want %d), %d fps, %d terms", len(c.byKey), c.bytes, want, len(c.byFP), len(c.byTerm))
	}
}

// A key change drops the word answers it can change, found through the
// lexeme index, and no other: "josé" (lexeme "jos") goes with a user ID
// "Josè Q", which the store matches it with although neither word is a
// substring of the other; "alice" stays.
func TestCacheDropsWordAnswersByTheirLexemes(t *testing.T) {
	c := newCache(1<<20, time.Minute, time.Now, nil)
	c.enable()
	put := func(words ...string) string {
		key := "index:" + strings.Join(words, " ")
		c.put(c.begin(), key, &answer{status: 404, cacheable: true}, nil, "", words)
		return key
	}
	jose, joseQ, alice, noLexeme := put("josé"), put("josé", "q"), put("alice"), put("日本")
	for i := range 1000 {
		put(fmt.Sprint("w", i), "common")
	}
	kt := &keyTerms{}
	kt.addUserID("Josè Q <q@example.org>", "q@example.org")
	c.invalidate([]byte("fp"), kt)
	for key, gone := range map[string]bool{jose: true, joseQ: true, alice: false, "index:w7 common": false} {
		if got := c.get(key) == nil; got != gone {
			t.Errorf("%s: dropped %v, want %v", key, got, gone)
		}
	}
	if c.get(noLexeme) == nil {
		t.Errorf("%s: dropped by an unrelated key", noLexeme)
	}
	kt = &keyTerms{}
	kt.addUserID("日本 <nihon@example.jp>", "nihon@example.jp")
	c.invalidate([]byte("fp2"), kt)
	if c.get(noLexeme) != nil {
		t.Errorf("%s: kept after a key holding its words", noLexeme)
	}
	if len(c.byLexeme) == 0 || len(c.byLexeme) > 1003 {
		t.Errorf("%d lexeme index entries", len(c.byLexeme))
	}
}

// BenchmarkCacheInvalidateBesideWordAnswers is one key change with 100,000
// word answers cached: the lexeme index looks at the few its lexemes name
// instead of every word answer, under the lock every lookup takes.
func BenchmarkCacheInvalidateBesideWordAnswers(b *testing.B) {
	c := newCache(1<<30, time.Hour, time.Now, nil)
	c.enable()
	for i := range 100_000 {
		words := []string{fmt.Sprint("name", i), "example"}
		c.put(c.begin(), "index:"+strings.Join(words, " "), &answer{status: 404, cacheable: true}, nil, "", words)
	}
	kt := &keyTerms{}
	kt.addUserID("Generated User 29330 <user29330.0@example.net>", "user29330.0@example.net")
	b.ResetTimer()
	for range b.N {
		c.invalidate([]byte("fp"), kt)
	}
}

// TestOwnNotificationBeforeTheWriteReturnsReadsNothing: the store's
// notification of a write on this node can come before the write returns
// (KeysChanged); the upload path told the Handler of the key before the
// store had it (KeysWriting), so the notification drops the answers the
// key now belongs to without reading it from the store.
func TestOwnNotificationBeforeTheWriteReturnsReadsNothing(t *testing.T) {
	ts := newTestServerOn(t, deafStore{pgtest.NewStore(t)}, Options{})
	announced := mustApply(t, binaryKey(t, newEntity(t, "Zelda Early", "zelda@example.org", 430)))
	stranger := mustApply(t, binaryKey(t, newEntity(t, "Yorick Elsewhere", "yorick@example.org", 431)))
	for _, q := range []string{"op=index&options=mr&search=zelda", "op=index&options=mr&search=yorick"} {
		ts.lookup(q) // 404, cached
		if !ts.cachedAnswer(q) {
			t.Fatalf("%s not cached", q)
		}
	}

	ts.h.KeysWriting(context.Background(), []*pgp.Key{announced})
	ts.h.keyChanged(keys.DigestChange{Fingerprint: announced.Fingerprint(), New: announced.Digest()})
	if n := ts.h.digestReads.Load(); n != 0 {
		t.Errorf("the notification of an announced write read %d keys from the store", n)
	}
	if ts.cachedAnswer("op=index&options=mr&search=zelda") {
		t.Error("the announced key's notification left the answer to its name cached")
	}
	if !ts.cachedAnswer("op=index&options=mr&search=yorick") {
		t.Error("the announced key's notification dropped an unrelated answer")
	}
	// A write this node was not told of (another node's) is read.
	ts.h.keyChanged(keys.DigestChange{Fingerprint: stranger.Fingerprint(), New: stranger.Digest()})
	if n := ts.h.digestReads.Load(); n != 1 {
		t.Errorf("the notification of another node's write read %d keys, want 1", n)
	}
}

// TestOwnChangesForgetsTheOldestPastItsBound: terms no notification takes
// (a merged or unchanged key's) are forgotten oldest first, and a digest
// remembered again is not forgotten with its earlier slot.
func TestOwnChangesForgetsTheOldestPastItsBound(t *testing.T) {
	var o ownChanges
	digest := func(i int) (d [16]byte) {
		d[0], d[1], d[2] = byte(i), byte(i>>8), byte(i>>16)
		return d
	}
	kt := &keyTerms{}
	o.add(digest(0), kt)
	o.add(digest(1), kt)
	o.take(digest(1))
	o.add(digest(1), kt) // again, after it was taken
	for i := 2; i <= maxOwnChanges; i++ {
		o.add(digest(i), kt)
	}
	// Two past the bound: the slots of digest 0 and of digest 1's first
	// remembering were reused.
	if n := o.remembered(); n != maxOwnChanges {
		t.Errorf("%d remembered, want %d", n, maxOwnChanges)
	}
	if _, ok := o.take(digest(0)); ok {
		t.Error("the oldest terms were kept past the bound")
	}
	if _, ok := o.take(digest(1)); !ok {
		t.Error("terms remembered again were forgotten with their earlier slot")
	}
	if _, ok := o.take(digest(maxOwnChanges)); !ok {
		t.Error("the newest terms were forgotten")
	}
}
