package recon

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func TestHashQueryRequestRoundTrip(t *testing.T) {
	ds := randDigests(rand.New(rand.NewPCG(1, 1)), 100)
	got, err := ParseHashQueryRequest(MarshalHashQueryRequest(ds), 0)
	if err != nil || !sameDigests(got, ds) {
		t.Fatalf("round trip = %d digests, %v", len(got), err)
	}
	b := MarshalHashQueryRequest(ds[:1])
	if !bytes.Equal(b[:8], []byte{0, 0, 0, 1, 0, 0, 0, 16}) || len(b) != 24 {
		t.Fatalf("request body = %x", b)
	}
}

func TestParseHashQueryRequestRejectsBadBodies(t *testing.T) {
	ds := randDigests(rand.New(rand.NewPCG(2, 2)), 101)
	bad15 := []byte{0, 0, 0, 1, 0, 0, 0, 15}
	bad15 = append(bad15, make([]byte, 16)...)
	tests := []struct {
		name string
		body []byte
		want string
	}{
		{"too many digests", MarshalHashQueryRequest(ds), "limit 100"},
		{"count past the body", []byte{0, 0, 0, 9}, "does not fit"},
		{"digest of 15 bytes", bad15, "want 16"},
		{"trailing bytes", append(MarshalHashQueryRequest(ds[:1]), 0), "trailing"},
		{"empty", nil, "truncated"},
		{"short count", []byte{0, 0}, "truncated"},
		{"negative count", []byte{0xff, 0xff, 0xff, 0xff}, "does not fit"},
		{"truncated digest", MarshalHashQueryRequest(ds[:2])[:43], "does not fit"},
		{"count lies", append([]byte{0, 0, 0, 2}, MarshalHashQueryRequest(ds[:1])[4:]...), "does not fit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseHashQueryRequest(tt.body, 0)
			if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseHashQueryRequest = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestHashQueryResponseWriterCountsKeys(t *testing.T) {
	var body bytes.Buffer
	rw, err := NewHashQueryResponseWriter(&body, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := rw.WriteKey([]byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := rw.Close(); err == nil {
		t.Fatal("Close after 1 of 2 announced keys succeeded")
	}
	if err := rw.WriteKey([]byte("two")); err != nil {
		t.Fatal(err)
	}
	if err := rw.WriteKey([]byte("three")); err == nil {
		t.Fatal("a third key of 2 announced was written")
	}
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := int64(body.Len()), HashQueryResponseSize(2, 6); got != want {
		t.Fatalf("wrote %d bytes, HashQueryResponseSize says %d", got, want)
	}
	if !bytes.HasSuffix(body.Bytes(), []byte("\r\n")) {
		t.Fatalf("response %q does not end with CRLF", body.Bytes())
	}
}

func TestReadHashQueryResponse(t *testing.T) {
	keys := [][]byte{[]byte("first key"), {}, bytes.Repeat([]byte{7}, 1000)}
	var body bytes.Buffer
	WriteHashQueryResponse(&body, keys)
	tests := []struct {
		name string
		body []byte
		lim  HashQueryLimits
		want string // error substring; "" for success
	}{
		{"with SKS's trailing CRLF", body.Bytes(), HashQueryLimits{}, ""},
		{"without a trailer", body.Bytes()[:body.Len()-2], HashQueryLimits{}, ""},
		{"garbage after keys", append(bytes.Clone(body.Bytes()), 'x'), HashQueryLimits{}, "unexpected bytes"},
		{"too many keys", body.Bytes(), HashQueryLimits{MaxKeys: 2}, "3 keys (limit 2)"},
		{"key too large", body.Bytes(), HashQueryLimits{MaxKeySize: 999}, "1000 bytes (limit 999)"},
		{"body too large", body.Bytes(), HashQueryLimits{MaxBody: 100}, "too large"},
		{"truncated", body.Bytes()[:30], HashQueryLimits{}, "EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got [][]byte
			err := ReadHashQueryResponse(bytes.NewReader(tt.body), tt.lim, func(k []byte) error {
				got = append(got, bytes.Clone(k))
				return nil
			})
			if tt.want == "" {
				if err != nil || len(got) != 3 || !bytes.Equal(got[2], keys[2]) {
					t.Fatalf("got %d keys, %v", len(got), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ReadHashQueryResponse = %v, want %q", err, tt.want)
			}
		})
	}
}

// fakeHKP serves /pks/hashquery from a map of digest to key bytes.
type fakeHKP struct {
	mu       sync.Mutex
	keys     map[[16]byte][]byte
	maxBatch int // answer 413 above this
	batches  []int
}

func (f *fakeHKP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/pks/hashquery" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	ds, err := ParseHashQueryRequest(body, 0)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.batches = append(f.batches, len(ds))
	f.mu.Unlock()
	if f.maxBatch > 0 && len(ds) > f.maxBatch {
		http.Error(w, "too many", http.StatusRequestEntityTooLarge)
		return
	}
	var keys [][]byte
	for _, d := range ds {
		if k, ok := f.keys[d]; ok {
			keys = append(keys, k)
		}
	}
	WriteHashQueryResponse(w, keys)
}

func keyFor(d [16]byte) []byte { return []byte(fmt.Sprintf("key %x", d)) }

func digestOfFakeKey(k []byte) ([16]byte, error) {
	var d [16]byte
	raw, err := hex.DecodeString(strings.TrimPrefix(string(k), "key "))
	if err != nil || len(raw) != 16 {
		return d, fmt.Errorf("not a fake key: %q", k)
	}
	return [16]byte(raw), nil
}

func TestHashQueryFetcher(t *testing.T) {
	for _, withDigest := range []bool{false, true} {
		t.Run(fmt.Sprintf("KeyDigest=%v", withDigest), func(t *testing.T) {
			ds := randDigests(rand.New(rand.NewPCG(3, 3)), 260)
			srv := &fakeHKP{keys: map[[16]byte][]byte{}, maxBatch: 30}
			for _, d := range ds[:250] { // the last 10 the peer does not have
				srv.keys[d] = keyFor(d)
			}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			poison := keyFor(ds[7])
			var mu sync.Mutex
			stored := map[string]bool{}
			f := NewHashQueryFetcher(func(ctx context.Context, key []byte) error {
				if bytes.Equal(key, poison) {
					return fmt.Errorf("no self-signature: %w", ErrRejected)
				}
				mu.Lock()
				stored[string(key)] = true
				mu.Unlock()
				return nil
			}, nil)
			if withDigest {
				f.KeyDigest = digestOfFakeKey
			}
			peer := Peer{Address: "127.0.0.1:1", HTTP: ts.URL}
			res, err := f.Fetch(context.Background(), peer, ds)
			if err != nil {
				t.Fatal(err)
			}
			if res.Stored != 249 || res.Rejected != 1 || len(stored) != 249 {
				t.Fatalf("result %+v, stored %d", res, len(stored))
			}
			for _, n := range srv.batches {
				if n > MaxHashQueryBatch {
					t.Fatalf("asked for %d digests at once", n)
				}
			}
			// The rejected key and the unserved digests are not asked again.
			res2, err := f.Fetch(context.Background(), peer, ds)
			if err != nil {
				t.Fatal(err)
			}
			if withDigest && res2.Skipped != 11 {
				t.Fatalf("second fetch skipped %d, want the rejected one and the 10 unserved", res2.Skipped)
			}
			if !withDigest && res2.Skipped < 11 {
				t.Fatalf("second fetch skipped %d, want at least 11", res2.Skipped)
			}
		})
	}
}

func TestHashQueryFetcherStopsOnStoreFailure(t *testing.T) {
	ds := randDigests(rand.New(rand.NewPCG(4, 4)), 5)
	srv := &fakeHKP{keys: map[[16]byte][]byte{}}
	for _, d := range ds {
		srv.keys[d] = keyFor(d)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	down := errors.New("database down")
	f := NewHashQueryFetcher(func(context.Context, []byte) error { return down }, nil)
	_, err := f.Fetch(context.Background(), Peer{Address: "x:1", HTTP: ts.URL}, ds)
	if !errors.Is(err, down) {
		t.Fatalf("Fetch = %v, want the store's error", err)
	}
}

func TestHashQueryFetcherGivesUpOnDeadPeer(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "broken", http.StatusInternalServerError)
	}))
	defer ts.Close()
	f := NewHashQueryFetcher(func(context.Context, []byte) error { return nil }, nil)
	ds := randDigests(rand.New(rand.NewPCG(5, 5)), 40)
	_, err := f.Fetch(context.Background(), Peer{Address: "x:1", HTTP: ts.URL}, ds)
	if err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("Fetch = %v, want an HTTP 500 error", err)
	}
}

func TestBoundedSetForgetsOldest(t *testing.T) {
	s := newBoundedSet(3, 1<<62)
	ds := randDigests(rand.New(rand.NewPCG(6, 6)), 5)
	var now = testNow
	for _, d := range ds {
		s.add(d, now)
	}
	if s.len() != 3 || s.has(ds[0], now) || s.has(ds[1], now) || !s.has(ds[4], now) {
		t.Fatalf("bounded set holds %d, wrong members", s.len())
	}
}

// TestHashQueryFetcherCountsKeysChangedByPolicy: a key the store callback
// reports as changed by the key policy is no refusal: it counts as stored
// (or unchanged, when the merge changed nothing) and as changed, and its
// digest is not asked for again.
func TestHashQueryFetcherCountsKeysChangedByPolicy(t *testing.T) {
	ds := randDigests(rand.New(rand.NewPCG(5, 5)), 10)
	srv := &fakeHKP{keys: map[[16]byte][]byte{}}
	for _, d := range ds {
		srv.keys[d] = keyFor(d)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	f := NewHashQueryFetcher(func(ctx context.Context, key []byte) error {
		switch {
		case bytes.Equal(key, keyFor(ds[0])):
			return fmt.Errorf("%w: capped", ErrChangedByPolicy)
		case bytes.Equal(key, keyFor(ds[1])):
			return fmt.Errorf("%w: %w: capped", ErrChangedByPolicy, ErrUnchanged)
		}
		return nil
	}, nil)
	f.KeyDigest = digestOfFakeKey
	peer := Peer{Address: "127.0.0.1:1", HTTP: ts.URL}
	res, err := f.Fetch(context.Background(), peer, ds)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stored != 9 || res.Unchanged != 1 || res.Changed != 2 || res.Rejected != 0 {
		t.Fatalf("result %+v, want 9 stored, 1 unchanged, 2 changed by policy, none rejected", res)
	}
	res, err = f.Fetch(context.Background(), peer, ds[:2])
	if err != nil || res.Skipped != 2 {
		t.Fatalf("second fetch of the changed keys: %+v, %v; want both skipped", res, err)
	}
}

// TestHashQueryFetcherLeavesDigestsInFlightToTheirFetch: overlapping
// sessions with one peer find the same keys missing; a second Fetch
// leaves the digests the first is still fetching to it, so each key is
// checked and stored once.
func TestHashQueryFetcherLeavesDigestsInFlightToTheirFetch(t *testing.T) {
	ds := randDigests(rand.New(rand.NewPCG(6, 6)), 5)
	srv := &fakeHKP{keys: map[[16]byte][]byte{}}
	for _, d := range ds {
		srv.keys[d] = keyFor(d)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	stores := 0
	f := NewHashQueryFetcher(func(ctx context.Context, key []byte) error {
		once.Do(func() { close(entered); <-release })
		mu.Lock()
		stores++
		mu.Unlock()
		return nil
	}, nil)
	peer := Peer{Address: "127.0.0.1:1", HTTP: ts.URL}
	first := make(chan FetchResult)
	go func() {
		res, err := f.Fetch(context.Background(), peer, ds)
		if err != nil {
			t.Error(err)
		}
		first <- res
	}()
	<-entered
	res, err := f.Fetch(context.Background(), peer, append(ds[:2:2], [16]byte{0xee}))
	if err != nil || res.Skipped != 2 || res.Requested != 1 {
		t.Fatalf("overlapping fetch: %+v, %v; want the 2 digests in flight skipped, the other asked for", res, err)
	}
	close(release)
	if res := <-first; res.Stored != 5 {
		t.Fatalf("first fetch: %+v, want 5 stored", res)
	}
	if stores != 5 {
		t.Errorf("%d keys stored, want each of 5 once", stores)
	}
}
