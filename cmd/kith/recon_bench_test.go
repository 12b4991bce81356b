package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
	"github.com/kith-keyserver/kith/recon"
	"github.com/kith-keyserver/kith/recon/skstest"
)

// countingProxy forwards TCP connections from its listener to target and
// records when the first connection reached the target and how many bytes
// it carried both ways (later sessions are not counted).
type countingProxy struct {
	ln     net.Listener
	target atomic.Value // string
	bytes  atomic.Int64 // of the first forwarded connection
	first  atomic.Int64 // unix nanos when it was forwarded
	wg     sync.WaitGroup
}

func newCountingProxy(tb testing.TB) *countingProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &countingProxy{ln: ln}
	go p.serve()
	tb.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *countingProxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *countingProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		target, _ := p.target.Load().(string)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer c.Close()
			if target == "" {
				return
			}
			up, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				return
			}
			defer up.Close()
			counted := p.first.CompareAndSwap(0, time.Now().UnixNano())
			done := make(chan struct{}, 2)
			pipe := func(dst, src net.Conn) {
				n, _ := io.Copy(dst, src)
				if counted {
					p.bytes.Add(n)
				}
				if tc, ok := dst.(*net.TCPConn); ok {
					tc.CloseWrite()
				}
				done <- struct{}{}
			}
			go pipe(up, c)
			go pipe(c, up)
			<-done
			<-done
		}()
	}
}

// hgetAll polls until the HKP server at base serves every digest, and
// returns when it did.
func hgetAll(ctx context.Context, base string, digests [][16]byte) (time.Time, bool) {
	left := append([][16]byte(nil), digests...)
	client := &http.Client{Timeout: 10 * time.Second}
	for {
		var still [][16]byte
		for _, d := range left {
			resp, err := client.Get(base + "/pks/lookup?op=hget&search=" + pgp.FormatDigest(d))
			if err == nil {
				resp.Body.Close()
			}
			if err != nil || resp.StatusCode != http.StatusOK {
				still = append(still, d)
			}
		}
		if len(still) == 0 {
			return time.Now(), true
		}
		left = still
		select {
		case <-ctx.Done():
			return time.Time{}, false
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// BenchmarkReconRoundKithVsSKS measures one recon round between two nodes
// holding 100,000 keys each with 1,000 differences (500 each way), for
// two Kith nodes and, in the same run, for two real SKS instances holding
// the same sets: time until both sides serve the union (hashquery fetch
// included) and recon bytes exchanged, counted by the same proxy.
//
//	go test ./cmd/kith -run '^$' -bench ReconRoundKithVsSKS -benchtime 1x -timeout 30m
func BenchmarkReconRoundKithVsSKS(b *testing.B) {
	skstest.FindBinary(b)
	size, half := 100000, 500
	if s := testingSize(); s > 0 {
		size = s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	raw, err := keygen.New(55).Range(0, size+half)
	if err != nil {
		b.Fatal(err)
	}
	keys := policyKeys(b, raw)
	aKeys, bKeys := keys[:size], keys[half:] // a lacks b's last 500, b lacks a's first 500
	var diff [][16]byte
	for _, k := range append(append([]*pgp.Key(nil), keys[:half]...), keys[size:]...) {
		diff = append(diff, k.Digest())
	}
	bytesOf := func(ks []*pgp.Key) [][]byte {
		out := make([][]byte, len(ks))
		for i, k := range ks {
			out[i] = k.Bytes()
		}
		return out
	}
	b.ResetTimer()
	for range b.N {
		// Kith to Kith, through the proxy.
		b.StopTimer()
		ka, kb := newReconNode(b, ctx, aKeys), newReconNode(b, ctx, bKeys)
		ka.start(b, ctx, kb.reconLn.Addr().String(), kb.http.URL)
		kb.start(b, ctx, ka.reconLn.Addr().String(), ka.http.URL)
		kproxy := newCountingProxy(b)
		kproxy.target.Store(kb.reconLn.Addr().String())
		b.StartTimer()
		start := time.Now()
		if _, _, err := ka.manager.ReconcileWith(ctx, recon.Peer{Address: kproxy.ln.Addr().String(), HTTP: kb.http.URL}); err != nil {
			b.Fatal(err)
		}
		endA, okA := hgetAll(ctx, ka.http.URL, diff)
		endB, okB := hgetAll(ctx, kb.http.URL, diff)
		if !okA || !okB {
			b.Fatal("Kith nodes did not converge")
		}
		kithTook := later(endA, endB).Sub(start)
		b.StopTimer()

		// SKS to SKS with the same sets: A gossips (about every second)
		// to B through the proxy; B stays quiet. The clock starts when the
		// proxy first reaches B.
		sproxy := newCountingProxy(b)
		sa := skstest.Start(b, skstest.Options{Keys: bytesOf(aKeys), Membership: []string{"127.0.0.1 " + strconv.Itoa(sproxy.port())},
			GossipInterval: 0.02, DebugLevel: 4})
		_, saPort, _ := net.SplitHostPort(sa.ReconAddr)
		sb := skstest.Start(b, skstest.Options{Keys: bytesOf(bKeys), Membership: []string{"127.0.0.1 " + saPort},
			GossipInterval: 60, DebugLevel: 4})
		sproxy.target.Store(sb.ReconAddr)
		b.StartTimer()
		endSA, okSA := hgetAll(ctx, sa.HKPURL, diff)
		endSB, okSB := hgetAll(ctx, sb.HKPURL, diff)
		if !okSA || !okSB {
			b.Fatalf("SKS nodes did not converge\n%s", sa.Log("recon"))
		}
		firstConn := time.Unix(0, sproxy.first.Load())
		sksTook := later(endSA, endSB).Sub(firstConn)
		b.StopTimer()
		b.ReportMetric(kithTook.Seconds(), "kith-s")
		b.ReportMetric(sksTook.Seconds(), "sks-s")
		b.ReportMetric(sksTook.Seconds()/kithTook.Seconds(), "sks/kith")
		b.ReportMetric(float64(kproxy.bytes.Load()), "kith-recon-bytes")
		b.ReportMetric(float64(sproxy.bytes.Load()), "sks-recon-bytes")
	}
}

// testingSize lets a developer run the benchmark on fewer keys:
// KITH_BENCH_RECON_KEYS=20000.
func testingSize() int {
	n, _ := strconv.Atoi(os.Getenv("KITH_BENCH_RECON_KEYS"))
	return n
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
