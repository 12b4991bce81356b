package keys_test

import (
	"bytes"
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/keys/inprocess"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime(t testing.TB) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkUploadSignatureBomb reports the CPU-seconds (user and system,
// from getrusage) one armored signature bomb of issue 31 costs through
// the upload path every frontend takes (read, key policy, refusal), as an
// unauthenticated POST /pks/add delivers it: an RSA-16384 key with
// exponent 2^24-1 and 990 bad self-signatures with the right digest
// prefix. Issue 31 asks for under 0.2.
func BenchmarkUploadSignatureBomb(b *testing.B) {
	armored, err := keygen.Bomb{}.Armored()
	if err != nil {
		b.Fatal(err)
	}
	svc := keys.NewService(inprocess.New(inprocess.Options{}), keys.Options{})
	ctx := context.Background()
	b.SetBytes(int64(len(armored)))
	var cpu time.Duration
	for b.Loop() {
		start := cpuTime(b)
		ks, err := pgp.ReadKeys(bytes.NewReader(armored))
		if err != nil || len(ks) != 1 {
			b.Fatalf("read: %d keys, %v", len(ks), err)
		}
		_, err = svc.Upload(ctx, ks[0], keys.UploadOptions{})
		cpu += cpuTime(b) - start
		var rej *keys.Rejection
		if !errors.As(err, &rej) {
			b.Fatalf("bomb not refused: %v", err)
		}
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}
