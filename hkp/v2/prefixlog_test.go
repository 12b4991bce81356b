package v2_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v2 "github.com/kith-keyserver/kith/hkp/v2"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/keys/inprocess"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// clock is a settable time for the store and the prefix log.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// storedKey makes the seed-th test key, as the policy stores it.
func storedKey(t *testing.T, seed int64, uids ...string) *pgp.Key {
	t.Helper()
	e, err := keygen.NewEd25519(fmt.Sprintf("Key %d", seed), fmt.Sprintf("key%d@example.org", seed), time.Unix(1700000000, 0), seed)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range uids {
		if err := e.AddUserId(u, "", u+"@example.org", nil); err != nil {
			t.Fatal(err)
		}
	}
	var b strings.Builder
	if err := keygen.Serialize(&b, e); err != nil {
		t.Fatal(err)
	}
	k, err := pgp.ParseKey([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	k, _, err = pgp.DefaultPolicy().Apply(k)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// prefixLogServer serves the v2 routes with a prefix log over st.
func prefixLogServer(t *testing.T, st *inprocess.Store, c *clock, minKeys int, reg prometheus.Registerer) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	pl := v2.NewPrefixLog(st, v2.PrefixLogOptions{MinKeys: minKeys, Now: c.now, Registerer: reg})
	v2.NewHandler(st, nil, v2.Options{PrefixLog: pl}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

// TestPrefixLogListsTheDaysChangedPrefixes: a day's log is the sorted,
// distinct prefixes, CRLF-ended, of the keys last changed that day; the
// prefix length follows the store's size; a key changed again moves to
// its new day.
func TestPrefixLogListsTheDaysChangedPrefixes(t *testing.T) {
	ctx := context.Background()
	day1 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	c := &clock{t: day1}
	st := inprocess.New(inprocess.Options{Now: c.now})
	var all []*pgp.Key
	for i := range 40 {
		all = append(all, storedKey(t, int64(i+1)))
	}
	if _, err := st.AddKeys(ctx, all); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	// With 2 keys a prefix and 40 keys: 16 prefixes of 2.5, one digit.
	srv := prefixLogServer(t, st, c, 2, reg)
	prefixes := func(ks []*pgp.Key, digits int) string {
		var ps []string
		for _, k := range ks {
			ps = append(ps, hex.EncodeToString(k.Fingerprint())[:digits])
		}
		slices.Sort(ps)
		ps = slices.Compact(ps)
		return strings.Join(ps, "\r\n") + "\r\n"
	}

	res, body := get(t, srv.URL+"/pks/v2/prefixlog/2026-03-01")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/plain; charset=utf-8" ||
		res.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("today: %d %v", res.StatusCode, res.Header)
	}
	if want := prefixes(all, 1); body != want {
		t.Fatalf("today's log:\n%q\nwant\n%q", body, want)
	}
	if cc := res.Header.Get("Cache-Control"); cc != "public, max-age=60" {
		t.Errorf("today's Cache-Control %q", cc)
	}

	// The next day, one key merges a user ID and another comes again
	// unchanged.
	day2 := day1.AddDate(0, 0, 1)
	c.set(day2)
	if _, err := st.AddKeys(ctx, []*pgp.Key{storedKey(t, 1, "second"), all[1]}); err != nil {
		t.Fatal(err)
	}
	if _, body := get(t, srv.URL+"/pks/v2/prefixlog/2026-03-02"); body != prefixes(all[:1], 1) {
		t.Errorf("day 2: %q, want only the merged key's prefix %q", body, prefixes(all[:1], 1))
	}
	// Day 1 as cached on day 1 may still list the merged key (a stale
	// past day lists too much, never too little); a fresh log no more.
	fresh := prefixLogServer(t, st, c, 2, nil)
	if _, body := get(t, fresh.URL+"/pks/v2/prefixlog/2026-03-01"); body != prefixes(all[1:], 1) {
		t.Errorf("day 1 after the merge: %q, want %q", body, prefixes(all[1:], 1))
	}
	res, _ = get(t, fresh.URL+"/pks/v2/prefixlog/2026-03-01")
	if cc := res.Header.Get("Cache-Control"); cc != "public, max-age=3600" {
		t.Errorf("a past day's Cache-Control %q", cc)
	}

	// Prefixes lengthen as the store grows: with 1 key a prefix, 40
	// keys are one digit (two would name 0.16 of a key), 300 are two.
	one := prefixLogServer(t, st, c, 1, nil)
	if _, body := get(t, one.URL+"/pks/v2/prefixlog/2026-03-02"); body != prefixes(all[:1], 1) {
		t.Errorf("minKeys 1: %q", body)
	}
	var more []*pgp.Key
	for i := 40; i < 300; i++ {
		more = append(more, storedKey(t, int64(i+1)))
	}
	if _, err := st.AddKeys(ctx, more); err != nil {
		t.Fatal(err)
	}
	grown := prefixLogServer(t, st, c, 1, nil)
	if _, body := get(t, grown.URL+"/pks/v2/prefixlog/2026-03-02"); body != prefixes(append(more, all[0]), 2) {
		t.Errorf("300 keys, minKeys 1: %q, want two digits", body)
	}

	got := counters(t, reg)
	if got[`kith_hkp_prefixlog_requests_total{outcome="served"}`] != 2 || got[`kith_hkp_prefixlog_requests_total{outcome="cached"}`] != 0 {
		t.Errorf("metrics: %v", got)
	}
	get(t, srv.URL+"/pks/v2/prefixlog/2026-03-02")
	if got := counters(t, reg); got[`kith_hkp_prefixlog_requests_total{outcome="cached"}`] != 1 {
		t.Errorf("a second request was not answered from the cache: %v", got)
	}
}

// TestPrefixLogRefusesWhatIsNotADay: anything but YYYY-MM-DD of a real
// day is 400 (with CORS, so a page can read why); a day to come and a day
// long past are empty logs, the former not to be cached.
func TestPrefixLogRefusesWhatIsNotADay(t *testing.T) {
	c := &clock{t: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}
	st := inprocess.New(inprocess.Options{Now: c.now})
	if _, err := st.AddKey(context.Background(), storedKey(t, 1)); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv := prefixLogServer(t, st, c, 0, reg)
	bad := []string{"2026-3-1", "20260301", "2026-02-30", "2026-13-01", "yesterday", "2026-03-01T00:00:00Z",
		"%2B2026-03-01", "-2026-03-01", "2026-03-01%0A", "%20" + "2026-03-01", "0x7ea", strings.Repeat("9", 4000)}
	for _, d := range bad {
		res, _ := get(t, srv.URL+"/pks/v2/prefixlog/"+d)
		if res.StatusCode != http.StatusBadRequest || res.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%q: %d %v, want 400 with CORS", d, res.StatusCode, res.Header)
		}
	}
	for _, d := range []string{"2026-03-02", "9999-12-31"} {
		res, body := get(t, srv.URL+"/pks/v2/prefixlog/"+d)
		if res.StatusCode != http.StatusOK || body != "" || res.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("a day to come, %s: %d %q %v; want an empty log, not stored", d, res.StatusCode, body, res.Header)
		}
	}
	for _, d := range []string{"1970-01-01", "0001-01-01", "0000-01-01"} {
		res, body := get(t, srv.URL+"/pks/v2/prefixlog/"+d)
		if res.StatusCode != http.StatusOK || body != "" {
			t.Errorf("a day long past, %s: %d %q; want an empty log", d, res.StatusCode, body)
		}
	}
	if got := counters(t, reg); got[`kith_hkp_prefixlog_requests_total{outcome="bad_request"}`] != float64(len(bad)) {
		t.Errorf("metrics: %v", got)
	}
}

// TestPrefixLogAnswersHoldNoPersonalData: over a store whose keys carry
// names and addresses, a log holds only short hex prefixes, each shared
// by several stored keys.
func TestPrefixLogAnswersHoldNoPersonalData(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}
	st := inprocess.New(inprocess.Options{Now: c.now})
	var ks []*pgp.Key
	for i := range 600 {
		ks = append(ks, storedKey(t, int64(i+1)))
	}
	if _, err := st.AddKeys(ctx, ks); err != nil {
		t.Fatal(err)
	}
	srv := prefixLogServer(t, st, c, 0, nil) // the default: 16 keys a prefix
	_, body := get(t, srv.URL+"/pks/v2/prefixlog/2026-03-01")
	if !regexp.MustCompile(`\A([0-9a-f]\r\n)+\z`).MatchString(body) {
		t.Fatalf("log of 600 keys: %q, want one-digit lines (600 keys name 16 a prefix only at one digit)", body)
	}
	if strings.Contains(body, "example.org") || strings.Contains(body, "Key") {
		t.Fatal("the log names a user ID")
	}
}

// counters gathers reg's counters by name and labels.
func counters(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			if m.Counter != nil {
				out[name] = m.GetCounter().GetValue()
			} else if m.Gauge != nil {
				out[name] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

var _ keys.ChangeLog = (*inprocess.Store)(nil)

// blockingLog is a ChangeLog whose reads wait for release, counting how
// many are in progress at once.
type blockingLog struct {
	release chan struct{}
	stop    chan struct{} // closed: every read returns
	mu      sync.Mutex
	now     int
	most    int
}

func (b *blockingLog) CountKeys(ctx context.Context) (int64, error) { return 100, nil }

func (b *blockingLog) ChangedPrefixes(ctx context.Context, from, to time.Time, digits int) ([]string, error) {
	b.mu.Lock()
	b.now++
	b.most = max(b.most, b.now)
	b.mu.Unlock()
	select {
	case <-b.release:
	case <-b.stop:
	}
	b.mu.Lock()
	b.now--
	b.mu.Unlock()
	return []string{from.Format("01")[1:]}, nil // the month's last digit, as a prefix
}

func (b *blockingLog) inProgress() int { b.mu.Lock(); defer b.mu.Unlock(); return b.now }

// TestPrefixLogReadsTwoDaysAtOnce: requests for many days read the store
// two at a time, and a request that gives up waiting for its turn leaves
// another one for the same day its answer.
func TestPrefixLogReadsTwoDaysAtOnce(t *testing.T) {
	store := &blockingLog{release: make(chan struct{}), stop: make(chan struct{})}
	c := &clock{t: time.Date(2026, 12, 31, 10, 0, 0, 0, time.UTC)}
	mux := http.NewServeMux()
	v2.NewHandler(inprocess.New(inprocess.Options{}), nil, v2.Options{PrefixLog: v2.NewPrefixLog(store, v2.PrefixLogOptions{Now: c.now})}).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(store.stop) // before the server waits for its handlers

	type answer struct {
		month int
		code  int
		body  string
	}
	answers := make(chan answer, 20)
	ask := func(ctx context.Context, month int) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/pks/v2/prefixlog/2026-%02d-01", srv.URL, month), nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			answers <- answer{month: month, code: -1}
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		answers <- answer{month, res.StatusCode, string(b)}
	}
	for m := 1; m <= 8; m++ {
		go ask(context.Background(), m)
	}
	if !testkit.PollEvery(30*time.Second, time.Millisecond, func() bool { return store.inProgress() == 2 }) {
		t.Fatal("two reads never began")
	}
	// Month 9 twice: one asker gives up while waiting for its turn.
	ctx, cancel := context.WithCancel(context.Background())
	go ask(ctx, 9)
	go ask(context.Background(), 9)
	cancel()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case store.release <- struct{}{}:
			case <-done:
				return
			}
		}
	}()
	got := map[int][]answer{}
	for range 10 {
		a := <-answers
		got[a.month] = append(got[a.month], a)
	}
	for m := 1; m <= 9; m++ {
		ok := false
		for _, a := range got[m] {
			if a.code == http.StatusOK && a.body == fmt.Sprintf("%d\r\n", m%10) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("month %d: %+v, want its log", m, got[m])
		}
	}
	if store.most > 2 {
		t.Errorf("%d days read at once, want at most 2", store.most)
	}
}
