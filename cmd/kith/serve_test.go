package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/subprocess"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// builtKith is the kith binary, made once per test binary: a copy of the
// test binary itself, which runs kith's main when called kith (see
// TestMain), in a directory any user may read, so it can also run as an
// unprivileged user. No go build: the test binary is kith already.
// TestMain removes it.
var builtKith struct {
	once sync.Once
	dir  string // "" until made
	err  error
}

// copyExecutable copies the running test binary to path, mode 0755.
func copyExecutable(path string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func kithBinary(t testing.TB) string {
	t.Helper()
	b := &builtKith
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "kith-bin-"); b.err == nil {
			os.Chmod(b.dir, 0o755)
			b.err = copyExecutable(filepath.Join(b.dir, "kith"))
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return filepath.Join(b.dir, "kith")
}

// server is a running kith serve process.
type server struct {
	cmd    *exec.Cmd
	addr   string
	stderr *testkit.SyncBuffer
	exited chan struct{} // closed when the process has exited
	err    error         // its exit status, once exited is closed
}

// startServe runs kith serve in dir with extra args; cred, if set, runs it
// as another user.
func startServe(t testing.TB, dir string, cred *syscall.Credential, args ...string) *server {
	t.Helper()
	bin := kithBinary(t)
	addr := testkit.FreeAddr(t)
	cmd := exec.Command(bin, append([]string{"serve", "--listen", addr, "--recon-listen", "127.0.0.1:0"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	s := &server{cmd: cmd, addr: addr, stderr: &testkit.SyncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = s.stderr
	// Killed if the test binary dies; its cluster then stops too (kith
	// starts it with a parent-death signal of its own).
	if err := subprocess.Start(cmd, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	go func() { s.err = cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-s.exited
	})
	return s
}

// tempDir returns a fresh directory that the embedded cluster's user can
// reach when the tests run as root (t.TempDir's parent is private).
func tempDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o711)
	return dir
}

// waitHealthy polls /pks/health until it answers want or the deadline.
func (s *server) waitHealth(t testing.TB, want int, within time.Duration) {
	t.Helper()
	last := "no answer"
	if testkit.PollEvery(within, 20*time.Millisecond, func() bool {
		select {
		case <-s.exited:
			t.Fatalf("kith serve exited (%v) before /pks/health answered %d:\n%s", s.err, want, s.stderr.String())
		default:
		}
		resp, err := http.Get("http://" + s.addr + "/pks/health")
		if err != nil {
			last = err.Error()
			return false
		}
		resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == want
	}) {
		return
	}
	t.Fatalf("/pks/health did not answer %d within %s (last: %s)\n%s", want, within, last, s.stderr.String())
}

// stop sends SIGINT and waits for a clean exit.
func (s *server) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
		if s.err != nil {
			t.Fatalf("kith serve exited with %v after SIGINT:\n%s", s.err, s.stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("kith serve did not stop within 60 s of SIGINT:\n%s", s.stderr.String())
	}
}

// postgresRunningIn reports the pids of postgres servers (postmasters)
// whose data directory is dir. A backend forked a moment ago still shows
// its postmaster's command line; it is told apart by its parent.
func postgresRunningIn(dir string) (pids []int) {
	defer func() {
		servers := map[int]bool{}
		for _, p := range pids {
			servers[p] = true
		}
		kept := pids[:0]
		for _, p := range pids {
			if !servers[parentOf(p)] {
				kept = append(kept, p)
			}
		}
		pids = kept
	}()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 2 && strings.HasSuffix(args[0], "postgres") && args[1] == "-D" && args[2] == dir {
			pids = append(pids, pid)
		}
	}
	return pids
}

// parentOf returns a process's parent pid, or 0.
func parentOf(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...; comm may hold spaces, so cut at the last ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// TestServeEmbeddedDefaultStartsAndStopsItsCluster follows one data
// directory through a server's life (one initdb for all of it): the first
// start initialises a cluster and serves, a second server on the same
// directory is refused, a stop stops the cluster, a restart reuses it,
// and after a SIGKILL of kith no postgres is left and the next start
// recovers.
func TestServeEmbeddedDefaultStartsAndStopsItsCluster(t *testing.T) {
	requirePostgresBinaries(t)
	dir := tempDir(t)
	s := startServe(t, dir, nil)
	s.waitHealth(t, http.StatusOK, 30*time.Second)
	pgdir := filepath.Join(dir, "kith-data", "postgres")
	if pids := postgresRunningIn(pgdir); len(pids) != 1 {
		t.Fatalf("want one postgres for %s, found %v", pgdir, pids)
	}
	resp, err := http.Get("http://" + s.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var metrics bytes.Buffer
	metrics.ReadFrom(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`kith_http_requests_total{code="200",route="GET /pks/health"}`, "kith_store_pool_max_connections", "kith_http_request_duration_seconds_bucket"} {
		if !strings.Contains(metrics.String(), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// A second server on the same data directory is refused.
	second := startServe(t, dir, nil)
	select {
	case <-second.exited:
		if second.err == nil {
			t.Fatal("second kith serve on the same data dir exited 0")
		}
		if !strings.Contains(second.stderr.String(), "in use by another process") {
			t.Fatalf("second kith serve said:\n%s", second.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("second kith serve on the same data dir kept running")
	}
	s.waitHealth(t, http.StatusOK, 5*time.Second)
	s.stop(t)
	if pids := postgresRunningIn(pgdir); len(pids) != 0 {
		t.Fatalf("postgres still running after kith stopped: %v", pids)
	}

	// A second start reuses the initialised cluster; kill it.
	s = startServe(t, dir, nil)
	s.waitHealth(t, http.StatusOK, 30*time.Second)
	s.cmd.Process.Kill()
	<-s.exited
	if !testkit.PollEvery(30*time.Second, 50*time.Millisecond, func() bool { return len(postgresRunningIn(pgdir)) == 0 }) {
		t.Fatal("postgres still running 30 s after kith was killed")
	}
	// The next start recovers and serves.
	s = startServe(t, dir, nil)
	s.waitHealth(t, http.StatusOK, 30*time.Second)
	s.stop(t)
}

// TestServeRestartsPostgresAfterImmediateShutdown: an operator's
// immediate shutdown of the embedded server is an unexpected exit too; the
// supervisor starts it again and the server serves.
func TestServeRestartsPostgresAfterImmediateShutdown(t *testing.T) {
	// Mostly waiting (initdb, restarts, backoff): run beside the others.
	t.Parallel()
	requirePostgresBinaries(t)
	dir := tempDir(t)
	s := startServe(t, dir, nil)
	s.waitHealth(t, http.StatusOK, 30*time.Second)
	pgdir := filepath.Join(dir, "kith-data", "postgres")
	old := postgresRunningIn(pgdir)
	for _, pid := range old {
		syscall.Kill(pid, syscall.SIGQUIT) // immediate shutdown
	}
	if !testkit.PollEvery(30*time.Second, 10*time.Millisecond, func() bool {
		p := postgresRunningIn(pgdir)
		return len(p) == 1 && len(old) == 1 && p[0] != old[0]
	}) {
		t.Fatalf("postgres not restarted after immediate shutdown:\n%s", s.stderr)
	}
	s.waitHealth(t, http.StatusOK, 30*time.Second)
	s.stop(t)
}

// TestServeExitsWhenEmbeddedPostgresKeepsFailing: a server that cannot
// start again (here its configuration is broken) is retried with backoff
// while health says so, then kith exits non-zero with the reason, for its
// service manager to act on.
func TestServeExitsWhenEmbeddedPostgresKeepsFailing(t *testing.T) {
	// Mostly waiting (initdb, restarts, backoff): run beside the others.
	t.Parallel()
	requirePostgresBinaries(t)
	dir := tempDir(t)
	s := startServe(t, dir, nil)
	s.waitHealth(t, http.StatusOK, 30*time.Second)
	pgdir := filepath.Join(dir, "kith-data", "postgres")
	f, err := os.OpenFile(filepath.Join(pgdir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("\nthis is not a setting\n")
	f.Close()
	for _, pid := range postgresRunningIn(pgdir) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	body := ""
	if !testkit.PollEvery(30*time.Second, 20*time.Millisecond, func() bool {
		resp, err := http.Get("http://" + s.addr + "/pks/health")
		if err != nil {
			return false
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		body = b.String()
		return resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(body, "database restarting")
	}) {
		t.Fatalf("/pks/health never said the database is restarting (last %q):\n%s", body, s.stderr)
	}
	select {
	case <-s.exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("kith still running 2 min after PostgreSQL stopped starting:\n%s", s.stderr)
	}
	if s.err == nil {
		t.Fatal("kith exited 0 after giving up on PostgreSQL")
	}
	log := s.stderr.String()
	if n := strings.Count(log, `msg="restarting PostgreSQL"`); n != 5 {
		t.Errorf("%d restart attempts logged, want 5 (one line each)", n)
	}
	if !strings.Contains(log, "giving up") {
		t.Errorf("exit does not say why:\n%s", log)
	}
}

func TestServeWithDatabaseURLStartsNoCluster(t *testing.T) {
	url := pgtest.NewDatabase(t)
	dir := tempDir(t)
	s := startServe(t, dir, nil, "--database-url", url)
	s.waitHealth(t, http.StatusOK, 30*time.Second)
	if _, err := os.Stat(filepath.Join(dir, "kith-data")); err == nil {
		t.Error("kith created a data directory although it was given a database URL")
	}
	s.stop(t)
}

// TestServeAsOrdinaryUser runs kith as an unprivileged user when the tests
// run as root (as in CI); otherwise every other test already does.
func TestServeAsOrdinaryUser(t *testing.T) {
	requirePostgresBinaries(t)
	if os.Geteuid() != 0 {
		t.Skip("tests already run as an ordinary user")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir := tempDir(t)
	os.Chmod(dir, 0o755)
	os.Chown(dir, uid, gid)
	s := startServe(t, dir, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)})
	s.waitHealth(t, http.StatusOK, 30*time.Second)
	pgdir := filepath.Join(dir, "kith-data", "postgres")
	st, err := os.Stat(pgdir)
	if err != nil {
		t.Fatal(err)
	}
	if owner := st.Sys().(*syscall.Stat_t).Uid; int(owner) != uid {
		t.Errorf("cluster directory owned by uid %d, want %d", owner, uid)
	}
	s.stop(t)
	if pids := postgresRunningIn(pgdir); len(pids) != 0 {
		t.Fatalf("postgres still running after kith stopped: %v", pids)
	}
}

// requirePostgresBinaries skips (or fails with CI=true) without a server.
func requirePostgresBinaries(t *testing.T) {
	t.Helper()
	pgtest.Unavailable(t)
}

// TestServeWiresEveryFrontend uploads a key to a real kith serve and reads
// it back over HKP, and asks the identity routes and stats too.
func TestServeWiresEveryFrontend(t *testing.T) {
	url := pgtest.NewDatabase(t)
	s := startServe(t, tempDir(t), nil, "--database-url", url)
	s.waitHealth(t, http.StatusOK, 30*time.Second)
	raw, err := keygen.New(3).Key(0)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.addr
	resp, err := http.Post(base+"/pks/add", "application/pgp-keys", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/pks/add: %s", resp.Status)
	}
	k, err := pgp.ParseKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	fpr := fmt.Sprintf("%X", k.Fingerprint())
	for path, want := range map[string]int{
		"/pks/lookup?op=get&options=mr&search=0x" + fpr: http.StatusOK,
		"/pks/lookup?op=stats&options=mr":               http.StatusOK,
		"/users/nobody-here.keys":                       http.StatusNotFound,
		"/api/v1/log":                                   http.StatusOK,
		"/":                                             http.StatusOK,
		"/keys/" + fpr:                                  http.StatusOK,
		"/login":                                        http.StatusOK,
	} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %s, want %d", path, resp.Status, want)
		}
	}
	// The background signer signs a first checkpoint at start, by the key
	// that /log/key serves and kith log-key prints.
	var checkpoint []byte
	if !testkit.PollEvery(30*time.Second, 50*time.Millisecond, func() bool {
		resp, err := http.Get(base + "/log/checkpoint")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		checkpoint, _ = io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatal("no checkpoint signed")
	}
	resp, err = http.Get(base + "/log/key")
	if err != nil {
		t.Fatal(err)
	}
	served, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	printed, stderr, err := kithCmd("log-key", "--database-url", url, "--listen", s.addr)
	if err != nil || printed != string(served) {
		t.Fatalf("kith log-key printed %q (%v %s), /log/key serves %q", printed, err, stderr, served)
	}
	if _, err := tlog.OpenCheckpoint(checkpoint, strings.TrimSpace(printed)); err != nil {
		t.Fatalf("the served checkpoint does not verify with the printed key: %v", err)
	}
	s.stop(t)
}

// TestLoadRunsBesideServe: kith load on the data directory of a running
// kith serve uses its cluster, and the server serves what was loaded.
func TestLoadRunsBesideServe(t *testing.T) {
	requirePostgresBinaries(t)
	dir := tempDir(t)
	s := startServe(t, dir, nil)
	s.waitHealth(t, http.StatusOK, 30*time.Second)
	dump := writeTypicalDump(t, 50, 9)
	k, err := pgp.ReadKeys(mustOpen(t, dump))
	if err != nil || len(k) != 50 {
		t.Fatalf("read dump: %d keys, %v", len(k), err)
	}
	// Ask first, so that the server has a cached miss to drop.
	fpr := fmt.Sprintf("%X", k[49].Fingerprint())
	lookup := "http://" + s.addr + "/pks/lookup?op=get&options=mr&search=0x" + fpr
	if resp, err := http.Get(lookup); err == nil {
		resp.Body.Close()
	}
	cmd := exec.Command(kithBinary(t), "load", dump)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kith load beside kith serve: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "50 inserted") {
		t.Fatalf("load said: %s", out)
	}
	status := "no answer"
	if !testkit.PollEvery(30*time.Second, 20*time.Millisecond, func() bool {
		resp, err := http.Get(lookup)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		status = resp.Status
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatalf("the server does not serve a loaded key within 30 s: %s", status)
	}
	s.stop(t)
}

func mustOpen(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestServeProfilerOnlyOnDebugListen: debug_listen serves Go's profiler on
// its own loopback listener, and the public listener has no such route.
func TestServeProfilerOnlyOnDebugListen(t *testing.T) {
	url := pgtest.NewDatabase(t)
	debug := testkit.FreeAddr(t)
	s := startServe(t, tempDir(t), nil, "--database-url", url, "--debug-listen", debug)
	s.waitHealth(t, http.StatusOK, 30*time.Second)
	get := func(u string) (int, string) {
		t.Helper()
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://" + debug + "/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Errorf("debug listener: %d %.80q, want the goroutine profile", code, body)
	}
	if code, _ := get("http://" + s.addr + "/debug/pprof/goroutine?debug=1"); code != http.StatusNotFound {
		t.Errorf("public listener answered /debug/pprof/ with %d, want 404", code)
	}
	s.stop(t)
}
