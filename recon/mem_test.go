package recon

import (
	"runtime"
	"time"
)

// testingMem measures the bytes a function allocates.
type testingMem struct{ bytes uint64 }

func (m *testingMem) measure(fn func()) {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	m.bytes = b.TotalAlloc - a.TotalAlloc
}

var testNow = time.Unix(1_700_000_000, 0)
