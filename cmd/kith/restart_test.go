package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/embedded"
	"github.com/kith-keyserver/kith/identity/subprocess"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// uploader posts fresh keys to a server from a few goroutines and keeps
// the fingerprints of those answered 200.
type uploader struct {
	base   string
	keys   [][]byte
	next   atomic.Int64
	ok     atomic.Int64
	failed atomic.Int64
	client *http.Client

	mu       sync.Mutex
	accepted []string // fingerprints answered 200
	stop     chan struct{}
	wg       sync.WaitGroup
}

func newUploader(t *testing.T, base string, n int, seed int64) *uploader {
	t.Helper()
	keys, err := keygen.New(seed).Range(0, n)
	if err != nil {
		t.Fatal(err)
	}
	return &uploader{base: base, keys: keys, client: &http.Client{Timeout: 30 * time.Second}}
}

// run starts workers that upload until stopped or out of keys.
func (u *uploader) run(workers int) {
	u.stop = make(chan struct{})
	for range workers {
		u.wg.Add(1)
		go func() {
			defer u.wg.Done()
			for {
				select {
				case <-u.stop:
					return
				default:
				}
				i := int(u.next.Add(1)) - 1
				if i >= len(u.keys) {
					return
				}
				// A refused upload is retried, as a client would, until
				// it is accepted or the load stops.
				for !u.post(u.keys[i]) {
					u.failed.Add(1)
					select {
					case <-u.stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
				k, err := pgp.ParseKey(u.keys[i])
				if err != nil {
					continue
				}
				u.mu.Lock()
				u.accepted = append(u.accepted, fmt.Sprintf("%X", k.Fingerprint()))
				u.mu.Unlock()
				u.ok.Add(1)
			}
		}()
	}
}

// post uploads one key and reports whether it was answered 200.
func (u *uploader) post(key []byte) bool {
	resp, err := u.client.Post(u.base+"/pks/add", "application/pgp-keys", bytes.NewReader(key))
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (u *uploader) halt() {
	close(u.stop)
	u.wg.Wait()
	u.client.CloseIdleConnections()
}

// missing returns the accepted fingerprints that the server does not
// serve now.
func (u *uploader) missing(t *testing.T) []string {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	var gone []string
	for _, fpr := range u.accepted {
		resp, err := u.client.Get(u.base + "/pks/lookup?op=get&options=mr&search=0x" + fpr)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			gone = append(gone, fpr+" ("+resp.Status+")")
		}
	}
	u.client.CloseIdleConnections()
	return gone
}

// metric reads one unlabelled sample from a server's /metrics.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

// backends counts the server's client connections to the database at url,
// and how many of them listen for notifications.
func backends(t *testing.T, url string) (conns, listeners int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	err = conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE query LIKE 'LISTEN %')
		FROM pg_stat_activity WHERE backend_type = 'client backend' AND datname = current_database() AND pid <> pg_backend_pid()`).
		Scan(&conns, &listeners)
	if err != nil {
		t.Fatal(err)
	}
	return conns, listeners
}

// leakCheck is the server's goroutines and database connections at rest.
type leakCheck struct {
	goroutines       float64
	conns, listeners int
}

// atRest waits until the server has settled (its listeners are back, the
// connections of finished requests are closed) and reads its counts.
func atRest(t *testing.T, base, dbURL string, wantListeners int, under func(leakCheck) bool) leakCheck {
	t.Helper()
	var c leakCheck
	if !testkit.PollEvery(30*time.Second, 100*time.Millisecond, func() bool {
		c.goroutines = metric(t, base, "go_goroutines")
		c.conns, c.listeners = backends(t, dbURL)
		return c.listeners == wantListeners && (under == nil || under(c))
	}) {
		t.Fatalf("server did not settle: %+v", c)
	}
	return c
}

// TestServeSurvivesSIGKILLOfEmbeddedPostmaster is the operator's test: kill
// -9 the embedded postmaster while uploads run. The server must be healthy
// again within 30 s, serve every upload it answered 200, and leak neither
// goroutines nor database connections across the restart.
func TestServeSurvivesSIGKILLOfEmbeddedPostmaster(t *testing.T) {
	// Mostly waiting (initdb, restarts, backoff): run beside the others.
	t.Parallel()
	requirePostgresBinaries(t)
	dir := tempDir(t)
	s := startServe(t, dir, nil)
	s.waitHealth(t, http.StatusOK, 60*time.Second)
	base := "http://" + s.addr
	pgdir := filepath.Join(dir, "kith-data", "postgres")
	dbURL := embeddedURL(pgdir)

	up := newUploader(t, base, 300, 16)
	// Warm up: the same load before the crash, so the counts compare.
	up.run(4)
	if !testkit.PollEvery(60*time.Second, 20*time.Millisecond, func() bool { return up.ok.Load() >= 40 }) {
		t.Fatalf("uploads before the crash: %d ok, %d failed\n%s", up.ok.Load(), up.failed.Load(), s.stderr)
	}
	up.halt()
	// hkp cache, API cache and recon tree each LISTEN on a connection
	// of their own.
	const listeners = 3
	before := atRest(t, base, dbURL, listeners, nil)

	up.run(4)
	if !testkit.PollEvery(60*time.Second, 20*time.Millisecond, func() bool { return up.ok.Load() >= 60 }) {
		t.Fatalf("uploads: %d ok, %d failed\n%s", up.ok.Load(), up.failed.Load(), s.stderr)
	}
	pids := postgresRunningIn(pgdir)
	if len(pids) != 1 {
		t.Fatalf("want one postmaster, found %v", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	okAtKill := up.ok.Load()
	if !testkit.PollEvery(30*time.Second, 10*time.Millisecond, func() bool {
		p := postgresRunningIn(pgdir)
		return len(p) == 1 && p[0] != pids[0]
	}) {
		t.Fatalf("no new postmaster within 30 s of SIGKILL:\n%s", s.stderr)
	}
	// The bound: healthy within 30 s of the kill, all told.
	s.waitHealth(t, http.StatusOK, max(time.Second, 30*time.Second-time.Since(killed)))
	t.Logf("healthy again %s after SIGKILL", time.Since(killed).Round(time.Millisecond))
	// Uploads go on succeeding after the restart.
	if !testkit.PollEvery(60*time.Second, 20*time.Millisecond, func() bool { return up.ok.Load() >= okAtKill+40 }) {
		t.Fatalf("uploads after the restart: %d ok (%d at the kill), %d failed\n%s", up.ok.Load(), okAtKill, up.failed.Load(), s.stderr)
	}
	up.halt()
	t.Logf("uploads: %d answered 200, %d failed (around the crash)", up.ok.Load(), up.failed.Load())

	if gone := up.missing(t); len(gone) > 0 {
		t.Fatalf("%d uploads answered 200 are not served after the restart: %v", len(gone), gone)
	}
	after := atRest(t, base, dbURL, listeners, func(c leakCheck) bool {
		return c.goroutines <= before.goroutines+2 && c.conns <= before.conns+1
	})
	t.Logf("at rest before the crash: %+v; after: %+v", before, after)
	for _, want := range []string{"PostgreSQL exited unexpectedly", "restarting PostgreSQL", "PostgreSQL restarted"} {
		if !strings.Contains(s.stderr.String(), want) {
			t.Errorf("server log lacks %q", want)
		}
	}
	s.stop(t)
}

// embeddedURL is the connection string of the embedded cluster in pgdir.
func embeddedURL(pgdir string) string {
	return fmt.Sprintf("host=%s port=5432 user=kith dbname=kith sslmode=disable passfile=%s", pgdir, filepath.Join(pgdir, embedded.PassFile))
}

// externalPG is a PostgreSQL cluster the test runs itself with pg_ctl, on
// a loopback TCP port, standing in for an operator's own server.
type externalPG struct {
	t    *testing.T
	bin  string
	dir  string
	port int
	cred *syscall.Credential

	cmd    *exec.Cmd     // the running server, nil when stopped
	exited chan struct{} // closed when cmd has exited
}

func startExternalPG(t *testing.T) *externalPG {
	t.Helper()
	requirePostgresBinaries(t)
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		if p, err := exec.LookPath("pg_ctl"); err == nil {
			bins = []string{p}
		} else {
			t.Fatal("pg_ctl not found beside the PostgreSQL server binaries")
		}
	}
	sort.Strings(bins)
	pg := &externalPG{t: t, bin: filepath.Dir(bins[len(bins)-1]), dir: filepath.Join(tempDir(t), "pg"), port: testkit.FreePort(t)}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root and no postgres user to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		pg.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		os.Chmod(filepath.Dir(pg.dir), 0o755)
		os.Mkdir(pg.dir, 0o700)
		os.Chown(pg.dir, uid, gid)
	}
	pg.run("initdb", "-D", pg.dir, "-U", "admin", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-instructions")
	pg.start()
	t.Cleanup(func() { pg.stop(syscall.SIGQUIT) }) // immediate shutdown
	pg.admin("CREATE ROLE kith LOGIN")
	pg.admin("CREATE DATABASE kith OWNER kith")
	return pg
}

func (pg *externalPG) run(name string, args ...string) {
	pg.t.Helper()
	cmd := exec.Command(filepath.Join(pg.bin, name), args...)
	cmd.Dir = pg.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		pg.t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// start runs the server as a child of the test (not daemonized, as
// pg_ctl would), so that it dies with the test binary, and waits until it
// accepts connections.
func (pg *externalPG) start() {
	pg.t.Helper()
	logf, err := os.OpenFile(filepath.Join(pg.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		pg.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(pg.bin, "postgres"), "-D", pg.dir, "-p", strconv.Itoa(pg.port), "-k", pg.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off")
	cmd.Dir = pg.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	if err := subprocess.Start(cmd, syscall.SIGQUIT); err != nil {
		logf.Close()
		pg.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	pg.cmd, pg.exited = cmd, exited
	u := fmt.Sprintf("postgres://admin@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=5", pg.port)
	testkit.Eventually(pg.t, 60*time.Second, "PostgreSQL accepting connections", func() bool {
		select {
		case <-exited:
			pg.t.Fatalf("postgres exited at start:\n%s", pg.log())
		default:
		}
		conn, err := pgx.Connect(context.Background(), u)
		if err != nil {
			return false
		}
		conn.Close(context.Background())
		return true
	})
}

// stop sends sig to the server (SIGINT: fast shutdown; SIGQUIT:
// immediate) and waits until it has exited. Stopping a stopped server
// does nothing.
func (pg *externalPG) stop(sig syscall.Signal) {
	if pg.cmd == nil {
		return
	}
	pg.cmd.Process.Signal(sig)
	<-pg.exited
	pg.cmd = nil
}

func (pg *externalPG) log() string {
	b, _ := os.ReadFile(filepath.Join(pg.dir, "server.log"))
	return string(b)
}

// url connects as user to the kith database over TCP.
func (pg *externalPG) url(user string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/kith?sslmode=disable", user, pg.port)
}

func (pg *externalPG) admin(sql string) {
	pg.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u := fmt.Sprintf("postgres://admin@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		pg.t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		pg.t.Fatalf("%s: %v", sql, err)
	}
}

// setHBA replaces the cluster's pg_hba.conf with lines; the caller reloads
// or restarts.
func (pg *externalPG) setHBA(lines ...string) {
	pg.t.Helper()
	path := filepath.Join(pg.dir, "pg_hba.conf")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		pg.t.Fatal(err)
	}
	if pg.cred != nil {
		os.Chown(path, int(pg.cred.Uid), int(pg.cred.Gid))
	}
}

func hkpStatus(t *testing.T, base, fpr string) int {
	t.Helper()
	resp, err := http.Get(base + "/pks/lookup?op=get&options=mr&search=0x" + fpr)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestServeSurvivesRestartOfExternalPostgres: with a database_url, kith
// rides out its PostgreSQL going away and coming back. While it is gone
// health is 503; once it is back the pool serves again, the caches are on
// again and hold nothing from before (a key written while kith could not
// listen is found, although its miss was cached), and the recon tree has
// caught up with the store.
func TestServeSurvivesRestartOfExternalPostgres(t *testing.T) {
	// Mostly waiting (initdb, restarts, backoff): run beside the others.
	t.Parallel()
	pg := startExternalPG(t)
	s := startServe(t, tempDir(t), nil, "--database-url", pg.url("kith"))
	s.waitHealth(t, http.StatusOK, 60*time.Second)
	base := "http://" + s.addr
	up := newUploader(t, base, 60, 17)
	up.run(2)
	if !testkit.PollEvery(60*time.Second, 20*time.Millisecond, func() bool { return up.ok.Load() >= 20 }) {
		t.Fatalf("uploads: %d ok, %d failed\n%s", up.ok.Load(), up.failed.Load(), s.stderr)
	}
	up.halt()
	const listeners = 3
	before := atRest(t, base, pg.url("admin"), listeners, nil)

	// A key that comes in while kith cannot reach the database; ask for
	// it first, so that its miss is cached.
	lateKeys, err := keygen.New(18).Range(0, 5)
	if err != nil {
		t.Fatal(err)
	}
	late, err := pgp.ParseKey(lateKeys[0])
	if err != nil {
		t.Fatal(err)
	}
	lateFpr := fmt.Sprintf("%X", late.Fingerprint())
	if code := hkpStatus(t, base, lateFpr); code != http.StatusNotFound {
		t.Fatalf("late key before it exists: %d", code)
	}

	pg.stop(syscall.SIGINT) // fast shutdown
	s.waitHealth(t, http.StatusServiceUnavailable, 30*time.Second)
	// Back, but refusing kith: another writer stores keys meanwhile, and
	// their notifications reach nobody of kith's.
	pg.setHBA("host all kith 127.0.0.1/32 reject", "host all all 127.0.0.1/32 trust", "local all all trust")
	pg.start()
	other, err := postgres.Open(context.Background(), pg.url("admin"), postgres.Options{SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range lateKeys {
		k, err := pgp.ParseKey(raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.AddKey(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
	other.Close()
	s.waitHealth(t, http.StatusServiceUnavailable, 5*time.Second)
	pg.setHBA("host all all 127.0.0.1/32 trust", "local all all trust")
	pg.admin("SELECT pg_reload_conf()")

	s.waitHealth(t, http.StatusOK, 30*time.Second)
	want := float64(up.ok.Load() + int64(len(lateKeys)))
	if !testkit.PollEvery(30*time.Second, 50*time.Millisecond, func() bool {
		return metric(t, base, "kith_recon_tree_digests") == want
	}) {
		t.Fatalf("recon tree holds %v digests, want %v (store's)", metric(t, base, "kith_recon_tree_digests"), want)
	}
	after := atRest(t, base, pg.url("admin"), listeners, func(c leakCheck) bool {
		return c.goroutines <= before.goroutines+2 && c.conns <= before.conns+1
	})
	if code := hkpStatus(t, base, lateFpr); code != http.StatusOK {
		t.Fatalf("key written while kith was cut off: %d after reconnect (stale cached miss)", code)
	}
	if gone := up.missing(t); len(gone) > 0 {
		t.Fatalf("uploads answered 200 not served after the restart: %v", gone)
	}
	// Uploads work again.
	up2 := newUploader(t, base, 10, 19)
	up2.run(2)
	if !testkit.PollEvery(30*time.Second, 20*time.Millisecond, func() bool { return up2.ok.Load() == 10 }) {
		t.Fatalf("uploads after the restart: %d of 10 ok\n%s", up2.ok.Load(), s.stderr)
	}
	up2.halt()
	t.Logf("at rest before: %+v; after: %+v", before, after)
	if !strings.Contains(s.stderr.String(), "recon tree caught up with the store") {
		t.Error("log does not say the recon tree caught up")
	}
	s.stop(t)
}
