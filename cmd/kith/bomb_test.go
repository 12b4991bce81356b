package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// processCPU returns the user and system CPU time the process pid has
// used, from /proc/PID/stat (in clock ticks of 10 ms).
func processCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name, which is in parentheses: state is
	// the first, utime the 12th and stime the 13th.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		b.Fatalf("short /proc stat: %q", stat)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc stat: %q", stat)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// BenchmarkServeSignatureBomb reports the CPU-seconds (user and system,
// of the kith serve process alone) that one unauthenticated POST /pks/add
// of a signature bomb of issue 31 costs the real binary: a 2 MiB fake
// RSA-16384 key whose 990 self-signatures carry the right digest prefix,
// with exponent 2^24-1 (refused for its exponent) and 65537 (refused
// when its verification budget is spent). Issue 31 asks for under 0.2.
func BenchmarkServeSignatureBomb(b *testing.B) {
	srv := startServe(b, tempDir(b), nil, "--database-url", pgtest.NewDatabase(b))
	srv.waitHealth(b, http.StatusOK, time.Minute)
	for _, tc := range []struct {
		name string
		bomb keygen.Bomb
	}{
		{"exponent-2^24-1", keygen.Bomb{}},
		{"exponent-65537", keygen.Bomb{Exponent: 65537}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			raw, err := tc.bomb.Build()
			if err != nil {
				b.Fatal(err)
			}
			k, err := pgp.ParseKey(raw)
			if err != nil {
				b.Fatal(err)
			}
			var armored bytes.Buffer
			if err := pgp.WriteArmored(&armored, k); err != nil {
				b.Fatal(err)
			}
			form := url.Values{"keytext": {armored.String()}}.Encode()
			b.SetBytes(int64(len(form)))
			var cpu time.Duration
			for b.Loop() {
				start := processCPU(b, srv.cmd.Process.Pid)
				resp, err := http.Post("http://"+srv.addr+"/pks/add", "application/x-www-form-urlencoded", strings.NewReader(form))
				if err != nil {
					b.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				cpu += processCPU(b, srv.cmd.Process.Pid) - start
				if resp.StatusCode != http.StatusUnprocessableEntity {
					b.Fatalf("bomb: %d %s", resp.StatusCode, body)
				}
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N), "server-cpu-s/op")
		})
	}
}
