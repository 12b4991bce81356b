package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp/gpgtest"
)

// idUser is a person at a shell: a home with ~/.ssh, a gpg home, and the
// kith binary on the way to a server.
type idUser struct {
	t    *testing.T
	bin  string
	home string
	gpg  *gpgtest.Home
	env  []string
}

func newIDUser(t *testing.T, server string) *idUser {
	t.Helper()
	testkit.Tool(t, "ssh-keygen")
	u := &idUser{t: t, bin: kithBinary(t), home: t.TempDir(), gpg: gpgtest.New(t)}
	if err := os.MkdirAll(filepath.Join(u.home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "SSH_AUTH_SOCK" && k != "HOME" && k != "GNUPGHOME" && !strings.HasPrefix(k, "KITH_") {
			u.env = append(u.env, kv)
		}
	}
	u.env = append(u.env, "HOME="+u.home, "GNUPGHOME="+u.gpg.Dir, "KITH_SERVER="+server)
	return u
}

// kith runs the kith binary and returns its stdout, stderr and exit code.
func (u *idUser) kith(args ...string) (string, string, int) {
	u.t.Helper()
	c := exec.Command(u.bin, args...)
	c.Env = u.env
	var out, errb strings.Builder
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	}
	u.t.Fatalf("kith %v: %v", args, err)
	return "", "", -1
}

// refused runs kith, wants it to fail with exit code 1, and returns stderr.
func (u *idUser) refused(args ...string) string {
	u.t.Helper()
	out, errOut, code := u.kith(args...)
	if code != 1 {
		u.t.Fatalf("kith %s: exit %d, want 1\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return errOut
}

// TestIDClientUsage: help goes to stdout with exit 0; a bad flag is one
// line and a hint.
func TestIDClientUsage(t *testing.T) {
	u := newIDUser(t, "http://127.0.0.1:1")
	out, errOut, code := u.kith("id", "--help")
	if code != 0 || !strings.Contains(out, "kith id COMMAND") || errOut != "" {
		t.Errorf("id --help: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, _, code = u.kith("id", "add", "--help")
	if code != 0 || !strings.Contains(out, "-by-pgp") || strings.Contains(out, "-database-url") {
		t.Errorf("id add --help: exit %d, stdout %q", code, out)
	}
	out, errOut, code = u.kith("id", "claim", "nora", "--bogus")
	if code != 2 || out != "" || strings.Count(errOut, "\n") != 2 || !strings.Contains(errOut, "kith id claim --help") {
		t.Errorf("id claim --bogus: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	errOut = u.refused("id", "show", "nora")
	if !strings.Contains(errOut, "look up nora") {
		t.Errorf("unreachable server: %q", errOut)
	}
}

func keyOnlyLine(line string) string {
	f := strings.Fields(line)
	return f[0] + " " + f[1]
}
