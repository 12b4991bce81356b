package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity/testkit"
)

// needServer skips (or fails with CI=true) without PostgreSQL binaries.
func needServer(t *testing.T) {
	t.Helper()
	if _, err := findBinDir(""); err != nil {
		testkit.Missing(t, "PostgreSQL server binaries: %v", err)
	}
}

// clusterDir returns a directory for a cluster that the server's user can
// reach when the tests run as root.
func clusterDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o711)
	os.Chmod(dir, 0o711)
	return filepath.Join(dir, "pg")
}

func startCluster(t *testing.T, opts Options) (*Cluster, *testkit.SyncBuffer) {
	t.Helper()
	needServer(t)
	logs := &testkit.SyncBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	if opts.Dir == "" {
		opts.Dir = clusterDir(t)
	}
	opts.Settings = map[string]string{"fsync": "off"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	return c, logs
}

func (c *Cluster) pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return 0
	}
	return c.proc.cmd.Process.Pid
}

func exec1(t *testing.T, url, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
}

func TestClusterRestartsServerKilledWithSIGKILL(t *testing.T) {
	c, logs := startCluster(t, Options{})
	exec1(t, c.URL(), "CREATE TABLE t (v int)")
	exec1(t, c.URL(), "INSERT INTO t VALUES (42)")
	// A backend busy in a query when its postmaster dies is one of the
	// leftovers the restart must end first.
	busy, err := pgx.Connect(context.Background(), c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close(context.Background())
	go busy.Exec(context.Background(), "SELECT pg_sleep(600)")

	old := c.pid()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "a new postmaster runs", func() bool {
		return c.State() == Running && c.pid() != 0 && c.pid() != old
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		t.Fatalf("connect after restart: %v\n%s", err, logs)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != 42 {
		t.Fatalf("committed row after restart: %d, %v", v, err)
	}
	for _, want := range []string{"PostgreSQL exited unexpectedly", "restarting PostgreSQL", "attempt=1", "PostgreSQL restarted"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	select {
	case <-c.Failed():
		t.Fatalf("supervisor gave up: %v", c.Err())
	default:
	}
}

func TestClusterGivesUpAfterRepeatedFailures(t *testing.T) {
	c, logs := startCluster(t, Options{MaxFailures: 2, FailureWindow: time.Minute})
	// A server that cannot start again: its configuration is broken.
	conf := filepath.Join(c.opts.Dir, "postgresql.conf")
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("\nthis is not a setting\n")
	f.Close()
	syscall.Kill(c.pid(), syscall.SIGKILL)
	select {
	case <-c.Failed():
	case <-time.After(2 * time.Minute):
		t.Fatalf("supervisor still trying after 2 min:\n%s", logs)
	}
	if c.State() != Failed {
		t.Errorf("state %s, want failed", c.State())
	}
	err = c.Err()
	if err == nil || !strings.Contains(err.Error(), "failed 3 times") {
		t.Errorf("Err() = %v, want the count of failures", err)
	}
	// The crash and the first failed restart are tolerated; the second
	// failed restart is the third failure.
	if n := strings.Count(logs.String(), "msg=\"restarting PostgreSQL\""); n != 2 {
		t.Errorf("%d restart attempts logged, want 2:\n%s", n, logs)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestClusterStopIsNotACrash(t *testing.T) {
	c, logs := startCluster(t, Options{})
	pid := c.pid()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if c.State() != Stopped {
		t.Errorf("state %s after Stop, want stopped", c.State())
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("postmaster %d still there after Stop (%v)", pid, err)
	}
	if strings.Contains(logs.String(), "restarting") {
		t.Errorf("Stop triggered a restart:\n%s", logs)
	}
}

// connectErr tries a connection with conn's settings and returns its error.
func connectErr(conn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, conn)
	if err == nil {
		c.Close(ctx)
	}
	return err
}

// assertPasswordRequired is the attack: a process that reaches the socket
// (as the cluster's OS user, or root, can) but lacks the password file
// must not get in, under any role, nor with a guessed password.
func assertPasswordRequired(t *testing.T, c *Cluster) {
	t.Helper()
	t.Setenv("PGPASSWORD", "")
	for _, role := range []string{"kith", "postgres", "root"} {
		conn := fmt.Sprintf("host=%s port=5432 user=%s dbname=postgres sslmode=disable passfile=/nonexistent", c.opts.Dir, role)
		if err := connectErr(conn); err == nil {
			t.Errorf("role %s connected without a password", role)
		}
		if err := connectErr(conn + " password=guessed"); err == nil || !strings.Contains(err.Error(), "password authentication failed") {
			t.Errorf("role %s with a wrong password: %v, want a password failure", role, err)
		}
	}
	if err := connectErr(c.URL()); err != nil {
		t.Errorf("connect with the password file: %v", err)
	}
	st, err := os.Stat(filepath.Join(c.opts.Dir, PassFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", PassFile, st.Mode().Perm())
	}
	if owner := st.Sys().(*syscall.Stat_t).Uid; int(owner) != os.Geteuid() {
		t.Errorf("%s owned by uid %d, want Kith's own %d", PassFile, owner, os.Geteuid())
	}
	if strings.Contains(c.URL(), "password=") {
		t.Errorf("URL carries the password itself: %s", c.URL())
	}
}

func TestClusterRefusesConnectionsWithoutThePassword(t *testing.T) {
	c, _ := startCluster(t, Options{})
	assertPasswordRequired(t, c)
	// The same after a crash and restart.
	old := c.pid()
	syscall.Kill(old, syscall.SIGKILL)
	testkit.Eventually(t, 30*time.Second, "restarted", func() bool { return c.State() == Running && c.pid() != old })
	assertPasswordRequired(t, c)
}

// TestClusterMovesTrustClusterToPasswords: a data directory made before
// Kith used passwords (initdb's trust rules, no password file) is moved
// to password authentication at start, and keeps its data.
func TestClusterMovesTrustClusterToPasswords(t *testing.T) {
	dir := clusterDir(t)
	c, _ := startCluster(t, Options{Dir: dir})
	exec1(t, c.URL(), "CREATE TABLE t (v int)")
	exec1(t, c.URL(), "INSERT INTO t VALUES (7)")
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	// What older Kith left: trust for every local connection.
	hba := filepath.Join(dir, "pg_hba.conf")
	st, _ := os.Stat(hba)
	if err := os.WriteFile(hba, []byte("local all all trust\nhost all all 127.0.0.1/32 trust\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	os.Chown(hba, int(sys.Uid), int(sys.Gid))
	if err := os.Remove(filepath.Join(dir, PassFile)); err != nil {
		t.Fatal(err)
	}

	c, logs := startCluster(t, Options{Dir: dir})
	if !strings.Contains(logs.String(), "switching it to password authentication") {
		t.Errorf("no log line about the move:\n%s", logs)
	}
	assertPasswordRequired(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != 7 {
		t.Fatalf("data after the move: %d, %v", v, err)
	}
	// The password never reached the server's log.
	pw, err := c.readPassword()
	if err != nil || pw == "" {
		t.Fatalf("password file: %q, %v", pw, err)
	}
	if b, _ := os.ReadFile(c.logPath()); strings.Contains(string(b), pw) {
		t.Error("the server log holds the password")
	}
}

// TestClusterAsRootUnderAHomeOnlyRootEnters: as root, a data directory
// inside a home only root can enter (mode 0700) still gets a cluster. It
// lives under ReachableRoot, the data directory links to it, the home
// stays closed, and the next start finds the same cluster through the
// link.
func TestClusterAsRootUnderAHomeOnlyRootEnters(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root runs the server as another user")
	}
	home := t.TempDir()
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, "src", "kith", "kith-data", "postgres")
	// An earlier Kith stopped at the check and left the directory empty.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	root := shortReachableDir(t)

	c, logs := startCluster(t, Options{Dir: dir, ReachableRoot: root})
	exec1(t, c.URL(), "CREATE TABLE t (v int)")
	exec1(t, c.URL(), "INSERT INTO t VALUES (7)")
	target, err := os.Readlink(dir)
	if err != nil || filepath.Dir(target) != root {
		t.Fatalf("data directory links to %q (%v), want a directory in %s", target, err, root)
	}
	if !strings.Contains(logs.String(), "cluster lives elsewhere") || !strings.Contains(logs.String(), "not_searchable="+home) {
		t.Errorf("no log line says where the cluster went and why:\n%s", logs)
	}
	if st, err := os.Stat(home); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("home is now %v (%v), want it left at 0700", st.Mode().Perm(), err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}

	c, _ = startCluster(t, Options{Dir: dir, ReachableRoot: root})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != 7 {
		t.Fatalf("data after a restart through the link: %d, %v", v, err)
	}
	if again, err := os.Readlink(dir); err != nil || again != target {
		t.Errorf("second start links to %q (%v), want %q", again, err, target)
	}
}

// TestClusterAsRootKeepsAnUnreachableCluster: a cluster already made in
// a directory the server's user cannot reach is never moved: Start says
// what to do.
func TestClusterAsRootKeepsAnUnreachableCluster(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root runs the server as another user")
	}
	needServer(t)
	home := t.TempDir()
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, "kith-data", "postgres")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "PG_VERSION"), []byte("17\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Made for the server's user, as Start makes them.
	pg, err := user.Lookup("postgres")
	if err != nil {
		testkit.Missing(t, "the postgres user: %v", err)
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(shortReachableDir(t), "clusters")
	_, err = Start(t.Context(), Options{Dir: dir, ReachableRoot: root})
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("Start: %v, want advice to move the cluster", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err != nil {
		t.Errorf("the cluster directory was touched: %v", err)
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s was made for a cluster that stays: %v", root, err)
	}
}

// shortReachableDir is a directory the server's user can reach, with a
// path short enough for a socket in a directory below it.
func shortReachableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "c")
}

// TestStartExistingCreatesNothing: with Existing, Start on a directory
// that holds no cluster fails with ErrNoCluster and leaves nothing behind
// (no directory, lock file or log); on a cluster made before, it starts
// it.
func TestStartExistingCreatesNothing(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "kith-data", "postgres")
	_, err := Start(context.Background(), Options{Dir: dir, Existing: true})
	if !errors.Is(err, ErrNoCluster) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Start(Existing) on nothing: %v, want ErrNoCluster naming %s", err, dir)
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Fatalf("Start(Existing) left %v in %s", left, parent)
	}

	c, _ := startCluster(t, Options{})
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	again, _ := startCluster(t, Options{Dir: c.opts.Dir, Existing: true})
	exec1(t, again.URL(), "SELECT 1")
}

// owners returns the owner of the cluster directory, of everything in it,
// and of the lock file beside it.
func owners(t *testing.T, dir string) map[string]uint32 {
	t.Helper()
	found := map[string]uint32{}
	paths := []string{dir + ".lock"}
	err := filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err == nil {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			continue // a file the server removed meanwhile
		}
		found[p] = st.Uid
	}
	return found
}

// TestClusterAsRootRunsAsItsOwner: as root, a cluster that exists runs as
// the user that owns its directory, not as Options.User (a root kith
// log-key or load on the stopped cluster of a service that runs as its
// own user), and stays that user's: no file of it, its log or its lock
// file changes hands, so the service starts it again afterwards.
func TestClusterAsRootRunsAsItsOwner(t *testing.T) {
	owner := testkit.SystemUser(t)
	dir := clusterDir(t)
	// The service's cluster, made for its user.
	c, _ := startCluster(t, Options{Dir: dir, User: owner.Username})
	exec1(t, c.URL(), "CREATE TABLE t (v int)")
	exec1(t, c.URL(), "INSERT INTO t VALUES (7)")
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.ParseUint(owner.Uid, 10, 32)
	before := owners(t, dir)
	if before[dir] != uint32(uid) {
		t.Fatalf("the new cluster belongs to uid %d, want %s's %d", before[dir], owner.Username, uid)
	}

	// A store command run as root, with the default User (postgres).
	c, logs := startCluster(t, Options{Dir: dir, Existing: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		t.Fatal(err)
	}
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != 7 {
		t.Fatalf("the owner's data, started as root: %d, %v", v, err)
	}
	conn.Close(ctx)
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d", c.pid()), &st); err != nil || st.Uid != uint32(uid) {
		t.Errorf("the server runs as uid %d (%v), want the cluster's owner %d", st.Uid, err, uid)
	}
	if !strings.Contains(logs.String(), "running the cluster as the user that owns it") ||
		!strings.Contains(logs.String(), "owner="+owner.Username) {
		t.Errorf("no log line says whom the cluster runs as:\n%s", logs)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for p, was := range before {
		if now, ok := owners(t, dir)[p]; ok && now != was {
			t.Errorf("%s changed hands: uid %d, was %d", p, now, was)
		}
	}
	for p, now := range owners(t, dir) {
		if _, old := before[p]; !old && now != uint32(uid) {
			t.Errorf("%s, new, belongs to uid %d, not the cluster's owner", p, now)
		}
	}

	// A cluster root owns cannot run: Start says so and touches nothing.
	if err := os.Chown(dir, 0, 0); err != nil {
		t.Fatal(err)
	}
	_, err = Start(t.Context(), Options{Dir: dir, Existing: true})
	if err == nil || !strings.Contains(err.Error(), "belongs to root") {
		t.Fatalf("Start on a cluster root owns: %v", err)
	}
}
