// Package skstest runs a throwaway SKS keyserver (Debian's sks 1.1.6) on
// loopback for tests: the reference peer for the SKS digest, HKP and recon.
//
// Start builds an SKS database from the given keys (build, cleandb, pbuild,
// as upstream's build script does), starts `sks db` and `sks recon` with
// their own -basedir, waits until HKP answers and stops both at t.Cleanup.
// When sks is not installed the test is skipped, or fails when CI=true.
package skstest

import (
	"bytes"
	"context"

	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"

	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/subprocess"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// Options configures a throwaway SKS.
type Options struct {
	// Keys are binary OpenPGP keys (each element one or more concatenated
	// keys) to build the database from. SKS cannot finish an empty
	// database, so when Keys and KeyFiles are both empty one generated
	// throwaway key is loaded (see Server.Throwaway).
	Keys [][]byte
	// KeyFiles are files of binary keys to load as well.
	KeyFiles []string
	// Membership lines ("host port") for etc/sks/membership.
	Membership []string
	// GossipInterval in minutes (SKS's unit; 0.1 is about 6 s). Default 60.
	GossipInterval float64
	// DebugLevel is SKS's debuglevel (4 logs each recon round). Default 3.
	DebugLevel int
	// Hostname is SKS's hostname setting. Default 127.0.0.254: SKS never
	// gossips with a membership entry whose IP equals its own hostname's,
	// and on one machine every peer is 127.0.0.1.
	Hostname string
	// ExtraConfig is appended to sksconf verbatim.
	ExtraConfig string
	// Binary is the sks executable. Default: "sks" on PATH, else /usr/sbin/sks.
	Binary string
	// StartTimeout bounds the wait for HKP. Default 60 s.
	StartTimeout time.Duration
}

// Server is a running SKS.
type Server struct {
	// Dir is the -basedir (etc/sks, var/lib/sks, var/log/sks, var/run/sks).
	Dir string
	// HKPURL is e.g. "http://127.0.0.1:34567" (no trailing slash).
	HKPURL string
	// HKPPort and ReconPort are the loopback ports.
	HKPPort, ReconPort int
	// ReconAddr is "127.0.0.1:PORT".
	ReconAddr string
	// Throwaway is the generated key loaded into an otherwise empty
	// database (nil when keys were given).
	Throwaway []byte
	// BuildTime is how long building the database took (sks build,
	// cleandb and pbuild, as upstream's build script runs them).
	BuildTime time.Duration

	t     testing.TB
	procs []*exec.Cmd
	done  []chan struct{}
}

// FindBinary returns the sks executable, skipping t when there is none
// (failing when CI=true).
func FindBinary(t testing.TB) string {
	t.Helper()
	return testkit.AnyTool(t, "sks", "/usr/sbin/sks")
}

// Start builds and starts an SKS; it is stopped at t.Cleanup.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Binary == "" {
		opts.Binary = FindBinary(t)
	}
	if opts.GossipInterval == 0 {
		opts.GossipInterval = 60
	}
	if opts.DebugLevel == 0 {
		opts.DebugLevel = 3
	}
	if opts.Hostname == "" {
		opts.Hostname = "127.0.0.254"
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	s := &Server{t: t, Dir: t.TempDir()}
	s.HKPPort, s.ReconPort = testkit.FreePort(t), testkit.FreePort(t)
	for s.ReconPort == s.HKPPort {
		s.ReconPort = testkit.FreePort(t)
	}
	s.ReconAddr = fmt.Sprintf("127.0.0.1:%d", s.ReconPort)
	s.HKPURL = fmt.Sprintf("http://127.0.0.1:%d", s.HKPPort)

	// var/spool/sks holds what recon found missing; without it SKS finds
	// differences and drops them.
	for _, d := range []string{"etc/sks", "var/lib/sks/dump", "var/log/sks", "var/run/sks", "var/spool/sks"} {
		if err := os.MkdirAll(filepath.Join(s.Dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	conf := fmt.Sprintf("hostname: %s\nhkp_address: 127.0.0.1\nhkp_port: %d\nrecon_address: 127.0.0.1\nrecon_port: %d\n"+
		"gossip_interval: %g\ndebuglevel: %d\ninitial_stat:\ndisable_mailsync:\nmembership_reload_interval: 1\n%s\n",
		opts.Hostname, s.HKPPort, s.ReconPort, opts.GossipInterval, opts.DebugLevel, opts.ExtraConfig)
	s.write("etc/sks/sksconf", conf)
	s.write("etc/sks/membership", strings.Join(opts.Membership, "\n")+"\n")
	s.write("etc/sks/mailsync", "")

	files := append([]string(nil), opts.KeyFiles...)
	keys := opts.Keys
	if len(keys) == 0 && len(files) == 0 {
		e, err := keygen.NewEd25519("SKS throwaway", "throwaway@example.invalid", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), 1)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := keygen.Serialize(&b, e); err != nil {
			t.Fatal(err)
		}
		s.Throwaway = b.Bytes()
		keys = [][]byte{s.Throwaway}
	}
	if len(keys) > 0 {
		f := filepath.Join(s.Dir, "var/lib/sks/dump/keys-0000.pgp")
		var all bytes.Buffer
		for _, k := range keys {
			all.Write(k)
		}
		if err := os.WriteFile(f, all.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}

	built := time.Now()
	s.run(append(append([]string{"build"}, files...), "-n", "10", "-cache", "100")...)
	// cleandb finishes its work and then dies with SIGSEGV; a second run
	// says "Database already merged" and exits 0.
	_ = s.runErr("cleandb")
	s.run("cleandb")
	s.run("pbuild", "-cache", "20", "-ptree_cache", "70")
	s.BuildTime = time.Since(built)

	// sks recon talks to sks db over a socket db creates once it is up:
	// start recon only then, or its first fetch fails with ENOENT.
	s.start("db")
	t.Cleanup(s.Stop)
	s.waitHKP(opts.StartTimeout)
	s.start("recon")
	s.waitRecon(opts.StartTimeout)
	return s
}

func (s *Server) write(rel, content string) {
	if err := os.WriteFile(filepath.Join(s.Dir, rel), []byte(content), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// runErr runs an sks subcommand to completion.
func (s *Server) runErr(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.binary(), append(args, "-basedir", s.Dir)...)
	cmd.Dir = s.Dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := subprocess.Start(cmd, syscall.SIGKILL)
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		return fmt.Errorf("sks %s: %w\n%s", args[0], err, lastLines(out.Bytes(), 20))
	}
	return nil
}

func (s *Server) run(args ...string) {
	s.t.Helper()
	if err := s.runErr(args...); err != nil {
		s.t.Fatal(err)
	}
}

func (s *Server) binary() string {
	if p, err := exec.LookPath("sks"); err == nil {
		return p
	}
	return "/usr/sbin/sks"
}

// start launches a long-running sks subcommand.
func (s *Server) start(sub string) {
	s.t.Helper()
	cmd := exec.Command(s.binary(), sub, "-basedir", s.Dir)
	cmd.Dir = s.Dir
	logf, err := os.Create(filepath.Join(s.Dir, "var/log/sks", sub+".stdout"))
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, and killed if the test binary dies.
	if err := subprocess.Start(cmd, syscall.SIGKILL); err != nil {
		s.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	s.procs = append(s.procs, cmd)
	s.done = append(s.done, done)
}

// waitHKP polls op=stats until it answers.
func (s *Server) waitHKP(timeout time.Duration) {
	s.t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	answered := testkit.Poll(timeout, func() bool {
		for i, d := range s.done {
			select {
			case <-d:
				s.t.Fatalf("sks %s exited early:\n%s", s.procs[i].Args[1], s.Log(s.procs[i].Args[1]))
			default:
			}
		}
		resp, err := client.Get(s.HKPURL + "/pks/lookup?op=stats")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if !answered {
		s.t.Fatalf("sks HKP did not answer within %v:\n%s", timeout, s.Log("db"))
	}
}

// waitRecon waits until the recon port accepts connections.
func (s *Server) waitRecon(timeout time.Duration) {
	s.t.Helper()
	listening := testkit.Poll(timeout, func() bool {
		c, err := net.DialTimeout("tcp", s.ReconAddr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if !listening {
		s.t.Fatalf("sks recon did not listen on %s within %v:\n%s", s.ReconAddr, timeout, s.Log("recon"))
	}
}

// Log returns the tail of a process's log ("db" or "recon"): its stdout and
// SKS's own log file.
func (s *Server) Log(sub string) string {
	var b []byte
	for _, f := range []string{sub + ".stdout", sub + ".log"} {
		if x, err := os.ReadFile(filepath.Join(s.Dir, "var/log/sks", f)); err == nil {
			b = append(b, x...)
		}
	}
	if x, err := os.ReadFile(filepath.Join(s.Dir, sub+".log")); err == nil {
		b = append(b, x...)
	}
	return lastLines(b, 40)
}

// Stop terminates both processes (SIGTERM, then SIGKILL after 5 s). It is
// safe to call more than once.
func (s *Server) Stop() {
	for i, cmd := range s.procs {
		if cmd.Process == nil {
			continue
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.done[i]:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-s.done[i]
		}
	}
	s.procs, s.done = nil, nil
}

// Get fetches an HKP path (e.g. "/pks/lookup?op=stats") and returns the
// status and body.
func (s *Server) Get(path string) (int, []byte, error) {
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(s.HKPURL + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes(), err
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
