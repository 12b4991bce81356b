package refresh_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/kith-keyserver/kith/hkp"
	"github.com/kith-keyserver/kith/hkp/refresh"
	v2 "github.com/kith-keyserver/kith/hkp/v2"
	"github.com/kith-keyserver/kith/identity/keys/inprocess"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// clock is a settable time for the store.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func entity(t *testing.T, seed int64) *openpgp.Entity {
	t.Helper()
	e, err := keygen.NewEd25519(fmt.Sprintf("Key %d", seed), fmt.Sprintf("key%d@example.org", seed), time.Unix(1700000000, 0), seed)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func applied(t *testing.T, e *openpgp.Entity) *pgp.Key {
	t.Helper()
	var b bytes.Buffer
	if err := keygen.Serialize(&b, e); err != nil {
		t.Fatal(err)
	}
	k, err := pgp.ParseKey(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	k, _, err = pgp.DefaultPolicy().Apply(k)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// counting serves h and counts the requests by path prefix.
type counting struct {
	h     http.Handler
	mu    sync.Mutex
	logs  int
	gets  map[string]int // by upper-case fingerprint
	other int
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	switch {
	case strings.HasPrefix(r.URL.Path, "/pks/v2/prefixlog/"):
		c.logs++
	case r.URL.Path == "/pks/lookup" && r.URL.Query().Get("op") == "get":
		c.gets[strings.TrimPrefix(r.URL.Query().Get("search"), "0x")]++
	default:
		c.other++
	}
	c.mu.Unlock()
	c.h.ServeHTTP(w, r)
}

// keyserver serves st's legacy HKP and v2 routes with a prefix log of
// minKeys keys a prefix, counting requests.
func keyserver(t *testing.T, st *inprocess.Store, minKeys int) (*httptest.Server, *counting) {
	t.Helper()
	mux := http.NewServeMux()
	hkp.NewHandler(st, nil, hkp.Options{CacheSize: -1, Logger: slog.New(slog.DiscardHandler)}).Register(mux)
	v2.NewHandler(st, nil, v2.Options{PrefixLog: v2.NewPrefixLog(st, v2.PrefixLogOptions{MinKeys: minKeys})}).Register(mux)
	c := &counting{h: mux, gets: map[string]int{}}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return srv, c
}

// TestRefreshFetchesOnlyKeysWhosePrefixChanged: of the held keys, those
// whose prefix a day's log since the last refresh lists are fetched (the
// changed ones among them, with their change), and no other; a held key
// the server never had is counted missing if its prefix is listed.
func TestRefreshFetchesOnlyKeysWhosePrefixChanged(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	c := &clock{t: now.AddDate(0, 0, -10)}
	st := inprocess.New(inprocess.Options{Now: c.now})
	var ents []*openpgp.Entity
	var all []*pgp.Key
	for i := range 300 {
		e := entity(t, int64(i+1))
		ents = append(ents, e)
		all = append(all, applied(t, e))
	}
	if _, err := st.AddKeys(ctx, all); err != nil {
		t.Fatal(err)
	}
	// Today two held keys gain a user ID and one key nobody holds
	// appears.
	c.set(now)
	changed := []int{3, 17}
	for _, i := range changed {
		if err := ents[i].AddUserId("New", "", fmt.Sprintf("new%d@example.org", i), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AddKey(ctx, applied(t, ents[i])); err != nil {
			t.Fatal(err)
		}
	}
	stranger := applied(t, entity(t, 1000))
	if _, err := st.AddKey(ctx, stranger); err != nil {
		t.Fatal(err)
	}
	// 301 keys, one a prefix: two digits.
	srv, count := keyserver(t, st, 1)

	// The client holds the first 100 keys and one the server never had.
	var held [][]byte
	for _, k := range all[:100] {
		held = append(held, k.Fingerprint())
	}
	unknown := applied(t, entity(t, 2000))
	held = append(held, unknown.Fingerprint())
	listed := map[string]bool{}
	for _, i := range changed {
		listed[hex.EncodeToString(all[i].Fingerprint())[:2]] = true
	}
	listed[hex.EncodeToString(stranger.Fingerprint())[:2]] = true
	wantFetched, wantMissing := 0, 0
	for _, fp := range held {
		if listed[hex.EncodeToString(fp)[:2]] {
			if bytes.Equal(fp, unknown.Fingerprint()) {
				wantMissing++
			} else {
				wantFetched++
			}
		}
	}

	cl, err := refresh.New(srv.URL, refresh.Options{UserAgent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*pgp.Key{}
	r, err := cl.Refresh(ctx, held, now.AddDate(0, 0, -5), func(k *pgp.Key) error {
		got[hex.EncodeToString(k.Fingerprint())] = k
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range changed {
		k := got[hex.EncodeToString(all[i].Fingerprint())]
		if k == nil || len(k.Describe().UserIDs) != 2 {
			t.Errorf("changed key %d: not fetched with its new user ID (%v)", i, k != nil)
		}
	}
	if r.Held != 101 || r.Fetched != wantFetched || r.Missing != wantMissing || r.Skipped != 101-wantFetched-wantMissing || r.Fetched != len(got) {
		t.Errorf("result %+v, want %d fetched, %d missing", r, wantFetched, wantMissing)
	}
	// The logs from five days ago (less the slack) to today, and a get
	// for each fetched or missing key, nothing more.
	if count.logs != r.Days || r.Days < 6 || r.Days > 7 {
		t.Errorf("%d prefix logs asked, %d days read; want 6 or 7", count.logs, r.Days)
	}
	if len(count.gets) != wantFetched+wantMissing || count.other != 0 {
		t.Errorf("%d keys asked for, %d other requests; want %d keys", len(count.gets), count.other, wantFetched+wantMissing)
	}
	if r.Began.IsZero() || r.Began.After(time.Now().Add(time.Minute)) {
		t.Errorf("Began %v", r.Began)
	}
}

// TestRefreshRefusesWhatAServerShouldNotSay: a key it did not ask for is
// dropped, a log line that is not a prefix is an error, a server without
// a prefix log says so, and a refresh too long ago is ErrTooOld.
func TestRefreshRefusesWhatAServerShouldNotSay(t *testing.T) {
	ctx := context.Background()
	asked, other := applied(t, entity(t, 1)), applied(t, entity(t, 2))
	var answer bytes.Buffer
	pgp.WriteArmored(&answer, other, asked)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /pks/lookup", func(w http.ResponseWriter, r *http.Request) { w.Write(answer.Bytes()) })
	mux.HandleFunc("GET /pks/v2/prefixlog/{date}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ab\r\n<script>\r\n")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	cl, err := refresh.New(srv.URL, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	k, err := cl.Fetch(ctx, asked.Fingerprint())
	if err != nil || !bytes.Equal(k.Fingerprint(), asked.Fingerprint()) {
		t.Errorf("Fetch: %v, %v; want only the key asked for", k, err)
	}
	if _, err := cl.Fetch(ctx, applied(t, entity(t, 3)).Fingerprint()); err == nil {
		t.Error("Fetch of a key the answer does not hold: no error")
	}
	if _, _, err := cl.PrefixLog(ctx, time.Now()); err == nil || !strings.Contains(err.Error(), "not a fingerprint prefix") {
		t.Errorf("a log with markup: %v", err)
	}

	none := httptest.NewServer(http.NotFoundHandler())
	defer none.Close()
	cl, _ = refresh.New(none.URL, refresh.Options{})
	if _, err := cl.Refresh(ctx, nil, time.Now(), nil); !errors.Is(err, refresh.ErrNoPrefixLog) {
		t.Errorf("a server without a prefix log: %v", err)
	}

	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer empty.Close()
	cl, _ = refresh.New(empty.URL, refresh.Options{})
	if _, err := cl.Refresh(ctx, nil, time.Now().AddDate(-2, 0, 0), nil); !errors.Is(err, refresh.ErrTooOld) {
		t.Errorf("a refresh two years on: %v", err)
	}
	for _, bad := range []string{"ftp://example.org", "hkp://", "::"} {
		if _, err := refresh.New(bad, refresh.Options{}); err == nil {
			t.Errorf("New(%q): no error", bad)
		}
	}
}

// TestRefreshAllFetchesEveryHeldKey: kith refresh --all asks for every
// held key whatever the logs say, and counts the one the server never had
// as missing.
func TestRefreshAllFetchesEveryHeldKey(t *testing.T) {
	ctx := context.Background()
	st := inprocess.New(inprocess.Options{})
	var held [][]byte
	for i := range 5 {
		k := applied(t, entity(t, int64(i+1)))
		if _, err := st.AddKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		held = append(held, k.Fingerprint())
	}
	held = append(held, applied(t, entity(t, 99)).Fingerprint())
	srv, count := keyserver(t, st, 16)
	cl, err := refresh.New(srv.URL, refresh.Options{UserAgent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	before := time.Now()
	r, err := cl.RefreshAll(ctx, held, func(k *pgp.Key) error {
		got = append(got, k.Fingerprint())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Held != 6 || r.Fetched != 5 || r.Missing != 1 || r.Days != 0 || r.Began.Before(before) {
		t.Errorf("result %+v, want 6 held, 5 fetched, 1 missing, no log read, begun now", r)
	}
	if !slices.EqualFunc(got, held[:5], bytes.Equal) {
		t.Errorf("got %d keys, want the 5 stored in order", len(got))
	}
	if count.logs != 0 || len(count.gets) != 6 {
		t.Errorf("%d log requests, %d keys asked for; want 0 and 6", count.logs, len(count.gets))
	}
}
