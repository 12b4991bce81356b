package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
	"github.com/kith-keyserver/kith/recon/skstest"
)

// The soak test is not part of the normal test run: it runs only with
// -soak, for -soak-duration (10 minutes by default), e.g.
//
//	CI=true go test ./cmd/kith -run TestSoak -soak -timeout 0 -v
var (
	soak         = flag.Bool("soak", false, "run TestSoak")
	soakDuration = flag.Duration("soak-duration", 10*time.Minute, "how long TestSoak runs")
	soakSample   = flag.Duration("soak-sample", 10*time.Second, "TestSoak's sampling `interval`")
	soakRate     = flag.Int("soak-rate", 80, "TestSoak's target HKP requests per second (all workers together)")
)

// soakStats collects the client's view of every HKP request.
type soakStats struct {
	mu        sync.Mutex
	latencies []time.Duration // since the last sample
	requests  int64
	fivexx    atomic.Int64
	byKind    map[string]int64
}

func (s *soakStats) record(kind string, d time.Duration, code int) {
	if code >= 500 {
		s.fivexx.Add(1)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latencies = append(s.latencies, d)
	s.requests++
	s.byKind[kind]++
}

// take returns the p99 of the latencies since the last call and resets.
func (s *soakStats) take() (p99 time.Duration, n int) {
	s.mu.Lock()
	l := s.latencies
	s.latencies = nil
	s.mu.Unlock()
	if len(l) == 0 {
		return 0, 0
	}
	slices.Sort(l)
	return l[(len(l)*99)/100], len(l)
}

// soakSample is one row of the report.
type soakSampleRow struct {
	at         time.Duration
	rssKB      int
	cacheKB    int // the HKP answer cache, which fills up to its cap
	heapKB     int
	goroutines float64
	dbConns    int
	fds        int
	p99        time.Duration
	requests   int
	fivexx     int64
}

// procRSS returns a process's resident set in kB.
func procRSS(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

func procFDs(pid int) int {
	e, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(e)
}

// TestSoak runs a real kith serve (embedded cluster) with an SKS recon
// peer under a mixed load for -soak: cold and warm lookups, uploads of new
// and of changed keys, and identity claims, additions and revocations. It
// samples kith's RSS, goroutines, database connections, open files and
// the p99 latency every -soak-sample, and fails on any 5xx answer or on a
// growth trend after warm-up.
func TestSoak(t *testing.T) {
	if !*soak {
		t.Skip("soak test: run with -soak [-soak-duration 10m] -timeout 0")
	}
	requirePostgresBinaries(t)
	testkit.Tool(t, "ssh-keygen")
	skstest.FindBinary(t)
	dir := tempDir(t)

	// The recon peer: an SKS that gossips with Kith every few seconds.
	reconPort := testkit.FreePort(t)
	sks := skstest.Start(t, skstest.Options{
		Membership:     []string{"127.0.0.1 " + strconv.Itoa(reconPort)},
		GossipInterval: 0.5, // minutes
	})
	conf := filepath.Join(dir, "kith.toml")
	// The load comes from one address: no per-client caps.
	os.WriteFile(conf, []byte(fmt.Sprintf(`challenges_per_minute = -1
uploads_per_minute = -1
email_lookups_per_minute = -1
log_level = "warn"
[recon]
interval = "20s"
[[recon.peer]]
address = %q
http = %q
`, sks.ReconAddr, sks.HKPURL)), 0o644)
	s := startServe(t, dir, nil, "--config", conf, "--recon-listen", net.JoinHostPort("127.0.0.1", strconv.Itoa(reconPort)))
	s.waitHealth(t, http.StatusOK, 60*time.Second)
	base := "http://" + s.addr
	pid := s.cmd.Process.Pid
	dbURL := embeddedURL(filepath.Join(dir, "kith-data", "postgres"))

	stats := &soakStats{byKind: map[string]int64{}}
	client := &http.Client{Timeout: 60 * time.Second}
	do := func(kind string, req *http.Request) int {
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			stats.record(kind, time.Since(start), 599)
			t.Logf("%s: %v", kind, err)
			return 599
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		stats.record(kind, time.Since(start), resp.StatusCode)
		if resp.StatusCode >= 500 {
			t.Logf("%s %s: %s", req.Method, req.URL, resp.Status)
		}
		return resp.StatusCode
	}
	get := func(kind, path string) int {
		req, _ := http.NewRequest("GET", base+path, nil)
		return do(kind, req)
	}
	add := func(kind string, key []byte) int {
		req, _ := http.NewRequest("POST", base+"/pks/add", bytes.NewReader(key))
		req.Header.Set("Content-Type", "application/pgp-keys")
		return do(kind, req)
	}

	// Keys come from a generator, each first uploaded without its
	// subkeys, later whole: the second upload changes the stored key.
	gen := keygen.New(99)
	var nextKey atomic.Int64
	var storedMu sync.Mutex
	var stored []string    // fingerprints uploaded
	var pending []*pgp.Key // uploaded partially, whole version not yet
	var looked = map[string]bool{}
	newKey := func() (*pgp.Key, []byte) {
		raw, err := gen.Key(int(nextKey.Add(1)))
		if err != nil {
			return nil, nil
		}
		k, err := pgp.ParseKey(raw)
		if err != nil {
			return nil, nil
		}
		var partial []pgp.Packet
		for _, p := range k.Packets() {
			if p.Tag == pgp.TagPublicSubkey {
				break
			}
			partial = append(partial, p)
		}
		return k, pgp.NewKey(partial).Bytes()
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	const workers = 4
	perWorker := time.Second * workers / time.Duration(max(*soakRate, 1))
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 16))
			tick := time.NewTicker(perWorker)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				storedMu.Lock()
				n := len(stored)
				storedMu.Unlock()
				switch op := r.IntN(100); {
				case op < 20 || n < 20: // upload a new key (without subkeys)
					k, partial := newKey()
					if k == nil {
						continue
					}
					if add("upload-new", partial) == http.StatusOK {
						storedMu.Lock()
						stored = append(stored, fmt.Sprintf("%X", k.Fingerprint()))
						pending = append(pending, k)
						storedMu.Unlock()
					}
				case op < 30: // upload the changed (whole) key
					storedMu.Lock()
					var k *pgp.Key
					if len(pending) > 0 {
						k, pending = pending[0], pending[1:]
					}
					storedMu.Unlock()
					if k != nil {
						add("upload-changed", k.Bytes())
					}
				case op < 70: // warm: one of the 20 newest-but-settled keys
					storedMu.Lock()
					fpr := stored[r.IntN(min(n, 20))]
					storedMu.Unlock()
					get("lookup-warm", "/pks/lookup?op=get&options=mr&search=0x"+fpr)
				case op < 85: // cold: a stored key not asked for yet
					storedMu.Lock()
					var fpr string
					for range 10 {
						c := stored[r.IntN(n)]
						if !looked[c] {
							looked[c] = true
							fpr = c
							break
						}
					}
					storedMu.Unlock()
					if fpr != "" {
						get("lookup-cold", "/pks/lookup?op=index&options=mr&search=0x"+fpr)
					}
				default: // a miss: a fingerprint nobody has
					var b [20]byte
					for i := range b {
						b[i] = byte(r.IntN(256))
					}
					get("lookup-miss", fmt.Sprintf("/pks/lookup?op=get&options=mr&search=0x%X", b))
				}
			}
		}()
	}

	// Identities: claimed, given a second key, and that key revoked, over
	// and over, from the test goroutine between samples.
	api := &apiServer{t: t, srv: &httptest.Server{URL: base}}
	keyDir := t.TempDir()
	identities := 0
	identity := func() {
		h := fmt.Sprintf("soak%d", identities)
		k1 := newSSHKeyPair(t, keyDir, h+"-1")
		k2 := newSSHKeyPair(t, keyDir, h+"-2")
		api.claim(h, k1)
		api.add(h, k2, k1, false)
		api.revoke(h, k2, k1)
		stats.mu.Lock()
		stats.byKind["identity-claim+add+revoke"]++
		stats.mu.Unlock()
		identities++
	}

	var rows []soakSampleRow
	began := time.Now()
	sample := time.NewTicker(*soakSample)
	defer sample.Stop()
	t.Logf("%8s %9s %9s %9s %10s %8s %5s %9s %8s %5s", "t", "rss_kB", "cache_kB", "heap_kB", "goroutines", "db_conns", "fds", "p99", "requests", "5xx")
	for time.Since(began) < *soakDuration {
		select {
		case <-s.exited:
			t.Fatalf("kith exited during the soak: %v\n%s", s.err, s.stderr)
		case <-sample.C:
			p99, n := stats.take()
			conns, _ := backends(t, dbURL)
			row := soakSampleRow{at: time.Since(began).Round(time.Second), rssKB: procRSS(pid),
				cacheKB: int(metric(t, base, "kith_hkp_cache_bytes") / 1024), heapKB: int(metric(t, base, "go_memstats_heap_inuse_bytes") / 1024),
				goroutines: metric(t, base, "go_goroutines"), dbConns: conns, fds: procFDs(pid),
				p99: p99, requests: n, fivexx: stats.fivexx.Load()}
			rows = append(rows, row)
			t.Logf("%8s %9d %9d %9d %10.0f %8d %5d %9s %8d %5d", row.at, row.rssKB, row.cacheKB, row.heapKB, row.goroutines, row.dbConns, row.fds,
				row.p99.Round(100*time.Microsecond), row.requests, row.fivexx)
		default:
			identity()
		}
	}
	close(stop)
	wg.Wait()

	stats.mu.Lock()
	t.Logf("requests by kind: %v; identities: %d; 5xx: %d", stats.byKind, identities, stats.fivexx.Load())
	stats.mu.Unlock()
	// The recon peer got Kith's uploads: of the first 20, how many SKS
	// serves.
	storedMu.Lock()
	first := stored[:min(20, len(stored))]
	storedMu.Unlock()
	atSKS := 0
	for _, fpr := range first {
		if code, _, err := sks.Get("/pks/lookup?op=get&options=mr&search=0x" + fpr); err == nil && code == http.StatusOK {
			atSKS++
		}
	}
	t.Logf("SKS serves %d of the first %d keys uploaded to kith; kith's recon tree holds %v digests",
		atSKS, len(first), metric(t, base, "kith_recon_tree_digests"))
	if n := stats.fivexx.Load(); n > 0 {
		t.Errorf("%d answers were 5xx", n)
	}
	checkFlat(t, rows)
	s.stop(t)
}

// checkFlat fails when a sampled figure grows after warm-up: it compares
// the mean of the last third of the samples after the first fifth with
// the mean of the first third of them.
func checkFlat(t *testing.T, rows []soakSampleRow) {
	t.Helper()
	rows = rows[len(rows)/5:]
	if len(rows) < 6 {
		t.Logf("too few samples (%d after warm-up) to judge a trend", len(rows))
		return
	}
	third := len(rows) / 3
	mean := func(rs []soakSampleRow, f func(soakSampleRow) float64) float64 {
		var sum float64
		for _, r := range rs {
			sum += f(r)
		}
		return sum / float64(len(rs))
	}
	for _, m := range []struct {
		name  string
		f     func(soakSampleRow) float64
		slack float64 // allowed growth, absolute
		ratio float64 // allowed growth, relative
	}{
		// The answer cache grows until its cap by design; what else
		// the process holds must not.
		{"rss_kB - cache_kB", func(r soakSampleRow) float64 { return float64(r.rssKB - r.cacheKB) }, 0, 0.25},
		{"heap_kB - cache_kB", func(r soakSampleRow) float64 { return float64(r.heapKB - r.cacheKB) }, 0, 0.25},
		{"goroutines", func(r soakSampleRow) float64 { return r.goroutines }, 10, 0.10},
		{"db_conns", func(r soakSampleRow) float64 { return float64(r.dbConns) }, 2, 0},
		{"fds", func(r soakSampleRow) float64 { return float64(r.fds) }, 10, 0.10},
	} {
		first, last := mean(rows[:third], m.f), mean(rows[len(rows)-third:], m.f)
		t.Logf("%s: mean %.1f early, %.1f late", m.name, first, last)
		if last > first*(1+m.ratio)+m.slack {
			t.Errorf("%s grows after warm-up: mean %.1f early, %.1f late", m.name, first, last)
		}
	}
}
