package hkp

import (
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// BenchmarkCachedGet measures the handler's own cost for a cached op=get
// (no network): the path the throughput targets depend on.
func BenchmarkCachedGet(b *testing.B) {
	st := benchStore(b)
	h := NewHandler(st, nil, Options{Logger: quietLogger()})
	h.cache.enable()
	e := newEntity(b, "Bench Mark", "bench@example.org", 900)
	k := mustApply(b, binaryKey(b, e))
	if _, err := st.AddKey(b.Context(), k); err != nil {
		b.Fatal(err)
	}
	target := "/pks/lookup?op=get&options=mr&search=0x" + fpHex(e)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", target, nil))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest("GET", target, nil)
		for pb.Next() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != 200 {
				b.Fatal(w.Code)
			}
		}
	})
}

// BenchmarkUncachedGet measures an op=get the cache cannot answer: every
// request goes to the store, as a cold lookup does.
func BenchmarkUncachedGet(b *testing.B) {
	benchUncached(b, func(k *pgp.Key) string {
		return fmt.Sprintf("/pks/lookup?op=get&options=mr&search=0x%X", k.Fingerprint())
	})
}

// BenchmarkUncachedIndex measures a machine-readable index by words (what
// gpg --search-keys asks) that the cache cannot answer.
func BenchmarkUncachedIndex(b *testing.B) {
	benchUncached(b, func(k *pgp.Key) string {
		name, _, _ := strings.Cut(k.Describe().UserIDs[0].Text, " <")
		return "/pks/lookup?op=index&options=mr&search=" + url.QueryEscape(name)
	})
}

// benchUncached stores 500 typical keys and requests target(key) of each
// in turn from a handler without a cache, from parallel clients.
func benchUncached(b *testing.B, target func(*pgp.Key) string) {
	st := benchStore(b)
	h := NewHandler(st, nil, Options{Logger: quietLogger(), CacheSize: -1})
	ks, err := keygen.TypicalKeys(500, 7)
	if err != nil {
		b.Fatal(err)
	}
	var targets []string
	var batch []*pgp.Key
	for _, raw := range ks {
		k := mustApply(b, raw)
		batch = append(batch, k)
		targets = append(targets, target(k))
	}
	if _, err := st.AddKeys(b.Context(), batch); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", targets[n.Add(1)%int64(len(targets))], nil))
			if w.Code != 200 {
				b.Fatal(w.Code, w.Body.String())
			}
		}
	})
}

// BenchmarkAddNewKeys measures POST /pks/add of keys the store does not
// hold yet, as concurrent gpg --send-keys of new keys do.
func BenchmarkAddNewKeys(b *testing.B) {
	st := benchStore(b)
	ks := keys.NewService(st, keys.Options{Policy: pgp.DefaultPolicy(), Logger: quietLogger()})
	h := NewHandler(st, ks, Options{Logger: quietLogger()})
	ks.Subscribe(h)
	keys, err := keygen.TypicalKeys(max(b.N, 1), 11)
	if err != nil {
		b.Fatal(err)
	}
	bodies := make([]string, len(keys))
	for i, k := range keys {
		bodies[i] = armored(b, k)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1) - 1
			req := httptest.NewRequest("POST", "/pks/add", strings.NewReader(url.Values{"keytext": {bodies[i%int64(len(bodies))]}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != 200 {
				b.Fatal(w.Code, w.Body.String())
			}
		}
	})
}
