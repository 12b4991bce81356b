package hkp

import (
	"net/http/httptest"
	"testing"
)

// BenchmarkCachedGet measures the handler's own cost for a cached op=get
// (no network): the path the throughput targets depend on.
func BenchmarkCachedGet(b *testing.B) {
	st := benchStore(b)
	h := NewHandler(st, Options{Logger: quietLogger()})
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
