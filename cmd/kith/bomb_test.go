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
			armored, err := tc.bomb.Armored()
			if err != nil {
				b.Fatal(err)
			}
			form := url.Values{"keytext": {string(armored)}}.Encode()
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

// TestMaxConcurrentUploadsThroughTheBinary: with
// hkp.max_concurrent_uploads = 1, an upload whose body is still arriving
// holds no slot (a request is admitted once its body is read), so another
// upload is admitted and stored meanwhile, and the slow one is stored
// when its body is whole.
func TestMaxConcurrentUploadsThroughTheBinary(t *testing.T) {
	t.Parallel()
	srv := startServe(t, tempDir(t), nil, "--database-url", pgtest.NewDatabase(t), "--hkp-max-concurrent-uploads", "1")
	srv.waitHealth(t, http.StatusOK, time.Minute)
	armoredKey := func(name string, seed int64) string {
		raw, err := keygen.PublicEd25519(name, strings.ToLower(name)+"@example.org", time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC), seed)
		if err != nil {
			t.Fatal(err)
		}
		k, err := pgp.ParseKey(raw)
		if err != nil {
			t.Fatal(err)
		}
		var armored bytes.Buffer
		if err := pgp.WriteArmored(&armored, k); err != nil {
			t.Fatal(err)
		}
		return armored.String()
	}
	alice, bob := armoredKey("Alice", 1), armoredKey("Bob", 2)
	type answer struct {
		code int
		body string
	}
	post := func(body io.Reader) answer {
		resp, err := http.Post("http://"+srv.addr+"/pks/add", "application/pgp-keys", body)
		if err != nil {
			return answer{-1, err.Error()}
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return answer{resp.StatusCode, string(b)}
	}
	// The slow upload: half of its body now, the rest after another
	// upload was answered.
	pr, pw := io.Pipe()
	slow := make(chan answer, 1)
	go func() { slow <- post(pr) }()
	if _, err := io.WriteString(pw, alice[:len(alice)/2]); err != nil {
		t.Fatal(err)
	}
	if a := post(strings.NewReader(bob)); a.code != http.StatusOK || !strings.Contains(a.body, "1 inserted") {
		t.Errorf("upload beside a slow one: %d %s", a.code, a.body)
	}
	io.WriteString(pw, alice[len(alice)/2:])
	pw.Close()
	if a := <-slow; a.code != http.StatusOK || !strings.Contains(a.body, "1 inserted") {
		t.Fatalf("slow upload: %d %s", a.code, a.body)
	}
}
