package tlog_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/tlog"
)

// BenchmarkAppend measures evidence appends (one record a transaction,
// as an identity write makes them) without the transparency log, and with
// its background signer integrating and signing beside them (at a 10 ms
// interval, far more often than the 2 s default, as a worst case).
//
//	go test -run '^$' -bench Append -benchtime 2000x ./identity/tlog/
func BenchmarkAppend(b *testing.B) {
	for _, withLog := range []bool{false, true} {
		b.Run(fmt.Sprintf("log=%v", withLog), func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			st := pgtest.NewStore(b)
			var l *tlog.Log
			if withLog {
				key, err := tlog.NewKey("bench/log", make([]byte, tlog.SeedSize))
				if err != nil {
					b.Fatal(err)
				}
				l = tlog.New(st, key, tlog.Options{Interval: 10 * time.Millisecond})
				done := make(chan struct{})
				go func() { l.Run(ctx); close(done) }()
				defer func() { cancel(); <-done }()
			}
			b.ResetTimer()
			for i := range b.N {
				var fp [32]byte
				binary.BigEndian.PutUint64(fp[:], uint64(i))
				fp = sha256.Sum256(fp[:])
				err := st.Update(ctx, func(ctx context.Context, tx identity.Tx) error {
					return tx.Append(ctx, &identity.Evidence{Method: identity.MethodPGPUIDSelfSig,
						From: identity.PGPFactor(fp[:20]), To: identity.EmailFactor(fmt.Sprintf("b%d@example.org", i)),
						Statement: make([]byte, 200), Signature: make([]byte, 300), Created: time.Now()})
				})
				if err != nil {
					b.Fatal(err)
				}
				if l != nil {
					l.Notify()
				}
			}
			b.StopTimer()
			if l != nil {
				n, err := l.Integrate(ctx)
				if err != nil || n != int64(b.N) {
					b.Fatalf("tree of %d after %d appends: %v", n, b.N, err)
				}
			}
		})
	}
}

// BenchmarkTile measures serving a full leaf-hash tile and a full entry
// bundle of a 4096-record tree over HTTP: read from the stored hashes,
// never recomputed.
func BenchmarkTile(b *testing.B) {
	ctx := context.Background()
	st := pgtest.NewStore(b)
	err := st.Update(ctx, func(ctx context.Context, tx identity.Tx) error {
		for i := range 4096 {
			fp := sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i)))
			if err := tx.Append(ctx, &identity.Evidence{Method: identity.MethodPGPUIDSelfSig, From: identity.PGPFactor(fp[:20]),
				To: identity.EmailFactor(fmt.Sprintf("t%d@example.org", i)), Created: time.Now()}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	key, _ := tlog.NewKey("bench/log", make([]byte, tlog.SeedSize))
	l := tlog.New(st, key, tlog.Options{})
	if _, err := l.Integrate(ctx); err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	tlog.NewHandler(st, key.VerifierKey(), nil).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, path := range []string{"/log/tile/0/007", "/log/tile/1/000.p/16", "/log/tile/entries/007"} {
		b.Run(path, func(b *testing.B) {
			for range b.N {
				resp, err := http.Get(srv.URL + path)
				if err != nil || resp.StatusCode != 200 {
					b.Fatalf("GET %s: %v %v", path, resp, err)
				}
				resp.Body.Close()
			}
		})
	}
}
