package api_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	gossh "golang.org/x/crypto/ssh"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/ssh"
	"github.com/kith-keyserver/kith/web/api"
)

// benchIdentities is how many identities the lookup benchmark stores.
const benchIdentities = 100_000

// bulkIdentities stores n identities, each with one SSH key proven by a
// claim record, through COPY. The records are hash-chained like real ones
// (their signatures are stand-ins: this measures lookups, not proofs).
func bulkIdentities(tb testing.TB, dbURL string, n int) {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	now := identity.TruncateTime(time.Now())
	var ids, factors, recs [][]any
	prev := identity.ZeroHash()
	for i := 1; i <= n; i++ {
		pub, _, _ := ed25519.GenerateKey(rand.Reader)
		sp, _ := gossh.NewPublicKey(pub)
		h := identity.Handle(fmt.Sprintf("user%06d", i))
		f := identity.SSHFactor(ssh.FingerprintOf(sp).String(), sp.Marshal())
		e := identity.Evidence{Method: identity.MethodSSHChallenge, Purpose: identity.PurposeClaim, Handle: h,
			From: f, Label: "bench", Statement: []byte("bench statement"), Signature: []byte("bench signature"),
			SignerKey: f.Data, Created: now}
		e.Seal(int64(i-1), prev)
		prev = e.Hash
		ids = append(ids, []any{int64(i), string(h), now})
		factors = append(factors, []any{int64(i), "ssh", f.Value, f.Data})
		recs = append(recs, []any{e.Seq, string(e.Method), string(e.Purpose), int64(i), string(h), int64(i),
			e.Label, e.Statement, e.Signature, e.SignerKey, e.Created, e.PrevHash, e.Hash})
	}
	copyIn := func(table string, cols []string, rows [][]any) {
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromRows(rows)); err != nil {
			tb.Fatalf("copy %s: %v", table, err)
		}
	}
	copyIn("identities", []string{"id", "handle", "created_at"}, ids)
	copyIn("factors", []string{"id", "kind", "value", "data"}, factors)
	copyIn("evidence", []string{"seq", "method", "purpose", "identity_id", "handle", "from_factor",
		"label", "statement", "signature", "signer_key", "created_at", "prev_hash", "hash"}, recs)
	for _, q := range []string{
		"SELECT setval('identities_id_seq', (SELECT max(id) FROM identities))",
		"SELECT setval('factors_id_seq', (SELECT max(id) FROM factors))",
		"ANALYZE identities", "ANALYZE factors", "ANALYZE evidence",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, "UPDATE evidence_head SET seq = $1, hash = $2", int64(n), prev); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkUserKeys measures GET /users/{handle}.keys over HTTP with 32
// concurrent clients on a store of 100,000 identities: "store" answers
// every request from PostgreSQL (no cache), "cache" from this node's cache
// (a working set of 1,000 handles, kept coherent by NOTIFY). It reports
// requests per second and the 50th and 99th percentile latency.
func BenchmarkUserKeys(b *testing.B) {
	dbURL := pgtest.NewDatabase(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := postgres.Open(ctx, dbURL, postgres.Options{MaxConns: 32})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	start := time.Now()
	bulkIdentities(b, dbURL, benchIdentities)
	b.Logf("stored %d identities in %s", benchIdentities, time.Since(start).Round(time.Millisecond))

	for _, mode := range []struct {
		name    string
		watcher api.Watcher
		handles int
	}{{"store", nil, benchIdentities}, {"cache", st, 1000}} {
		b.Run(mode.name, func(b *testing.B) {
			h := newHandler(ctx, b, st, api.Options{Watcher: mode.watcher})
			if mode.watcher != nil {
				waitListening(b, h)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			client := &http.Client{Transport: tr}
			defer tr.CloseIdleConnections()
			const clients = 32
			lat := make([][]time.Duration, clients)
			var wg sync.WaitGroup
			per := int(math.Ceil(float64(b.N) / clients))
			b.ResetTimer()
			t0 := time.Now()
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := mrand.New(mrand.NewPCG(uint64(c), 1))
					for range per {
						u := fmt.Sprintf("%s/users/user%06d.keys", srv.URL, 1+r.IntN(mode.handles))
						s := time.Now()
						resp, err := client.Get(u)
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							b.Errorf("%s: %d", u, resp.StatusCode)
							return
						}
						lat[c] = append(lat[c], time.Since(s))
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(t0)
			b.StopTimer()
			var all []time.Duration
			for _, l := range lat {
				all = append(all, l...)
			}
			if len(all) == 0 {
				return
			}
			sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
			pct := func(p float64) time.Duration { return all[int(float64(len(all)-1)*p)] }
			b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
			b.ReportMetric(float64(pct(0.50).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(pct(0.99).Microseconds())/1000, "p99-ms")
		})
	}
}
