package pgp

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/pgp/keygen"
)

// bombs are the signature bombs of issue 31: one user ID with 990 bad
// self-signatures (the upload measured at 6.4-7.6 CPU-seconds),
// many user IDs with many each, many subkeys with many bad bindings, the
// same with the exponent real keys use, and RSA-8192.
var bombs = []struct {
	name string
	bomb keygen.Bomb
}{
	{"uid-990", keygen.Bomb{}},
	{"uids-50x19", keygen.Bomb{UserIDs: 50, SigsPerUserID: 19}},
	{"subkeys-45x20", keygen.Bomb{Subkeys: 45, SigsPerSubkey: 20}},
	{"uid-990-e65537", keygen.Bomb{Exponent: 65537}},
	{"uids-50x19-e65537", keygen.Bomb{Exponent: 65537, UserIDs: 50, SigsPerUserID: 19}},
	{"subkeys-45x20-e65537", keygen.Bomb{Exponent: 65537, Subkeys: 45, SigsPerSubkey: 20}},
	{"rsa8192-uid-1900-e65537", keygen.Bomb{Bits: 8192, Exponent: 65537, SigsPerUserID: 1900}},
}

// buildBomb builds b and parses it as one key.
func buildBomb(t testing.TB, b keygen.Bomb) *Key {
	t.Helper()
	raw, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return mustParse(t, raw)
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(t testing.TB) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSignatureBomb reports the CPU-seconds (user and system, from
// getrusage) the default policy spends on one signature bomb before it
// refuses the key: the figure issue 31 asks to bring under 0.2.
func BenchmarkSignatureBomb(b *testing.B) {
	for _, tc := range bombs {
		b.Run(tc.name, func(b *testing.B) {
			k := buildBomb(b, tc.bomb)
			b.SetBytes(int64(len(k.Bytes())))
			var cpu time.Duration
			for b.Loop() {
				start := cpuTime(b)
				_, _, err := Policy{}.Apply(k)
				cpu += cpuTime(b) - start
				if !errors.Is(err, ErrNoSelfSignature) && !errors.Is(err, ErrUnsupportedKey) {
					b.Fatalf("bomb not refused: %v", err)
				}
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}
