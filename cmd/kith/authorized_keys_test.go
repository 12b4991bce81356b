package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	osuser "os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/kith-keyserver/kith/identity/testkit"
)

// runAK runs kith authorized-keys in-process with only the given
// environment and returns stdout, stderr and the error.
func runAK(t *testing.T, environ []string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &environment{stdout: &out, stderr: &errb, environ: environ}
	err := run(context.Background(), env, append([]string{"authorized-keys"}, args...))
	return out.String(), errb.String(), err
}

// TestAuthorizedKeysWarnsOfPlainHTTP: keys fetched without TLS from
// another host can be swapped by anyone on the path, so plain http to a
// host that is not loopback is warned of on every run.
func TestAuthorizedKeysWarnsOfPlainHTTP(t *testing.T) {
	for _, tt := range []struct {
		server string
		warn   bool
	}{
		{"http://keys.example.org", true},
		{"http://192.0.2.1:11371", true},
		{"http://[2001:db8::1]", true},
		{"http://127.0.0.1:1", false},
		{"http://127.1.2.3:1", false},
		{"http://[::1]:1", false},
		{"http://localhost:1", false},
		{"https://keys.example.org", false},
	} {
		t.Run(tt.server, func(t *testing.T) {
			// An unroutable or refused server, a tiny timeout and no
			// cache: only the warnings matter here.
			_, stderr, _ := runAK(t, nil, "--server", tt.server, "--timeout", "1ms", "--max-age", "off", "alice")
			warned := strings.Contains(stderr, "without TLS")
			if warned != tt.warn {
				t.Fatalf("warned %v, want %v:\n%s", warned, tt.warn, stderr)
			}
			if warned && !strings.Contains(stderr, "level=WARN") {
				t.Fatalf("not a warning:\n%s", stderr)
			}
		})
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestAuthorizedKeysCacheAsCommandUser runs the built binary as nobody,
// as sshd's AuthorizedKeysCommandUser does: in a cache directory root
// made, it cannot cache and says how to fix that; after the README's
// install -d step it caches, and with the server gone it serves the
// cached answer, warning that it does.
func TestAuthorizedKeysCacheAsCommandUser(t *testing.T) {
	testkit.Root(t, "to run the command as another user")
	testkit.Tool(t, "install")
	nobody, err := osuser.Lookup("nobody")
	if err != nil {
		t.Fatalf("no user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	bin := kithBinary(t)
	key := testkit.AuthorizedKeyLine(t)
	f := testkit.NewStubServer(t)
	f.Answer(http.StatusOK, key)

	parent := tempDir(t)
	chmod(t, parent, 0o755)
	cache := filepath.Join(parent, "cache")
	asNobody := func(server string) (string, string, error) {
		t.Helper()
		cmd := exec.Command(bin, "authorized-keys", "--server", server, "--cache-dir", cache, "--timeout", "2s", "alice")
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}

	// A cache directory as root would make it: nobody cannot write it.
	if err := os.Mkdir(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := asNobody(f.URL)
	if err != nil || out != key {
		t.Fatalf("live answer: out %q, err %v\n%s", out, err, stderr)
	}
	hint := "install -d -o nobody -m 0700 " + cache
	if !strings.Contains(stderr, "could not cache the answer") || !strings.Contains(stderr, hint) {
		t.Fatalf("no hint %q on a cache nobody cannot write:\n%s", hint, stderr)
	}

	// The README's step.
	if out, err := exec.Command("install", "-d", "-o", "nobody", "-m", "0700", cache).CombinedOutput(); err != nil {
		t.Fatalf("install -d: %v\n%s", err, out)
	}
	out, stderr, err = asNobody(f.URL)
	if err != nil || out != key || strings.Contains(stderr, "level=WARN") {
		t.Fatalf("live answer: out %q, err %v\n%s", out, err, stderr)
	}
	fi, err := os.Stat(filepath.Join(cache, "alice.keys"))
	if err != nil {
		t.Fatalf("nothing cached: %v", err)
	}
	if owner := fi.Sys().(*syscall.Stat_t).Uid; int(owner) != uid || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cached answer owned by uid %d with mode %04o, want uid %d and 0600", owner, fi.Mode().Perm(), uid)
	}
	dead := testkit.DeadURL(t)
	out, stderr, err = asNobody(dead)
	if err != nil || out != key {
		t.Fatalf("with the server down: out %q, err %v\n%s", out, err, stderr)
	}
	if !strings.Contains(stderr, "serving the cached answer instead of a live one") || !strings.Contains(stderr, "connection refused") {
		t.Fatalf("no warning that the cache was served, and why:\n%s", stderr)
	}

	// A cache directory nobody owns but root's stale answer sits in is
	// not nobody's to trust.
	planted := filepath.Join(cache, "alice.keys")
	if err := os.WriteFile(planted+".new", []byte(testkit.AuthorizedKeyLine(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(planted+".new", planted); err != nil {
		t.Fatal(err)
	}
	out, stderr, _ = asNobody(dead)
	if out != "" || !strings.Contains(stderr, "not using the cache") || !strings.Contains(stderr, "owned by uid 0") {
		t.Fatalf("served a cached answer root wrote: out %q\n%s", out, stderr)
	}
}
