package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/hkp"
	"github.com/kith-keyserver/kith/identity/keys/bulk"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/subprocess"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// runKith runs a kith command in-process and returns its output.
func runKith(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &environment{stdout: &out, stderr: &errb}
	err = run(context.Background(), env, args)
	return out.String(), errb.String(), err
}

func openTestStore(t testing.TB, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// digestsOf lists a store's digests, sorted.
func digestsOf(t testing.TB, s *postgres.Store) []string {
	t.Helper()
	var ds []string
	if err := s.Digests(context.Background(), func(d [16]byte) error {
		ds = append(ds, pgp.FormatDigest(d))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(ds)
	return ds
}

func writeTypicalDump(t *testing.T, n int, seed int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sks-dump-0000.pgp")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := keygen.WriteTypicalKeys(f, n, seed); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

var summaryRE = regexp.MustCompile(`loaded (\d+) keys .*: (\d+) inserted, (\d+) updated, (\d+) unchanged, (\d+) rejected`)

func TestLoadDebianKeyringsServesEveryFingerprintGPGLists(t *testing.T) {
	keyrings, _ := filepath.Glob("/usr/share/keyrings/debian-*.gpg")
	var files []string
	for _, k := range keyrings {
		if !strings.Contains(k, "archive") {
			files = append(files, k)
		}
	}
	if len(files) == 0 {
		testkit.Tool(t, "debian-keyring")
	}
	gpg := testkit.Tool(t, "gpg")
	url := pgtest.NewDatabase(t)
	out, errOut, err := runKith(t, append([]string{"load", "--database-url", url}, files...)...)
	if err != nil {
		t.Fatalf("load: %v\n%s", err, errOut)
	}
	m := summaryRE.FindStringSubmatch(out)
	if m == nil || m[5] != "0" {
		t.Fatalf("summary: %q", out)
	}
	s := openTestStore(t, url)

	// Every primary fingerprint gpg sees in the files is in the store.
	home := t.TempDir()
	listing, err := exec.Command(gpg, append([]string{"--homedir", home, "--batch", "--with-colons", "--show-keys"}, files...)...).Output()
	if err != nil {
		t.Fatalf("gpg --show-keys: %v", err)
	}
	var fprs []string
	lines := strings.Split(string(listing), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "pub:") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "fpr:") {
			fprs = append(fprs, strings.Split(lines[i+1], ":")[9])
		}
	}
	if len(fprs) < 900 {
		t.Fatalf("gpg listed only %d keys", len(fprs))
	}
	// ... and retrievable over HKP, as gpg --recv-keys asks for it.
	srv := httptest.NewServer(hkp.NewHandler(s, nil, hkp.Options{CacheSize: -1, Logger: slog.New(slog.DiscardHandler)}))
	defer srv.Close()
	for _, fpr := range fprs {
		resp, err := http.Get(srv.URL + "/pks/lookup?op=get&options=mr&search=0x" + fpr)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("BEGIN PGP PUBLIC KEY BLOCK")) {
			t.Errorf("op=get 0x%s: %s", fpr, resp.Status)
		}
	}
	t.Logf("gpg lists %d keys; %s", len(fprs), strings.TrimSpace(out))

	// Loading the same files again changes nothing.
	before := digestsOf(t, s)
	out, _, err = runKith(t, append([]string{"load", "--database-url", url}, files...)...)
	if err != nil {
		t.Fatal(err)
	}
	m2 := summaryRE.FindStringSubmatch(out)
	if m2 == nil || m2[2] != "0" || m2[3] != "0" || m2[4] != m[2] {
		t.Fatalf("second load: %q, want all %s unchanged", out, m[2])
	}
	if after := digestsOf(t, s); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatal("second load changed the store")
	}
}

func TestDumpLoadsIntoFreshStoreWithIdenticalDigests(t *testing.T) {
	src := pgtest.NewDatabase(t)
	dump := writeTypicalDump(t, 1200, 11)
	if _, errOut, err := runKith(t, "load", "--database-url", src, dump); err != nil {
		t.Fatalf("load: %v\n%s", err, errOut)
	}
	dir := t.TempDir()
	out, errOut, err := runKith(t, "dump", "--database-url", src, "--dir", dir, "--keys-per-file", "500")
	if err != nil {
		t.Fatalf("dump: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "dumped 1200 keys into 3 files") {
		t.Fatalf("dump said %q", out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "sks-dump-*.pgp"))
	if len(files) != 3 {
		t.Fatalf("dump files: %v", files)
	}
	dst := pgtest.NewDatabase(t)
	if _, errOut, err := runKith(t, append([]string{"load", "--database-url", dst}, files...)...); err != nil {
		t.Fatalf("load dump: %v\n%s", err, errOut)
	}
	a, b := digestsOf(t, openTestStore(t, src)), digestsOf(t, openTestStore(t, dst))
	if len(a) != 1200 || strings.Join(a, ",") != strings.Join(b, ",") {
		t.Fatalf("digests differ: %d keys vs %d", len(a), len(b))
	}
	// A second dump into the same directory is refused rather than mixed in.
	if _, _, err := runKith(t, "dump", "--database-url", src, "--dir", dir); err == nil {
		t.Fatal("dump into a directory holding a dump succeeded")
	}
}

// TestLoadKilledMidwayLeavesNoPartialKeyAndResumes kills a real kith load
// with SIGKILL and checks the store, then lets a second run finish. The
// first load, into an empty store, deferred the search indexes; the
// second builds them back before it loads.
func TestLoadKilledMidwayLeavesNoPartialKeyAndResumes(t *testing.T) {
	bin := kithBinary(t)
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	s := openTestStore(t, url)
	wantIndexes := keyTableIndexes(t, db)
	// Six batches: the kill comes after the second, with four to spare
	// so that the load cannot finish first.
	const n = 6 * bulk.BatchSize
	dump := writeTypicalDump(t, n, 5)
	cmd := exec.Command(bin, "load", "--database-url", url, dump)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := subprocess.Start(cmd, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Kill it once some batches are in, well before the end.
	if !testkit.PollEvery(60*time.Second, 10*time.Millisecond, func() bool {
		st, err := s.KeyStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Keys >= 2000
	}) {
		t.Fatalf("load made no progress: %s", stderr.String())
	}
	cmd.Process.Kill()
	cmd.Wait()
	st, _ := s.KeyStats(ctx)
	if st.Keys >= n {
		t.Skipf("load finished (%d keys) before it could be killed", st.Keys)
	}
	if st.Keys%bulk.BatchSize != 0 {
		t.Errorf("%d keys stored: not whole batches of %d", st.Keys, bulk.BatchSize)
	}
	assertNoPartialKeys(t, s)
	var deferred int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM deferred_indexes").Scan(&deferred); err != nil || deferred == 0 {
		t.Fatalf("the killed load left %d deferred indexes recorded (%v), want them all", deferred, err)
	}
	// The killed load's connections end as its process does, and its
	// lock ("kidx", which tells a running load from a dead one) with them.
	if !testkit.PollEvery(60*time.Second, 10*time.Millisecond, func() bool {
		var held bool
		if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks
			WHERE locktype = 'advisory' AND granted AND objid = x'6b696478'::int AND objsubid = 1)`).Scan(&held); err != nil {
			t.Fatal(err)
		}
		return !held
	}) {
		t.Fatal("the killed load's connection still holds its lock")
	}

	out, errOut, err := runKith(t, "load", "--database-url", url, dump)
	if err != nil {
		t.Fatalf("second load: %v\n%s", err, errOut)
	}
	m := summaryRE.FindStringSubmatch(out)
	if m == nil || m[4] != itoa(int(st.Keys)) {
		t.Fatalf("second load: %q, want %d unchanged", out, st.Keys)
	}
	if st2, _ := s.KeyStats(ctx); st2.Keys != n {
		t.Fatalf("after resuming: %d keys, want %d", st2.Keys, n)
	}
	assertNoPartialKeys(t, s)
	if got := keyTableIndexes(t, db); !slices.Equal(got, wantIndexes) {
		t.Errorf("indexes after the second load:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantIndexes, "\n"))
	}
}

// keyTableIndexes lists the index definitions of the key tables, sorted.
func keyTableIndexes(t *testing.T, db *pgx.Conn) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT indexdef FROM pg_indexes
		WHERE schemaname = current_schema() AND tablename IN ('keys', 'subkeys', 'user_ids', 'key_words') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) < 10 {
		t.Fatalf("only %d indexes on the key tables", len(defs))
	}
	return defs
}

// assertNoPartialKeys checks that every stored key parses, matches its
// digest and has its user IDs indexed.
func assertNoPartialKeys(t *testing.T, s *postgres.Store) {
	t.Helper()
	ctx := context.Background()
	var digests [][16]byte
	s.Digests(ctx, func(d [16]byte) error { digests = append(digests, d); return nil })
	for start := 0; start < len(digests); start += 500 {
		end := min(start+500, len(digests))
		keys, err := s.KeysByDigest(ctx, digests[start:end])
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			pk, err := pgp.ParseKey(k.Packets)
			if err != nil {
				t.Fatalf("stored key %X does not parse: %v", k.Fingerprint, err)
			}
			if pk.Digest() != k.Digest || len(k.UserIDs) == 0 {
				t.Fatalf("stored key %X is partial (%d user IDs)", k.Fingerprint, len(k.UserIDs))
			}
		}
	}
}

func TestLoadRejectsGarbageAndReportsWhy(t *testing.T) {
	url := pgtest.NewDatabase(t)
	junk := filepath.Join(t.TempDir(), "junk.pgp")
	os.WriteFile(junk, bytes.Repeat([]byte{0x99, 0x01, 0xff, 0x00, 0x13}, 1000), 0o644)
	out, _, err := runKith(t, "load", "--database-url", url, junk)
	if err != nil {
		t.Fatalf("load of garbage failed as a whole: %v", err)
	}
	m := summaryRE.FindStringSubmatch(out)
	if m == nil || m[2] != "0" || m[5] == "0" || !strings.Contains(out, "rejected, ") {
		t.Fatalf("summary %q", out)
	}
	if st, _ := openTestStore(t, url).KeyStats(context.Background()); st.Keys != 0 {
		t.Fatalf("garbage stored %d keys", st.Keys)
	}
	if _, _, err := runKith(t, "load", "--database-url", url, filepath.Join(t.TempDir(), "missing.pgp")); err == nil {
		t.Fatal("load of a missing file succeeded")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
