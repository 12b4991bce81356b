package main

// The load table of issue 12: SKS and `kith serve` (the real binary, on
// its embedded PostgreSQL cluster with default settings) hold the same
// generated keys and answer the same requests, cell by cell in the same
// minutes, so that the figures can be read as ratios on a noisy machine.
// A cell's rate counts the answers with a 2xx status.
//
//	CI=true go test ./cmd/hkpbench -run TestLoadTable -table -timeout 0 -v
//	    [-table-keys 50000] [-table-d 10s] [-table-pools 0,8,16]
//
// Cold cells request each URL once (-once); warm cells repeat 2,000 keys
// after a warm-up pass. SKS gets each cell first on even rows and second
// on odd ones, so that a trend in the machine's load does not favour one.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/armor"

	"github.com/kith-keyserver/kith/identity/subprocess"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
	"github.com/kith-keyserver/kith/recon/skstest"
)

var (
	tableOn       = flag.Bool("table", false, "run the SKS-versus-Kith load table (minutes; see table_test.go)")
	tableKeys     = flag.Int("table-keys", 50_000, "keys both servers hold")
	tableDuration = flag.Duration("table-d", 10*time.Second, "the longest one cell is measured")
	tablePools    = flag.String("table-pools", "0", "comma-separated database pool sizes to run Kith's cells with (0: the default)")
	tableCells    = flag.String("table-cells", "", "run only the cells whose name matches this regular expression")
)

// Sizes of the URL slices each cold cell uses (each URL once), at most.
const (
	maxColdSlice = 10_000
	uploadSlice  = 6_000
	uploadSlices = 3 // upload cells
	warmKeys     = 2_000
)

// tableServer is one server under test.
type tableServer struct {
	name string
	base string // http://127.0.0.1:PORT
}

// cell is one row of the table: what to run against a server.
type cell struct {
	name string
	run  func(ctx context.Context, s tableServer) string
}

func TestLoadTable(t *testing.T) {
	if !*tableOn {
		t.Skip("the load table runs with -table")
	}
	ctx := context.Background()
	n := *tableKeys
	if n < 5*warmKeys {
		t.Fatalf("-table-keys must be at least %d", 5*warmKeys)
	}
	// Three cold slices of fingerprints, the rest for the readers beside
	// uploads, then the warm keys at the end.
	coldSlice := min(maxColdSlice, (n-warmKeys)/4)
	// Each pool size uploads keys of its own: SKS is not rebuilt between
	// them, and keys it holds already would be cheaper to take.
	pools := strings.Split(*tablePools, ",")
	raw := cachedKeys(t, n+uploadSlices*uploadSlice*len(pools), func(from, to int) ([][]byte, error) { return keygen.New(12).Range(from, to) })
	stored, uploads := raw[:n], raw[n:]
	fps := make([]string, n)
	names := map[string]bool{}
	var words, mixed []string
	for i, b := range stored {
		k, err := pgp.ParseKey(b)
		if err != nil {
			t.Fatal(err)
		}
		d := k.Describe()
		fps[i] = strings.ToUpper(hex.EncodeToString(d.Fingerprint))
		if len(d.UserIDs) > 0 {
			name := d.UserIDs[0].Text
			if lt := strings.IndexByte(name, '<'); lt > 0 {
				name = strings.TrimSpace(name[:lt])
			}
			if !names[name] {
				names[name] = true
				words = append(words, strings.ReplaceAll(strings.ToLower(name), " ", "+"))
			}
			// A search mixing common and rare words, as issue 38's
			// "Generated User 29330": the last name (a twentieth of the
			// keys), "example" (every user ID) and the rare userN of
			// the address userN.0@domain.
			last := name[strings.LastIndexByte(name, ' ')+1:]
			local, _, _ := strings.Cut(d.UserIDs[0].Email, ".")
			mixed = append(mixed, url.QueryEscape(last+" example "+local))
		}
	}
	mixed = mixed[:min(len(mixed), 2*maxColdSlice)]
	dir := tableDir(t)
	dump := filepath.Join(dir, "keys.pgp")
	if err := os.WriteFile(dump, bytes.Join(stored, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	bodies := make([][]byte, len(uploads))
	for i, b := range uploads {
		bodies[i] = uploadBody(t, b)
	}

	sks := skstest.Start(t, skstest.Options{KeyFiles: []string{dump}, StartTimeout: 5 * time.Minute})
	t.Logf("sks build+cleandb+pbuild of %d keys: %v", n, sks.BuildTime.Round(100*time.Millisecond))

	for run, pool := range pools {
		ups := bodies[uploadSlices*uploadSlice*run : uploadSlices*uploadSlice*(run+1)]
		pool = strings.TrimSpace(pool)
		node := newKithNode(t, ctx, dir, "pool"+pool, pool)
		loadTime := node.load(ctx, dump)
		running := node.serve(ctx)
		kith := running.base
		t.Logf("kith load of %d keys: %v (pool %s)", n, loadTime.Round(100*time.Millisecond), pool)
		get := func(s tableServer, fp string) string {
			return s.base + "/pks/lookup?op=get&options=mr&search=0x" + fp
		}
		gets := func(s tableServer, from, to int) []string {
			us := make([]string, 0, to-from)
			for _, fp := range fps[from:to] {
				us = append(us, get(s, fp))
			}
			return us
		}
		d := *tableDuration
		cells := []cell{
			{"op=get by fingerprint, 1 client, cold", func(ctx context.Context, s tableServer) string {
				return summary(load(ctx, runConfig{urls: gets(s, 0, coldSlice), clients: 1, duration: d, once: true}))
			}},
			{"op=get by fingerprint, 32 clients, cold", func(ctx context.Context, s tableServer) string {
				return summary(load(ctx, runConfig{urls: gets(s, coldSlice, 2*coldSlice), clients: 32, duration: d, once: true}))
			}},
			{"op=get cold, 32 clients, while 8 clients upload new keys", func(ctx context.Context, s tableServer) string {
				reads, writes := beside(ctx,
					runConfig{urls: gets(s, 2*coldSlice, 3*coldSlice), clients: 32, duration: d, once: true},
					runConfig{urls: []string{s.base + "/pks/add"}, bodies: ups[:uploadSlice], clients: 8, duration: d, once: true})
				return summary(reads) + "; uploads beside: " + summary(writes)
			}},
			{"POST /pks/add of new keys, 8 clients", func(ctx context.Context, s tableServer) string {
				return summary(load(ctx, runConfig{urls: []string{s.base + "/pks/add"}, bodies: ups[uploadSlice : 2*uploadSlice], clients: 8, duration: d, once: true}))
			}},
			{"POST /pks/add of new keys, 8 clients, beside 32 clients doing cold op=get", func(ctx context.Context, s tableServer) string {
				// Both run until either has used its list up (or d): the
				// uploads are measured only while the readers run.
				writes, reads := together(ctx,
					runConfig{urls: []string{s.base + "/pks/add"}, bodies: ups[2*uploadSlice:], clients: 8, duration: d, once: true},
					runConfig{urls: gets(s, 3*coldSlice, n-warmKeys), clients: 32, duration: d, once: true})
				return summary(writes) + "; reads beside: " + summary(reads)
			}},
			{"op=index by words (\"first+last\"), 32 clients, cold", func(ctx context.Context, s tableServer) string {
				us := make([]string, 0, len(words)/2)
				for _, w := range words[:len(words)/2] {
					us = append(us, s.base+"/pks/lookup?op=index&options=mr&search="+w)
				}
				return summary(load(ctx, runConfig{urls: us, clients: 32, duration: d, once: true}))
			}},
			{"op=index by words (\"first+last\"), 1 client, cold", func(ctx context.Context, s tableServer) string {
				// The other half of the names: Kith's cache keys a search by
				// its words, whatever their order.
				us := make([]string, 0, len(words)-len(words)/2)
				for _, w := range words[len(words)/2:] {
					us = append(us, s.base+"/pks/lookup?op=index&options=mr&search="+w)
				}
				return summary(load(ctx, runConfig{urls: us, clients: 1, duration: d, once: true}))
			}},
			{"op=index by common and rare words (\"last+example+userN\"), 32 clients, cold", func(ctx context.Context, s tableServer) string {
				return summary(load(ctx, runConfig{urls: indexURLs(s, mixed[:len(mixed)/2]), clients: 32, duration: d, once: true}))
			}},
			{"op=index by common and rare words (\"last+example+userN\"), 1 client, cold", func(ctx context.Context, s tableServer) string {
				return summary(load(ctx, runConfig{urls: indexURLs(s, mixed[len(mixed)/2:]), clients: 1, duration: d, once: true}))
			}},
			{"op=get, the same 2,000 keys repeated, 32 clients (warm)", func(ctx context.Context, s tableServer) string {
				return summary(load(ctx, runConfig{urls: gets(s, n-warmKeys, n), clients: 32, duration: d, warmup: 30 * time.Second}))
			}},
		}
		servers := []tableServer{{"SKS 1.1.6", sks.HKPURL}, {"Kith", kith}}
		var table strings.Builder
		fmt.Fprintf(&table, "\n%d keys, Kith pool %s; cell: requests/s, p50, p99, status codes\n", n, pool)
		fmt.Fprintf(&table, "| work | %s | %s | Kith/SKS |\n| --- | --- | --- | --- |\n", servers[0].name, servers[1].name)
		only, err := regexp.Compile(*tableCells)
		if err != nil {
			t.Fatalf("-table-cells: %v", err)
		}
		for i, c := range cells {
			if !only.MatchString(c.name) {
				continue
			}
			order := []int{0, 1}
			if i%2 == 1 {
				order = []int{1, 0}
			}
			out := make([]string, 2)
			for _, j := range order {
				out[j] = c.run(ctx, servers[j])
			}
			fmt.Fprintf(&table, "| %s | %s | %s | %s |\n", c.name, out[0], out[1], ratio(out[1], out[0]))
		}
		fmt.Fprintf(&table, "| bulk load | sks build+cleandb+pbuild %v | kith load %v | %.2fx the time |\n",
			sks.BuildTime.Round(100*time.Millisecond), loadTime.Round(100*time.Millisecond), loadTime.Seconds()/sks.BuildTime.Seconds())
		t.Log(table.String())
		running.stop()
	}
}

// indexURLs are s's machine-readable index lookups of searches (each
// already escaped for a URL).
func indexURLs(s tableServer, searches []string) []string {
	us := make([]string, len(searches))
	for i, q := range searches {
		us[i] = s.base + "/pks/lookup?op=index&options=mr&search=" + q
	}
	return us
}

// beside runs a and b at once; b is stopped when a ends.
func beside(ctx context.Context, a, b runConfig) (ra, rb result) {
	stop := make(chan struct{})
	b.stop = stop
	done := make(chan result)
	go func() { done <- load(ctx, b) }()
	ra = load(ctx, a)
	close(stop)
	return ra, <-done
}

// together runs a and b at once until either ends, then stops the other.
func together(ctx context.Context, a, b runConfig) (ra, rb result) {
	stopA, stopB := make(chan struct{}), make(chan struct{})
	a.stop, b.stop = stopA, stopB
	done := make(chan result)
	go func() {
		r := load(ctx, b)
		close(stopA)
		done <- r
	}()
	ra = load(ctx, a)
	close(stopB)
	return ra, <-done
}

// summary is a cell's text: rate, p50, p99 and status codes. The rate
// counts the answers with a 2xx status only: a refusal (503 from a busy
// upload path) is no work done, however fast it comes.
func summary(r result) string {
	ok := 0
	for c, k := range r.codes {
		if c >= 200 && c < 300 {
			ok += k
		}
	}
	rps := float64(ok) / r.elapsed.Seconds()
	var codes []string
	for c, k := range r.codes {
		codes = append(codes, fmt.Sprintf("%d×%d", k, c))
	}
	slices.Sort(codes)
	per := 0.0
	if len(r.latencies) > 0 {
		per = float64(r.bytes) / float64(len(r.latencies)) / 1024
	}
	s := fmt.Sprintf("%.0f req/s, p50 %v, p99 %v (%s, %.1f KiB each", rps, round(r.percentile(0.5)), round(r.percentile(0.99)), strings.Join(codes, " "), per)
	if r.errors > 0 {
		s += fmt.Sprintf(", %d errors: %v", r.errors, r.firstErr)
	}
	return s + ")"
}

// ratio divides the request rates of two cells' texts: the leading
// summary's, then each summary run beside it ("; what: summary").
func ratio(a, b string) string {
	as, bs := strings.Split(a, "; "), strings.Split(b, "; ")
	if len(as) != len(bs) {
		return "?"
	}
	var out []string
	for i := range as {
		what := ""
		if i > 0 {
			w, rest, ok := strings.Cut(as[i], ": ")
			if !ok {
				return "?"
			}
			what, as[i] = w+" ", rest
			if _, bs[i], ok = strings.Cut(bs[i], ": "); !ok {
				return "?"
			}
		}
		ra, erra := strconv.ParseFloat(strings.Fields(as[i])[0], 64)
		rb, errb := strconv.ParseFloat(strings.Fields(bs[i])[0], 64)
		if erra != nil || errb != nil || rb == 0 {
			out = append(out, what+"?")
			continue
		}
		out = append(out, fmt.Sprintf("%s%.2fx", what, ra/rb))
	}
	return strings.Join(out, "; ")
}

// tableDir is a directory the embedded cluster's user can enter even
// when the test runs as root (t.TempDir's parents are private).
func tableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "kith-table-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// uploadBody is the form body of an HKP upload of key.
func uploadBody(t *testing.T, key []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := armor.Encode(&b, "PGP PUBLIC KEY BLOCK", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(key)
	w.Close()
	return []byte("keytext=" + url.QueryEscape(b.String()))
}

// kithNode is a kith binary with its own data directory (an embedded
// cluster with default settings).
type kithNode struct {
	t    *testing.T
	bin  string
	dir  string // working directory, for logs
	data string
	env  []string
}

// newKithNode builds the kith binary into dir (once) and gives it a fresh
// store in a data directory named after tag; pool, unless "0", sets
// database_max_conns.
func newKithNode(t *testing.T, ctx context.Context, dir, tag, pool string) *kithNode {
	t.Helper()
	bin := filepath.Join(dir, "kith")
	if _, err := os.Stat(bin); err != nil {
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/kith-keyserver/kith/cmd/kith").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	data := filepath.Join(dir, "kith-data-"+tag)
	os.RemoveAll(data)
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	// The load comes from one address: no per-client caps.
	env := append(os.Environ(), "KITH_DATA_DIR="+data, "KITH_LOG_LEVEL=info", "KITH_UPLOADS_PER_MINUTE=-1", "KITH_EMAIL_LOOKUPS_PER_MINUTE=-1")
	if pool != "0" && pool != "" {
		env = append(env, "KITH_DATABASE_MAX_CONNS="+pool)
	}
	k := &kithNode{t: t, bin: bin, dir: dir, data: data, env: env}
	// kith migrate creates the store (initdb and the schema), which no
	// load is timed with: kith load needs a store to exist.
	if out, err := k.command(ctx, "migrate").CombinedOutput(); err != nil {
		t.Fatalf("kith migrate: %v\n%s", err, out)
	}
	return k
}

func (k *kithNode) command(ctx context.Context, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, k.bin, args...)
	c.Env, c.Dir = k.env, k.dir
	return c
}

// load runs kith load on files and returns how long it took.
func (k *kithNode) load(ctx context.Context, files ...string) time.Duration {
	k.t.Helper()
	began := time.Now()
	if out, err := k.command(ctx, append([]string{"load"}, files...)...).CombinedOutput(); err != nil {
		k.t.Fatalf("kith load: %v\n%s", err, out)
	}
	return time.Since(began)
}

// runningKith is a kith serve process.
type runningKith struct {
	base string // http://127.0.0.1:PORT
	cmd  *exec.Cmd
	log  string // its log file
	stop func()
}

// serve starts kith serve (with recon listening on a free port) and waits
// until its health check answers 200.
func (k *kithNode) serve(ctx context.Context) *runningKith {
	k.t.Helper()
	port, reconPort := testkit.FreePort(k.t), testkit.FreePort(k.t)
	r := &runningKith{base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	r.cmd = k.command(ctx, "serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--recon-listen", fmt.Sprintf("127.0.0.1:%d", reconPort))
	r.log = k.data + ".log"
	logf, err := os.Create(r.log)
	if err != nil {
		k.t.Fatal(err)
	}
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	if err := subprocess.Start(r.cmd, syscall.SIGKILL); err != nil {
		k.t.Fatal(err)
	}
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			r.cmd.Process.Signal(os.Interrupt)
			r.cmd.Wait()
			logf.Close()
		})
	}
	k.t.Cleanup(r.stop)
	healthy := testkit.PollEvery(10*time.Minute, 200*time.Millisecond, func() bool {
		res, err := http.Get(r.base + "/pks/health")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	if !healthy {
		k.t.Fatalf("kith serve did not become healthy; see %s", r.log)
	}
	return r
}

// rssKiB is the process's resident set size.
func (r *runningKith) rssKiB() int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return -1
}

// cachedKeys returns keys 0..n-1 that gen makes, kept between runs in a
// file under /var/tmp (length-prefixed keys), since generating them takes
// minutes. gen(from, to) makes keys from to to-1.
func cachedKeys(t *testing.T, n int, gen func(from, to int) ([][]byte, error)) [][]byte {
	t.Helper()
	path := fmt.Sprintf("/var/tmp/kith-bench-%s-%d.keys", t.Name(), n)
	if b, err := os.ReadFile(path); err == nil {
		var keys [][]byte
		for len(b) >= 4 {
			l := int(binary.BigEndian.Uint32(b))
			if len(b) < 4+l {
				break
			}
			keys = append(keys, b[4:4+l])
			b = b[4+l:]
		}
		if len(keys) == n {
			return keys
		}
	}
	start := time.Now()
	var out bytes.Buffer
	keys := make([][]byte, 0, n)
	for from := 0; from < n; from += 100_000 {
		part, err := gen(from, min(n, from+100_000))
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range part {
			out.Write(binary.BigEndian.AppendUint32(nil, uint32(len(k))))
			out.Write(k)
		}
		keys = append(keys, part...)
	}
	t.Logf("generated %d keys in %v (kept in %s)", n, time.Since(start).Round(time.Second), path)
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Logf("keeping the keys: %v", err)
	}
	return keys
}
