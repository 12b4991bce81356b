package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	osuser "os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	xssh "golang.org/x/crypto/ssh"
)

// fakeKeyServer answers /users/{handle}.keys as the test tells it to.
type fakeKeyServer struct {
	srv *httptest.Server

	mu     sync.Mutex
	status int    // 0: hang until the client gives up
	body   string // what a 200 (or any status) carries
}

func newFakeKeyServer(t *testing.T) *fakeKeyServer {
	t.Helper()
	f := &fakeKeyServer{status: http.StatusOK}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		status, body := f.status, f.body
		f.mu.Unlock()
		if status == 0 {
			<-r.Context().Done() // the client's timeout, not ours
			return
		}
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeKeyServer) answer(status int, body string) {
	f.mu.Lock()
	f.status, f.body = status, body
	f.mu.Unlock()
}

// newAuthorizedKeyLine returns a fresh ed25519 key as an authorized_keys line.
func newAuthorizedKeyLine(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := xssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(xssh.MarshalAuthorizedKey(k))
}

// deadURL is an http URL on loopback that refuses connections.
func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + l.Addr().String()
	l.Close()
	return u
}

// runAK runs kith authorized-keys in-process with only the given
// environment and returns stdout, stderr and the error.
func runAK(t *testing.T, environ []string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &environment{stdout: &out, stderr: &errb, environ: environ}
	err := run(context.Background(), env, append([]string{"authorized-keys"}, args...))
	return out.String(), errb.String(), err
}

// TestAuthorizedKeysFallsBackOnlyWhenServerUnavailable: only a server
// that cannot be reached, times out or fails (5xx) lets a cached answer
// be served. A 404 (no such identity), a 200 with no keys and other 4xx
// answers are the server's word and must not bring back keys from the
// cache: a revoked key must stay revoked.
func TestAuthorizedKeysFallsBackOnlyWhenServerUnavailable(t *testing.T) {
	key := newAuthorizedKeyLine(t)
	for _, tt := range []struct {
		name     string
		status   int // 0: hang past the timeout; -1: connection refused
		body     string
		fallback bool
		reason   string // in the warning when it falls back
	}{
		{name: "404 no such identity", status: http.StatusNotFound, body: "no such identity\n"},
		{name: "200 no keys", status: http.StatusOK, body: ""},
		{name: "403", status: http.StatusForbidden},
		{name: "410", status: http.StatusGone},
		{name: "400", status: http.StatusBadRequest},
		{name: "429", status: http.StatusTooManyRequests},
		{name: "500", status: http.StatusInternalServerError, fallback: true, reason: "server answered 500"},
		{name: "502", status: http.StatusBadGateway, fallback: true, reason: "server answered 502"},
		{name: "503", status: http.StatusServiceUnavailable, fallback: true, reason: "server answered 503"},
		{name: "timeout", status: 0, fallback: true, reason: "Client.Timeout|deadline exceeded"},
		{name: "connection refused", status: -1, fallback: true, reason: "connection refused"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeKeyServer(t)
			cache := filepath.Join(t.TempDir(), "cache")
			args := func(server string) []string {
				return []string{"--server", server, "--cache-dir", cache, "--timeout", "300ms", "alice"}
			}
			f.answer(http.StatusOK, key)
			out, stderr, err := runAK(t, nil, args(f.srv.URL)...)
			if err != nil || out != key {
				t.Fatalf("live answer: out %q, err %v\n%s", out, err, stderr)
			}

			server := f.srv.URL
			if tt.status < 0 {
				server = deadURL(t)
			} else {
				f.answer(tt.status, tt.body)
			}
			out, stderr, err = runAK(t, nil, args(server)...)
			if !tt.fallback {
				if out != "" {
					t.Fatalf("printed %q from the cache after an authoritative %s\n%s", out, tt.name, stderr)
				}
				if strings.Contains(stderr, "cached") && strings.Contains(stderr, "serving") {
					t.Fatalf("warned of serving the cache:\n%s", stderr)
				}
				if tt.status == http.StatusOK || tt.status == http.StatusNotFound {
					// The server's word replaces the last one: with the
					// server gone the old keys do not come back either.
					out, stderr, _ = runAK(t, nil, args(deadURL(t))...)
					if out != "" {
						t.Fatalf("with the server down, the cache brought back %q after %s\n%s", out, tt.name, stderr)
					}
				}
				return
			}
			if err != nil || out != key {
				t.Fatalf("after %s: out %q, err %v, want the cached key\n%s", tt.name, out, err, stderr)
			}
			if !strings.Contains(stderr, "level=WARN") || !strings.Contains(stderr, "serving the cached answer") {
				t.Fatalf("no warning that the cache was served:\n%s", stderr)
			}
			for _, want := range []string{"age=", "max_age=24h0m0s"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("warning lacks %q:\n%s", want, stderr)
				}
			}
			if !containsAny(stderr, strings.Split(tt.reason, "|")) {
				t.Errorf("warning does not say why (%s):\n%s", tt.reason, stderr)
			}
		})
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestAuthorizedKeysMaxAge: an answer older than --max-age is not served,
// and --max-age off (or 0) neither writes nor reads a cache.
func TestAuthorizedKeysMaxAge(t *testing.T) {
	key := newAuthorizedKeyLine(t)
	f := newFakeKeyServer(t)
	f.answer(http.StatusOK, key)
	cache := filepath.Join(t.TempDir(), "cache")
	if out, stderr, err := runAK(t, nil, "--server", f.srv.URL, "--cache-dir", cache, "--max-age", "1h", "alice"); err != nil || out != key {
		t.Fatalf("live answer: out %q, err %v\n%s", out, err, stderr)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(filepath.Join(cache, "alice.keys"), old, old); err != nil {
		t.Fatal(err)
	}
	dead := deadURL(t)
	out, stderr, err := runAK(t, nil, "--server", dead, "--cache-dir", cache, "--max-age", "1h", "alice")
	if out != "" || !errors.Is(err, errNoKeys) || !strings.Contains(stderr, "too old") {
		t.Fatalf("a 2h-old answer with --max-age 1h: out %q, err %v\n%s", out, err, stderr)
	}
	// Younger than max-age, it is served.
	if out, stderr, _ := runAK(t, nil, "--server", dead, "--cache-dir", cache, "--max-age", "3h", "alice"); out != key {
		t.Fatalf("a 2h-old answer with --max-age 3h: out %q\n%s", out, stderr)
	}

	for _, off := range []string{"off", "0"} {
		t.Run(off, func(t *testing.T) {
			cache := filepath.Join(t.TempDir(), "cache")
			if out, stderr, err := runAK(t, nil, "--server", f.srv.URL, "--cache-dir", cache, "--max-age", off, "alice"); err != nil || out != key {
				t.Fatalf("live answer: out %q, err %v\n%s", out, err, stderr)
			}
			if _, err := os.Stat(cache); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("--max-age %s made a cache: %v", off, err)
			}
			// A cache left from before is not read either.
			if err := writeCache(cache, filepath.Join(cache, "alice.keys"), []byte(key)); err != nil {
				t.Fatal(err)
			}
			out, stderr, err := runAK(t, []string{authorizedKeysEnvPrefix + "MAX_AGE=" + off}, "--server", dead, "--cache-dir", cache, "alice")
			if out != "" || !errors.Is(err, errNoKeys) || !strings.Contains(stderr, "cache is off") {
				t.Fatalf("with the cache off and the server down: out %q, err %v\n%s", out, err, stderr)
			}
		})
	}
	if _, stderr, err := runAK(t, nil, "--server", dead, "--max-age", "-1h", "alice"); err == nil || !strings.Contains(stderr+err.Error(), "max-age") {
		t.Fatalf("a negative max-age was taken: %v\n%s", err, stderr)
	}
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

// TestAuthorizedKeysRefusesUnsafeCache: a cache another local user could
// write to could be used to plant keys, so a cache directory or file
// that is group- or world-writable, or owned by another user, is not
// read (and the command says so).
func TestAuthorizedKeysRefusesUnsafeCache(t *testing.T) {
	key := newAuthorizedKeyLine(t)
	f := newFakeKeyServer(t)
	f.answer(http.StatusOK, key)
	dead := deadURL(t)
	for _, tt := range []struct {
		name  string
		spoil func(t *testing.T, dir, file string)
		root  bool
	}{
		{name: "world-writable dir", spoil: func(t *testing.T, dir, _ string) { chmod(t, dir, 0o777) }},
		{name: "group-writable dir", spoil: func(t *testing.T, dir, _ string) { chmod(t, dir, 0o770) }},
		{name: "world-writable file", spoil: func(t *testing.T, _, file string) { chmod(t, file, 0o666) }},
		{name: "group-writable file", spoil: func(t *testing.T, _, file string) { chmod(t, file, 0o620) }},
		{name: "file of another user", root: true, spoil: func(t *testing.T, _, file string) { chown(t, file, 65534) }},
		{name: "dir of another user", root: true, spoil: func(t *testing.T, dir, _ string) { chown(t, dir, 65534) }},
		{name: "symlink", spoil: func(t *testing.T, dir, file string) {
			other := filepath.Join(t.TempDir(), "planted")
			os.WriteFile(other, []byte(key), 0o600)
			os.Remove(file)
			if err := os.Symlink(other, file); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root {
				requireRoot(t, "to give a cache to another user")
			}
			cache := filepath.Join(t.TempDir(), "cache")
			if out, stderr, err := runAK(t, nil, "--server", f.srv.URL, "--cache-dir", cache, "alice"); err != nil || out != key {
				t.Fatalf("live answer: out %q, err %v\n%s", out, err, stderr)
			}
			file := filepath.Join(cache, "alice.keys")
			if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("cache file: %v, %v; want mode 0600", fi.Mode(), err)
			}
			tt.spoil(t, cache, file)
			out, stderr, err := runAK(t, nil, "--server", dead, "--cache-dir", cache, "alice")
			if out != "" || !errors.Is(err, errNoKeys) {
				t.Fatalf("served an unsafe cache: out %q, err %v\n%s", out, err, stderr)
			}
			if !strings.Contains(stderr, "not using the cache") {
				t.Fatalf("did not say why the cache was refused:\n%s", stderr)
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

func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Lchown(path, uid, -1); err != nil {
		t.Fatal(err)
	}
}

// requireRoot skips a test that needs root, or fails it with CI=true.
func requireRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("needs root %s (CI=true)", why)
	}
	t.Skipf("needs root %s", why)
}

// TestAuthorizedKeysCacheAsCommandUser runs the built binary as nobody,
// as sshd's AuthorizedKeysCommandUser does: in a cache directory root
// made, it cannot cache and says how to fix that; after the README's
// install -d step it caches, and with the server gone it serves the
// cached answer, warning that it does.
func TestAuthorizedKeysCacheAsCommandUser(t *testing.T) {
	requireRoot(t, "to run the command as another user")
	requireTool(t, "install")
	nobody, err := osuser.Lookup("nobody")
	if err != nil {
		t.Fatalf("no user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	bin := kithBinary(t)
	key := newAuthorizedKeyLine(t)
	f := newFakeKeyServer(t)
	f.answer(http.StatusOK, key)

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
	out, stderr, err := asNobody(f.srv.URL)
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
	out, stderr, err = asNobody(f.srv.URL)
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
	dead := deadURL(t)
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
	if err := os.WriteFile(planted+".new", []byte(newAuthorizedKeyLine(t)), 0o644); err != nil {
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
