// Package embedded runs a private PostgreSQL cluster for Kith: the default
// store when no database URL is configured, and the throwaway cluster tests
// use.
//
// It owns finding the server binaries, initdb on first use, starting the
// server on a Unix socket inside the data directory (no TCP), waiting until
// it accepts connections, and stopping it. It does not speak SQL beyond
// creating the one database Kith uses; that is package postgres's job.
//
// Every connection needs the password of the cluster's one role, kith: a
// random password kept in the cluster directory's PassFile (see auth.go
// for who can connect). Clusters made before that are moved to it at
// start.
//
// PostgreSQL refuses to run as root. When the calling process is root, a
// new cluster is made for an unprivileged system user (by default
// "postgres"), and a cluster that exists runs as the user that owns its
// directory: root never hands a cluster to another user.
package embedded

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity/retry"
	"github.com/kith-keyserver/kith/identity/subprocess"
)

// Options says where and how to run a cluster.
type Options struct {
	// Dir is the cluster's data directory (PGDATA). It is created and
	// initialised on first use, unless Existing. Its socket lives in it
	// too.
	Dir string
	// Existing has Start use only a cluster Dir already holds: it creates
	// and initialises nothing (no directory, no lock file, no link) and
	// fails with ErrNoCluster when Dir holds none. For tools that must
	// work on a store that exists, never on a new empty one.
	Existing bool
	// Database is the database Kith uses; it is created when missing.
	// Default "kith".
	Database string
	// User is the OS user that owns and runs a new cluster when the caller
	// is root. Default "postgres". Ignored when the caller is not root,
	// and for a cluster that exists, which runs as the user that owns its
	// directory (say, a service's user, after a tool run as root).
	User string
	// BinDir holds initdb and postgres. Empty means search: $PATH, then
	// /usr/lib/postgresql/<newest>/bin, then /usr/local/pgsql/bin.
	BinDir string
	// Settings are extra server settings (-c name=value), e.g. for tests
	// {"fsync": "off"}.
	Settings map[string]string
	// StartTimeout bounds how long Start waits for the server to accept
	// connections. Default 60 s.
	StartTimeout time.Duration
	// MaxFailures is how many unexpected exits and failed restarts the
	// supervisor tolerates within FailureWindow before it gives up (see
	// Cluster.Failed). Default 5.
	MaxFailures int
	// FailureWindow is the window MaxFailures counts in. Default 1 min.
	FailureWindow time.Duration
	// ReachableRoot is where the cluster lives instead when the caller is
	// root and User cannot reach Dir (a checkout under a home only root
	// can enter): a directory there named after Dir, with Dir a symbolic
	// link to it. Default /var/lib/kith-clusters, beside (not inside) the
	// state directory /var/lib/kith of a Kith service, which systemd may
	// hand to the service's user as a whole.
	ReachableRoot string
	// Logger receives the cluster's life-cycle events; the server's own
	// output goes to Dir/log/postgres.log. Default: discard.
	Logger *slog.Logger
}

// Cluster is a running private PostgreSQL server. It is supervised: when
// the server exits without Stop asking it to, the cluster starts it again
// (PostgreSQL's crash recovery does the rest), with the backoff of package
// retry and a log line per attempt, until it runs or fails too often.
type Cluster struct {
	opts Options
	bin  string
	cred *syscall.Credential
	lock *os.File

	mu       sync.Mutex
	proc     *process // the server running now; nil while restarting
	state    State
	stopping bool
	failed   chan struct{} // closed once supervision gives up
	failErr  error         // why, valid once failed is closed
	done     chan struct{} // closed when the supervisor has returned
	cancel   context.CancelFunc
}

// process is one run of the postmaster.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // the server's exit error, valid once exited is closed
}

// State is what a cluster is doing.
type State int

// The states of a cluster.
const (
	// Running: the server accepts connections (as far as the cluster
	// knows; a query may still fail).
	Running State = iota
	// Restarting: the server exited unexpectedly and is being started
	// again.
	Restarting
	// Failed: the server failed too often in a short window; the cluster
	// gave up (see Failed).
	Failed
	// Stopped: Stop was called.
	Stopped
)

func (s State) String() string {
	switch s {
	case Running:
		return "running"
	case Restarting:
		return "restarting"
	case Failed:
		return "failed"
	case Stopped:
		return "stopped"
	}
	return "unknown"
}

// ErrNoServer is returned when no PostgreSQL server binaries can be found.
var ErrNoServer = errors.New("no PostgreSQL server binaries (initdb, postgres) found: install them (apt-get install postgresql) or pass --database-url to use an existing server")

// ErrNoCluster is returned by Start with Options.Existing when the
// directory holds no cluster.
var ErrNoCluster = errors.New("no PostgreSQL cluster")

// ErrLocked is returned when another process already runs a cluster on the
// same directory.
var ErrLocked = errors.New("data directory is in use by another process")

// port is the port number in the socket's file name; no TCP port is opened.
const port = 5432

// Start initialises the cluster directory if needed, starts the server and
// waits until it accepts connections, then supervises it. The caller must
// call Stop.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	opts = withDefaults(opts)
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("embedded: data directory %q: %w", opts.Dir, err)
	}
	opts.Dir = dir
	if opts.Existing {
		if err := hasCluster(dir); err != nil {
			return nil, err
		}
	}
	bin, err := findBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	cred, owner, err := runAs(dir, opts.User, opts.Logger)
	if err != nil {
		return nil, err
	}
	if owner != nil {
		if dir, err = reachableDir(dir, opts.ReachableRoot, owner, opts.Logger); err != nil {
			return nil, err
		}
		opts.Dir = dir
	}
	if len(filepath.Join(dir, ".s.PGSQL.5432")) > 100 {
		return nil, fmt.Errorf("embedded: data directory %q: path too long for a Unix socket (at most about 90 characters)", dir)
	}
	if err := prepareDir(dir, owner); err != nil {
		return nil, err
	}
	lock, err := lockDir(dir, owner)
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, bin: bin, cred: cred, lock: lock,
		failed: make(chan struct{}), done: make(chan struct{})}
	if err := c.initIfNeeded(ctx); err != nil {
		c.release()
		return nil, err
	}
	p, err := c.run(ctx)
	if err != nil {
		c.release()
		return nil, err
	}
	if err := c.requirePassword(ctx); err != nil {
		c.stopProcess(p)
		c.release()
		return nil, err
	}
	c.proc = p
	sctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.supervise(sctx)
	return c, nil
}

func withDefaults(opts Options) Options {
	if opts.Database == "" {
		opts.Database = "kith"
	}
	if opts.User == "" {
		opts.User = "postgres"
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if opts.MaxFailures == 0 {
		opts.MaxFailures = 5
	}
	if opts.FailureWindow == 0 {
		opts.FailureWindow = time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ReachableRoot == "" {
		opts.ReachableRoot = "/var/lib/kith-clusters"
	}
	return opts
}

// hasCluster reports, as ErrNoCluster, that dir (or what a symbolic link
// there points to) holds no initialised cluster.
func hasCluster(dir string) error {
	ok, err := initialised(dir)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("embedded: %s: %w", dir, ErrNoCluster)
	}
	return nil
}

// initialised reports whether dir (or what a symbolic link there points
// to) holds a cluster initdb made: its PG_VERSION file.
func initialised(dir string) (bool, error) {
	_, err := os.Stat(filepath.Join(dir, "PG_VERSION"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("embedded: %w", err)
	}
	return true, nil
}

// initIfNeeded runs initdb on a new cluster directory.
func (c *Cluster) initIfNeeded(ctx context.Context) error {
	dir := c.opts.Dir
	ok, err := initialised(dir)
	if err != nil || ok {
		return err
	}
	c.opts.Logger.Info("initialising PostgreSQL cluster", "dir", dir)
	return c.initdb(ctx)
}

// run starts the postmaster and waits until it accepts connections. On
// failure it leaves no server running.
func (c *Cluster) run(ctx context.Context) (*process, error) {
	dir := c.opts.Dir
	// A stale postmaster.pid from a crash is handled by postgres itself; a
	// live one belongs to a server we do not own, which our lock rules out
	// for Kith processes.
	logDir := filepath.Join(dir, "log")
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	if c.cred != nil {
		if err := os.Chown(logDir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return nil, fmt.Errorf("embedded: %w", err)
		}
	}
	logFile, err := os.OpenFile(filepath.Join(logDir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("embedded: server log: %w", err)
	}
	if c.cred != nil {
		// Root made or opened it: it stays the cluster user's, so that
		// the cluster still starts when Kith runs as that user.
		if err := logFile.Chown(int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			logFile.Close()
			return nil, fmt.Errorf("embedded: server log: %w", err)
		}
	}
	args := []string{"-D", dir, "-k", dir, "-p", strconv.Itoa(port), "-c", "listen_addresses="}
	keys := make([]string, 0, len(c.opts.Settings))
	for k := range c.opts.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-c", k+"="+c.opts.Settings[k])
	}
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	// If Kith dies without stopping the server, the server gets a fast
	// shutdown request (SIGINT) instead of living on as an orphan. The
	// server and its backends form one process group, so that the
	// backends a crashed postmaster leaves behind can be ended before a
	// new one starts.
	if err := subprocess.Start(cmd, syscall.SIGINT); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("embedded: start postgres: %w", err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	c.opts.Logger.Info("started PostgreSQL", "pid", cmd.Process.Pid, "dir", dir)
	if err := c.waitReady(ctx, p); err != nil {
		c.stopProcess(p)
		return nil, err
	}
	return p, nil
}

// supervise restarts the server whenever it exits without Stop asking it
// to, until Stop, or until it failed more than MaxFailures times within
// FailureWindow.
func (c *Cluster) supervise(ctx context.Context) {
	defer close(c.done)
	log := c.opts.Logger
	backoff := retry.Backoff{Min: 250 * time.Millisecond, Max: 5 * time.Second}
	var failures []time.Time
	fail := func(err error) bool {
		now := time.Now()
		failures = append(failures, now)
		for len(failures) > 0 && now.Sub(failures[0]) > c.opts.FailureWindow {
			failures = failures[1:]
		}
		if len(failures) <= c.opts.MaxFailures {
			return false
		}
		err = fmt.Errorf("embedded: PostgreSQL failed %d times within %s, giving up: %w (see %s)",
			len(failures), c.opts.FailureWindow, err, c.logPath())
		log.Error("PostgreSQL keeps failing; giving up", "failures", len(failures), "window", c.opts.FailureWindow.String(), "err", err)
		c.mu.Lock()
		c.state = Failed
		c.failErr = err
		c.mu.Unlock()
		close(c.failed)
		return true
	}
	for {
		c.mu.Lock()
		p := c.proc
		c.mu.Unlock()
		started := time.Now()
		select {
		case <-p.exited:
		case <-ctx.Done():
			return
		}
		c.mu.Lock()
		if c.stopping {
			c.mu.Unlock()
			return
		}
		c.proc, c.state = nil, Restarting
		c.mu.Unlock()
		err := fmt.Errorf("postgres (pid %d) exited: %v", p.cmd.Process.Pid, p.err)
		log.Error("PostgreSQL exited unexpectedly", "pid", p.cmd.Process.Pid, "err", fmt.Sprint(p.err),
			"log", lastLines(readTail(c.logPath()), 3))
		endGroup(p.cmd.Process.Pid)
		if time.Since(started) >= retry.DefaultHealthy {
			backoff.Reset()
		}
		for attempt := 1; ; attempt++ {
			if fail(err) {
				return
			}
			wait := backoff.Next()
			log.Warn("restarting PostgreSQL", "attempt", attempt, "in", wait.String())
			if !retry.Wait(ctx, wait) {
				return
			}
			np, rerr := c.run(ctx)
			if rerr != nil {
				if ctx.Err() != nil {
					return
				}
				log.Warn("restarting PostgreSQL failed", "attempt", attempt, "err", rerr)
				err = rerr
				continue
			}
			c.mu.Lock()
			if c.stopping {
				c.mu.Unlock()
				c.stopProcess(np)
				return
			}
			c.proc, c.state = np, Running
			c.mu.Unlock()
			log.Info("PostgreSQL restarted", "attempt", attempt, "pid", np.cmd.Process.Pid)
			break
		}
	}
}

// endGroup ends what is left of a postmaster's process group once the
// postmaster is gone: its backends notice its death by themselves, but a
// new server cannot start while one of them still holds the old shared
// memory. They get SIGQUIT (PostgreSQL's immediate shutdown), then
// SIGKILL.
func endGroup(pgid int) {
	gone := func(within time.Duration) bool {
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
				return true
			}
			time.Sleep(20 * time.Millisecond)
		}
		return false
	}
	_ = syscall.Kill(-pgid, syscall.SIGQUIT)
	if gone(5 * time.Second) {
		return
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	gone(5 * time.Second)
}

// initdb creates the cluster with password authentication for every
// connection: a new random password for the kith role, kept in PassFile.
func (c *Cluster) initdb(ctx context.Context) error {
	dir := c.opts.Dir
	password := newPassword()
	// initdb reads the password from a file the server's user can read;
	// it lives beside the data directory only while initdb runs.
	pwfile := dir + ".pwfile"
	if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o600); err != nil {
		return fmt.Errorf("embedded: initdb password file: %w", err)
	}
	defer os.Remove(pwfile)
	if c.cred != nil {
		if err := os.Chown(pwfile, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("embedded: initdb password file: %w", err)
		}
	}
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "initdb"),
		"-D", dir, "-U", "kith", "--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "--pwfile="+pwfile,
		"-E", "UTF8", "--locale=C", "--no-instructions")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("embedded: initdb %s: %w: %s", dir, err, lastLines(string(out), 5))
	}
	if err := c.writePassFile(password); err != nil {
		return err
	}
	return c.writeHBA()
}

// waitReady polls until the server accepts connections, then creates the
// database when missing.
func (c *Cluster) waitReady(ctx context.Context, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	var lastErr error
	for {
		select {
		case <-p.exited:
			return fmt.Errorf("embedded: postgres exited at start (%v); see %s: %s",
				p.err, c.logPath(), lastLines(readTail(c.logPath()), 3))
		default:
		}
		conn, err := pgx.Connect(ctx, c.dsn("postgres"))
		if err == nil {
			err = c.ensureDatabase(ctx, conn)
			conn.Close(context.Background())
			return err
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("embedded: postgres did not accept connections within %s: %v", c.opts.StartTimeout, lastErr)
		case <-p.exited:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) ensureDatabase(ctx context.Context, conn *pgx.Conn) error {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", c.opts.Database).Scan(&exists); err != nil {
		return fmt.Errorf("embedded: look up database: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{c.opts.Database}.Sanitize()); err != nil {
		return fmt.Errorf("embedded: create database %s: %w", c.opts.Database, err)
	}
	return nil
}

// URL returns the connection string for the cluster's Kith database. It
// names the password file rather than holding the password.
func (c *Cluster) URL() string { return c.dsn(c.opts.Database) }

// URLFor returns the connection string for another database of the cluster.
func (c *Cluster) URLFor(database string) string { return c.dsn(database) }

func (c *Cluster) dsn(database string) string {
	return fmt.Sprintf("host=%s port=%d user=kith dbname=%s sslmode=disable passfile=%s", c.opts.Dir, port, database, c.passPath())
}

func (c *Cluster) logPath() string { return filepath.Join(c.opts.Dir, "log", "postgres.log") }

// State reports what the cluster is doing. A cluster attached to another
// process's server (StartOrAttach) always reports Running.
func (c *Cluster) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Failed is closed when supervision gives up: the server failed more than
// MaxFailures times within FailureWindow. The process should then exit
// (non-zero, with Err) and leave restarting to its service manager. It is
// nil, and never closed, for an attached cluster.
func (c *Cluster) Failed() <-chan struct{} { return c.failed }

// Err says why supervision gave up, once Failed is closed.
func (c *Cluster) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failErr
}

// Stop shuts the server down (fast shutdown: open transactions roll back,
// the data is consistent), ends supervision and waits for both. It is safe
// to call more than once.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.done == nil { // attached: not ours to stop
		c.mu.Unlock()
		return nil
	}
	c.stopping = true
	p := c.proc
	c.state = Stopped
	c.mu.Unlock()
	if p != nil {
		c.stopProcess(p)
	}
	if c.cancel != nil {
		c.cancel()
		<-c.done
	}
	c.release()
	return nil
}

// stopProcess asks one run of the server to shut down and waits for it.
func (c *Cluster) stopProcess(p *process) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		// Immediate shutdown: recovery runs at the next start.
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	c.opts.Logger.Info("stopped PostgreSQL", "dir", c.opts.Dir)
}

func (c *Cluster) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lock != nil {
		c.lock.Close()
		c.lock = nil
	}
}

// StartOrAttach is Start, except that when another process (a running
// kith serve) already runs the cluster, it returns that cluster instead of
// failing: tools such as kith load work beside the server. Stop on an
// attached cluster stops nothing, and nothing supervises it.
func StartOrAttach(ctx context.Context, opts Options) (*Cluster, error) {
	c, err := Start(ctx, opts)
	if !errors.Is(err, ErrLocked) {
		return c, err
	}
	dir, aerr := filepath.Abs(opts.Dir)
	if aerr != nil {
		return nil, err
	}
	opts = withDefaults(opts)
	opts.Dir = dir
	c = &Cluster{opts: opts}
	conn, cerr := pgx.Connect(ctx, c.URL())
	if cerr != nil {
		return nil, fmt.Errorf("%w; attaching to its cluster failed: %v", err, cerr)
	}
	conn.Close(context.Background())
	opts.Logger.Info("using the PostgreSQL cluster of the running server", "dir", dir)
	return c, nil
}

// findBinDir returns the directory holding initdb and postgres.
func findBinDir(explicit string) (string, error) {
	has := func(dir string) bool {
		for _, name := range []string{"initdb", "postgres"} {
			if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.IsDir() {
				return false
			}
		}
		return true
	}
	if explicit != "" {
		if has(explicit) {
			return explicit, nil
		}
		return "", fmt.Errorf("embedded: %s has no initdb and postgres: %w", explicit, ErrNoServer)
	}
	// Debian's versioned directories first, newest version first: their
	// binaries are the real ones (the ones on PATH may be wrappers).
	var candidates []string
	if entries, err := os.ReadDir("/usr/lib/postgresql"); err == nil {
		var versions []int
		for _, e := range entries {
			if v, err := strconv.Atoi(e.Name()); err == nil {
				versions = append(versions, v)
			}
		}
		sort.Sort(sort.Reverse(sort.IntSlice(versions)))
		for _, v := range versions {
			candidates = append(candidates, fmt.Sprintf("/usr/lib/postgresql/%d/bin", v))
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(real))
		}
	}
	candidates = append(candidates, "/usr/local/pgsql/bin", "/usr/pgsql/bin")
	for _, dir := range candidates {
		if has(dir) {
			return dir, nil
		}
	}
	return "", ErrNoServer
}

// runAs returns the credential to run the server with (nil when the caller
// is not root) and the uid/gid that must own the cluster directory dir.
// A cluster that exists runs as the user that owns it, whatever name says:
// handing it to name would lock its owner out (a service running as its
// own user, after an operator ran a kith command as root). A new cluster
// is made for name.
func runAs(dir, name string, log *slog.Logger) (*syscall.Credential, *[2]int, error) {
	if os.Geteuid() != 0 {
		return nil, nil, nil
	}
	owner, err := clusterOwner(dir)
	if err != nil {
		return nil, nil, err
	}
	if owner != nil {
		if owner[0] == 0 {
			return nil, nil, fmt.Errorf("embedded: the cluster in %s belongs to root, and PostgreSQL refuses to run as root: give it to the user that should run it (chown -R USER: %s)", dir, dir)
		}
		if u, err := user.Lookup(name); err != nil || u.Uid != strconv.Itoa(owner[0]) {
			log.Info("running the cluster as the user that owns it", "dir", dir, "owner", userName(owner[0]), "postgres_user", name)
		}
		return &syscall.Credential{Uid: uint32(owner[0]), Gid: uint32(owner[1])}, owner, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, nil, fmt.Errorf("embedded: PostgreSQL refuses to run as root and the user %q to run it as does not exist (install postgresql, which creates it, or use --database-url): %w", name, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil || uid == 0 {
		return nil, nil, fmt.Errorf("embedded: user %q is not an unprivileged user", name)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, &[2]int{uid, gid}, nil
}

// clusterOwner returns the uid and gid owning the cluster in dir (or
// where a symbolic link there points), or nil when dir holds no
// initialised cluster yet.
func clusterOwner(dir string) (*[2]int, error) {
	real, err := filepath.EvalSymlinks(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("embedded: data directory: %w", err)
	}
	if ok, err := initialised(real); err != nil || !ok {
		return nil, err
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("embedded: %s: no owner", real)
	}
	return &[2]int{int(sys.Uid), int(sys.Gid)}, nil
}

// userName is the name of uid, or the number when it has none.
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return strconv.Itoa(uid)
}

// prepareDir creates the cluster directory with the permissions PostgreSQL
// demands (0700, owned by the server's user) and checks that the server's
// user can reach it.
func prepareDir(dir string, owner *[2]int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("embedded: create data directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("embedded: data directory: %w", err)
	}
	if owner == nil {
		return nil
	}
	if err := os.Chown(dir, owner[0], owner[1]); err != nil {
		return fmt.Errorf("embedded: hand data directory to the server's user: %w", err)
	}
	// Every directory above must be searchable by the server's user.
	if p := unsearchable(filepath.Dir(dir), owner); p != "" {
		return fmt.Errorf("embedded: the PostgreSQL server's user cannot reach %s: %s is not searchable by others (chmod o+x %s, or choose another --data-dir)", dir, p, p)
	}
	return nil
}

// unsearchable returns the first of dir and the directories above it that
// owner (uid, gid) cannot search, or "" when it can reach dir.
func unsearchable(dir string, owner *[2]int) string {
	for p := dir; ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return p
		}
		sys, _ := st.Sys().(*syscall.Stat_t)
		searchable := st.Mode().Perm()&0o001 != 0 ||
			(sys != nil && int(sys.Uid) == owner[0] && st.Mode().Perm()&0o100 != 0) ||
			(sys != nil && int(sys.Gid) == owner[1] && st.Mode().Perm()&0o010 != 0)
		if !searchable {
			return p
		}
		if p == filepath.Dir(p) {
			return ""
		}
	}
}

// reachableDir returns where the cluster of dir lives when the server
// runs as owner: dir itself (or what a symbolic link there points to)
// when owner can reach it. Otherwise, for a cluster not made yet, a
// directory under root named after dir, with dir made a symbolic link to
// it, so that the quick start works as root in a checkout under a home
// only root can enter, without opening that home to anyone.
func reachableDir(dir, root string, owner *[2]int, log *slog.Logger) (string, error) {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("embedded: data directory: %w", err)
	}
	blocked := unsearchable(filepath.Dir(dir), owner)
	if blocked == "" {
		return dir, nil
	}
	if _, err := os.Lstat(dir); err == nil {
		// Only an empty directory (an earlier start that stopped here)
		// gives way to the link; a cluster is never moved.
		if err := os.Remove(dir); err != nil {
			return "", fmt.Errorf("embedded: the PostgreSQL server's user cannot reach %s: %s is not searchable by others (move the cluster to a directory it can reach and leave a symbolic link at %s, or chmod o+x %s)", dir, blocked, dir, blocked)
		}
	}
	sum := sha256.Sum256([]byte(dir))
	target := filepath.Join(root, hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(root, 0o711); err != nil {
		return "", fmt.Errorf("embedded: %s is not reachable by the server's user, and %w", dir, err)
	}
	if p := unsearchable(root, owner); p != "" {
		return "", fmt.Errorf("embedded: the PostgreSQL server's user can reach neither %s (%s is not searchable by others) nor %s (%s is not)", dir, blocked, root, p)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o711); err != nil {
		return "", fmt.Errorf("embedded: create data directory: %w", err)
	}
	if err := os.Symlink(target, dir); err != nil {
		return "", fmt.Errorf("embedded: link %s to %s: %w", dir, target, err)
	}
	log.Info("the PostgreSQL server's user cannot reach the data directory; its cluster lives elsewhere, linked from it",
		"dir", dir, "not_searchable", blocked, "cluster", target)
	return target, nil
}

// lockDir takes an exclusive lock on a file beside the cluster directory, so
// a second Kith on the same data directory fails at once. When root takes
// it for a cluster owned by owner, the file stays owner's, so that a Kith
// running as owner can take it later.
func lockDir(dir string, owner *[2]int) (*os.File, error) {
	path := dir + ".lock"
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("embedded: lock file: %w", err)
	}
	if owner != nil {
		if err := f.Chown(owner[0], owner[1]); err != nil {
			f.Close()
			return nil, fmt.Errorf("embedded: lock file: %w", err)
		}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder, _ := os.ReadFile(path)
			return nil, fmt.Errorf("embedded: %s: %w (pid %s); stop it first", filepath.Dir(dir), ErrLocked, strings.TrimSpace(string(holder)))
		}
		return nil, fmt.Errorf("embedded: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		fmt.Fprintf(f, "%d\n", os.Getpid())
	}
	return f, nil
}

func readTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > 4096 {
		f.Seek(st.Size()-4096, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
