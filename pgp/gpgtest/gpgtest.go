// Package gpgtest runs the real gpg for tests: a throwaway home, removed
// with its agent when the test ends, and the few calls tests need (run a
// command, make a key, point dirmngr at a keyserver). A test that uses it
// is skipped where gpg is missing, and fails instead when CI=true.
//
// The home's gpg-agent (and dirmngr, once a keyserver is set) are children
// of the test binary, started in their supervised mode on the sockets gpg
// looks for, so that they die with it: the daemons gpg starts by itself
// detach, and outlive a test binary that is killed.
package gpgtest

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/subprocess"
	"github.com/kith-keyserver/kith/identity/testkit"
)

// Home is a throwaway GnuPG home.
type Home struct {
	t testing.TB
	// Dir is the home directory (GNUPGHOME).
	Dir string

	dirmngr *exec.Cmd // started by UseKeyserver
}

// New makes a home for the test t.
func New(t testing.TB) *Home {
	t.Helper()
	testkit.Tool(t, "gpg")
	testkit.Tool(t, "gpgconf")
	// A short path: gpg-agent's socket must fit in sun_path.
	dir, err := os.MkdirTemp("/tmp", "kg")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	h := &Home{t: t, Dir: dir}
	t.Cleanup(func() {
		c := exec.Command("gpgconf", "--kill", "all")
		c.Env = h.Env()
		c.Run()
		os.RemoveAll(dir)
	})
	h.supervise("gpg-agent", "agent-socket", "LISTEN_FDNAMES=std")
	return h
}

// supervise starts daemon (gpg-agent or dirmngr) in supervised mode,
// listening on the socket gpgconf names for socket, as a child of the
// test binary that is killed when the test ends or the binary dies.
func (h *Home) supervise(daemon, socket string, env ...string) *exec.Cmd {
	h.t.Helper()
	out, err := exec.Command("gpgconf", "--homedir", h.Dir, "--list-dirs", socket).Output()
	if err != nil {
		h.t.Fatalf("gpgconf --list-dirs %s: %v", socket, err)
	}
	path := strings.TrimSpace(string(out))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		h.t.Fatal(err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		h.t.Fatalf("%s socket: %v", daemon, err)
	}
	ln.SetUnlinkOnClose(false) // the socket is the daemon's now
	f, err := ln.File()
	ln.Close()
	if err != nil {
		h.t.Fatal(err)
	}
	defer f.Close()
	// The systemd protocol: the socket is fd 3, and LISTEN_PID must be
	// the daemon's own pid, which the shell's is once it execs.
	cmd := exec.Command("sh", "-c", `LISTEN_PID=$$ exec "$0" --homedir "$1" --supervised`, daemon, h.Dir)
	cmd.Env = append(append(h.Env(), "LISTEN_FDS=1"), env...)
	cmd.ExtraFiles = []*os.File{f}
	if err := subprocess.Start(cmd, syscall.SIGKILL); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// Env is the environment gpg runs with in this home: the test's, without
// its GNUPGHOME and HTTP proxy (keyservers in tests are on loopback).
func (h *Home) Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GNUPGHOME=") && !strings.HasPrefix(strings.ToLower(kv), "http_proxy=") {
			env = append(env, kv)
		}
	}
	return append(env, "GNUPGHOME="+h.Dir)
}

// Run runs gpg in batch mode (no passphrase) with stdin and args and
// returns its output, failing the test when gpg fails.
func (h *Home) Run(stdin string, args ...string) []byte {
	h.t.Helper()
	out, errOut, err := h.try(stdin, append([]string{"--pinentry-mode", "loopback", "--passphrase", ""}, args...))
	if err != nil {
		h.t.Fatalf("gpg %v: %v\n%s", args, err, errOut)
	}
	return out
}

// Try runs gpg in batch mode with args and returns its standard error and
// error instead of failing the test.
func (h *Home) Try(args ...string) (string, error) {
	_, errOut, err := h.try("", args)
	return errOut, err
}

func (h *Home) try(stdin string, args []string) ([]byte, string, error) {
	// A guard against a gpg that hangs (waiting on a dead dirmngr, say),
	// not a timing: the test fails with gpg's output instead of timing out.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "gpg", append([]string{"--batch", "--yes", "--no-tty"}, args...)...)
	c.Env = h.Env()
	c.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	return out.Bytes(), errb.String(), err
}

// NewKey makes an Ed25519 primary key for uid with the given usage ("sign",
// "sign,cert") and no expiry, and returns its fingerprint.
func (h *Home) NewKey(uid, usage string) string {
	h.t.Helper()
	h.Run("", "--quick-gen-key", uid, "ed25519", usage, "0")
	for _, l := range strings.Split(string(h.Run("", "--with-colons", "--list-keys", uid)), "\n") {
		if strings.HasPrefix(l, "fpr:") {
			return strings.Split(l, ":")[9]
		}
	}
	h.t.Fatalf("no fingerprint for %s", uid)
	return ""
}

// UseKeyserver points this home's dirmngr at the HKP server at addr.
func (h *Home) UseKeyserver(addr string) {
	h.t.Helper()
	h.UseKeyserverURL("hkp://" + addr)
}

// UseKeyserverURL points this home's dirmngr at the keyserver at url
// (hkp:// or hkps://), with extra lines for dirmngr.conf (such as
// "hkp-cacert FILE", the CA an hkps server's certificate is checked
// against).
func (h *Home) UseKeyserverURL(url string, extra ...string) {
	h.t.Helper()
	conf := "keyserver " + url + "\nstandard-resolver\n"
	for _, l := range extra {
		conf += l + "\n"
	}
	if err := os.WriteFile(filepath.Join(h.Dir, "dirmngr.conf"), []byte(conf), 0o600); err != nil {
		h.t.Fatal(err)
	}
	if h.dirmngr != nil {
		h.dirmngr.Process.Signal(syscall.SIGHUP) // reread dirmngr.conf
		return
	}
	h.dirmngr = h.supervise("dirmngr", "dirmngr-socket")
}
