package main

// The scale run of issue 12: `kith serve` (the real binary, on its
// embedded PostgreSQL cluster with default settings) over a million keys.
//
//	CI=true go test ./cmd/hkpbench -run TestScale -scale -timeout 0 -v [-scale-keys 1000000]
//
// It loads the keys in files of 100,000 (one `kith load` each, so that
// the rate of each file shows whether loading slows down as the store
// grows), then reports the store's size per key, the recon tree's build
// time at start-up, serve's RSS, and cold and warm lookup rates.

import (
	"bytes"
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

var (
	scaleOn   = flag.Bool("scale", false, "run the scale benchmark (a million keys by default; tens of minutes)")
	scaleKeys = flag.Int("scale-keys", 1_000_000, "keys to load")
)

const scaleFile = 100_000

func TestScale(t *testing.T) {
	if !*scaleOn {
		t.Skip("the scale run runs with -scale")
	}
	ctx := context.Background()
	n := *scaleKeys
	keys := cachedKeys(t, n, ed25519Keys)
	dir := tableDir(t)
	var files []string
	for from := 0; from < n; from += scaleFile {
		f := filepath.Join(dir, fmt.Sprintf("keys-%04d.pgp", from/scaleFile))
		if err := os.WriteFile(f, bytes.Join(keys[from:min(n, from+scaleFile)], nil), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	fps := make([]string, 0, 40_000)
	for i := 0; i < n && len(fps) < cap(fps); i += max(1, n/cap(fps)) {
		fp, err := fingerprintOf(keys[i])
		if err != nil {
			t.Fatal(err)
		}
		fps = append(fps, fp)
	}
	keys = nil

	node := newKithNode(t, ctx, dir, "scale", "0")
	var report strings.Builder
	fmt.Fprintf(&report, "\nscale run: %d keys, %d per kith load\n", n, scaleFile)
	total := time.Duration(0)
	for i, f := range files {
		took := node.load(ctx, f)
		total += took
		fmt.Fprintf(&report, "  load %d: %v, %.0f keys/s (store then holds %d)\n", i+1, took.Round(100*time.Millisecond),
			float64(min(scaleFile, n-i*scaleFile))/took.Seconds(), min(n, (i+1)*scaleFile))
	}
	fmt.Fprintf(&report, "  load total: %v, %.0f keys/s\n", total.Round(time.Second), float64(n)/total.Seconds())
	base := duBytes(t, filepath.Join(node.data, "postgres", "base"))
	all := duBytes(t, filepath.Join(node.data, "postgres"))
	fmt.Fprintf(&report, "  store: tables and indexes %d MiB (%.0f bytes a key), whole cluster with WAL %d MiB\n",
		base>>20, float64(base)/float64(n), all>>20)

	began := time.Now()
	running := node.serve(ctx)
	fmt.Fprintf(&report, "  serve healthy after %v; %s; RSS %d MiB\n", time.Since(began).Round(100*time.Millisecond),
		treeBuilt(t, running.log), running.rssKiB()>>10)

	urls := func(fps []string) []string {
		us := make([]string, len(fps))
		for i, fp := range fps {
			us[i] = running.base + "/pks/lookup?op=get&options=mr&search=0x" + fp
		}
		return us
	}
	half := len(fps) / 2
	cold1 := load(ctx, runConfig{urls: urls(fps[:half/4]), clients: 1, duration: time.Minute, once: true})
	cold32 := load(ctx, runConfig{urls: urls(fps[half/4 : half]), clients: 32, duration: time.Minute, once: true})
	warm := load(ctx, runConfig{urls: urls(fps[half : half+2000]), clients: 32, duration: 20 * time.Second, warmup: 30 * time.Second})
	fmt.Fprintf(&report, "  op=get cold, 1 client: %s\n  op=get cold, 32 clients: %s\n  op=get warm (2,000 keys), 32 clients: %s\n",
		summary(cold1), summary(cold32), summary(warm))
	fmt.Fprintf(&report, "  serve RSS after the lookups: %d MiB\n", running.rssKiB()>>10)
	t.Log(report.String())
}

// ed25519Keys makes small one-user-ID Ed25519 keys (fast to make, as the
// scale run needs a million), each with its own name and creation time.
func ed25519Keys(from, to int) ([][]byte, error) {
	out := make([][]byte, to-from)
	errs := make([]error, to-from)
	base := time.Date(2016, 1, 1, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(out); i += workers {
				n := from + i
				e, err := keygen.NewEd25519(fmt.Sprintf("Scale Person %d", n), fmt.Sprintf("person%d@scale.example", n),
					base.Add(time.Duration(n)*97*time.Second), int64(n)+1)
				if err != nil {
					errs[i] = err
					continue
				}
				var b bytes.Buffer
				errs[i] = keygen.Serialize(&b, e)
				out[i] = b.Bytes()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fingerprintOf is key's primary fingerprint in upper-case hex.
func fingerprintOf(key []byte) (string, error) {
	k, err := pgp.ParseKey(key)
	if err != nil {
		return "", err
	}
	return strings.ToUpper(hex.EncodeToString(k.Fingerprint())), nil
}

// duBytes is the disk usage of dir (du -sb), read as root can.
func duBytes(t *testing.T, dir string) int64 {
	t.Helper()
	out, err := exec.Command("du", "-sb", dir).Output()
	if err != nil {
		t.Fatalf("du %s: %v", dir, err)
	}
	n, err := strconv.ParseInt(strings.Fields(string(out))[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

var treeBuiltLine = regexp.MustCompile(`recon tree built.*digests=(\d+).*took=(\S+)`)

// treeBuilt reads the recon tree's build time from serve's log.
func treeBuilt(t *testing.T, log string) string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if m := treeBuiltLine.FindSubmatch(b); m != nil {
		return fmt.Sprintf("recon tree of %s digests built in %s", m[1], m[2])
	}
	return "no recon tree line in the log"
}
