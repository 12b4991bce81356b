// serve.go: hkpbench serve: a Kith HKP server on loopback over a store
// filled with generated typical keys, and URL lists to load it with.

package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kith-keyserver/kith/hkp"
	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/embedded"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// Bounds on the generated store.
const (
	maxKeys      = 2_000_000
	loadBatch    = 500
	sampleURLs   = 10_000
	maxServeTime = 24 * time.Hour
)

func serveCommand(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	dataDir := fs.String("data", "hkpbench-data", "directory of the private PostgreSQL cluster (ignored with -database-url)")
	dbURL := fs.String("database-url", "", "use this PostgreSQL database instead of a private cluster")
	nKeys := fs.Int("keys", 200_000, "generate typical keys until the store holds this many")
	seed := fs.Int64("seed", 1, "key generator seed")
	listen := fs.String("listen", "127.0.0.1:11371", "loopback address to serve HKP on")
	urlsDir := fs.String("urls-out", ".", "directory for the URL lists (get-fingerprint.txt, index-email.txt, index-words.txt)")
	cacheMB := fs.Int("cache-mb", 64, "answer cache size in MiB (0: no cache)")
	pgUser := fs.String("postgres-user", "postgres", "system user that runs the private cluster when run as root")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *nKeys < 0 || *nKeys > maxKeys {
		return fmt.Errorf("serve: -keys must be 0..%d", maxKeys)
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("serve: -listen: %w", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("serve: -listen %s is not a loopback address", *listen)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	url := *dbURL
	if url == "" {
		abs, err := filepath.Abs(*dataDir)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return err
		}
		cluster, err := embedded.Start(ctx, embedded.Options{
			Dir: filepath.Join(abs, "postgres"), User: *pgUser,
			Settings: map[string]string{"max_connections": "200", "shared_buffers": "256MB"},
		})
		if err != nil {
			return fmt.Errorf("serve: start PostgreSQL: %w", err)
		}
		defer cluster.Stop()
		url = cluster.URL()
	}
	st, err := postgres.Open(ctx, url, postgres.Options{MaxConns: 32})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer st.Close()
	// Uploads during a run take the server's upload path: the key policy,
	// merge and store, the links of changed keys, the HKP cache.
	ids, err := identity.NewService(st, &verify.Verifier{Keys: st}, identity.ServiceOptions{Server: "hkpbench", Blocklist: st})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	ks := keys.NewService(st, keys.Options{Policy: pgp.DefaultPolicy(), Identities: ids, Logger: log})
	if err := fill(ctx, st, ks, *nKeys, *seed, stdout); err != nil {
		return err
	}
	if err := writeURLLists(ctx, st, *listen, *urlsDir, stdout); err != nil {
		return err
	}

	cache := int64(*cacheMB) << 20
	if cache == 0 {
		cache = -1
	}
	h := hkp.NewHandler(st, ks, hkp.Options{Logger: log, CacheSize: cache, Version: "hkpbench"})
	ks.Subscribe(h)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	sctx, cancel := context.WithTimeout(ctx, maxServeTime)
	defer cancel()
	go h.Run(sctx)
	go func() {
		<-sctx.Done()
		srv.Close()
	}()
	fmt.Fprintf(stdout, "serving HKP on http://%s (interrupt to stop)\n", ln.Addr())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// fill generates typical keys and stores them through ks until the store
// holds n.
func fill(ctx context.Context, st *postgres.Store, ks *keys.Service, n int, seed int64, stdout io.Writer) error {
	stats, err := st.KeyStats(ctx)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	have := int(stats.Keys)
	if have >= n {
		fmt.Fprintf(stdout, "store holds %d keys\n", have)
		return nil
	}
	gen := keygen.New(seed)
	start := time.Now()
	fmt.Fprintf(stdout, "store holds %d keys; generating %d more\n", have, n-have)
	for from := have; from < n; from += loadBatch {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		bins, err := gen.Range(from, min(from+loadBatch, n))
		if err != nil {
			return fmt.Errorf("serve: generate: %w", err)
		}
		batch := make([]*pgp.Key, 0, len(bins))
		err = ks.Process(ctx, pgp.NewReader(bytes.NewReader(bytes.Join(bins, nil))), 0, func(r pgp.Result) error {
			if r.Err != nil {
				return fmt.Errorf("serve: generated key: %w", r.Err)
			}
			batch = append(batch, r.Key)
			return nil
		})
		if err != nil {
			return err
		}
		if _, err := ks.AddKeys(ctx, batch); err != nil {
			return fmt.Errorf("serve: store: %w", err)
		}
		if done := from + len(batch) - have; done%(20*loadBatch) == 0 || from+len(batch) >= n {
			el := time.Since(start)
			fmt.Fprintf(stdout, "  %d keys stored (%.0f keys/s)\n", from+len(batch), float64(done)/el.Seconds())
		}
	}
	return nil
}

// errEnough stops the dump once the sample is taken.
var errEnough = errors.New("enough")

// writeURLLists samples stored keys and writes lookup URLs for them.
func writeURLLists(ctx context.Context, st *postgres.Store, listen, dir string, stdout io.Writer) error {
	var gets, emails, words []string
	base := "http://" + listen + "/pks/lookup?"
	i := 0
	err := st.DumpKeys(ctx, func(packets []byte) error {
		i++
		if i%7 != 0 { // spread the sample over the store
			return nil
		}
		k, err := pgp.ParseKey(packets)
		if err != nil {
			return nil
		}
		d := k.Describe()
		if len(d.UserIDs) == 0 {
			return nil
		}
		gets = append(gets, base+"op=get&options=mr&search=0x"+strings.ToUpper(hex.EncodeToString(d.Fingerprint)))
		if e := d.UserIDs[0].Email; e != "" {
			emails = append(emails, base+"op=index&options=mr&search="+e)
		}
		name := d.UserIDs[0].Text
		if lt := strings.IndexByte(name, '<'); lt > 0 {
			name = strings.TrimSpace(name[:lt])
		}
		words = append(words, base+"op=index&options=mr&search="+strings.ReplaceAll(strings.ToLower(name), " ", "+"))
		if len(gets) >= sampleURLs {
			return errEnough
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return fmt.Errorf("serve: sample keys: %w", err)
	}
	for name, list := range map[string][]string{"get-fingerprint.txt": gets, "index-email.txt": emails, "index-words.txt": words} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(list, "\n")+"\n"), 0o644); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		fmt.Fprintf(stdout, "wrote %d URLs to %s\n", len(list), p)
	}
	return nil
}
