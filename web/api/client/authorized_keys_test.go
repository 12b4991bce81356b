package client_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/web/api/client"
)

// keysAt asks server for alice's keys with opts (timeout 300ms) and
// returns them, what was logged and the error.
func keysAt(t *testing.T, server string, opts client.KeysOptions) (string, string, error) {
	t.Helper()
	c, err := client.New(server, client.Options{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	opts.Logger = slog.New(slog.NewTextHandler(&log, nil))
	out, err := c.AuthorizedKeys(context.Background(), "alice", opts)
	return string(out), log.String(), err
}

// TestAuthorizedKeysFallsBackOnlyWhenServerUnavailable: only a server
// that cannot be reached, times out or fails (5xx) lets a cached answer
// be served. A 404 (no such identity), a 200 with no keys and other 4xx
// answers are the server's word and must not bring back keys from the
// cache: a revoked key must stay revoked.
func TestAuthorizedKeysFallsBackOnlyWhenServerUnavailable(t *testing.T) {
	t.Parallel()
	key := testkit.AuthorizedKeyLine(t)
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
		{name: "200 garbled", status: http.StatusOK, body: "this is no key\n", fallback: true, reason: "not authorized_keys text"},
		{name: "timeout", status: 0, fallback: true, reason: "deadline exceeded"},
		{name: "connection refused", status: -1, fallback: true, reason: "connection refused"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := testkit.NewStubServer(t)
			opts := client.KeysOptions{CacheDir: filepath.Join(t.TempDir(), "cache"), MaxAge: 24 * time.Hour}
			f.Answer(http.StatusOK, key)
			out, log, err := keysAt(t, f.URL, opts)
			if err != nil || out != key {
				t.Fatalf("live answer: out %q, err %v\n%s", out, err, log)
			}

			server := f.URL
			if tt.status < 0 {
				server = testkit.DeadURL(t)
			} else {
				f.Answer(tt.status, tt.body)
			}
			out, log, err = keysAt(t, server, opts)
			if !tt.fallback {
				if out != "" {
					t.Fatalf("returned %q from the cache after an authoritative %s\n%s", out, tt.name, log)
				}
				if strings.Contains(log, "cached") && strings.Contains(log, "serving") {
					t.Fatalf("warned of serving the cache:\n%s", log)
				}
				if tt.status == http.StatusOK || tt.status == http.StatusNotFound {
					if err != nil {
						t.Fatalf("the server's word is no failure: %v", err)
					}
					// The server's word replaces the last one: with the
					// server gone the old keys do not come back either.
					out, log, _ = keysAt(t, testkit.DeadURL(t), opts)
					if out != "" {
						t.Fatalf("with the server down, the cache brought back %q after %s\n%s", out, tt.name, log)
					}
				} else if !errors.Is(err, client.ErrNoKeys) {
					t.Fatalf("a refusal: %v, want ErrNoKeys", err)
				}
				return
			}
			if err != nil || out != key {
				t.Fatalf("after %s: out %q, err %v, want the cached key\n%s", tt.name, out, err, log)
			}
			for _, want := range []string{"level=WARN", "serving the cached answer", "age=", "max_age=24h0m0s", tt.reason} {
				if !strings.Contains(log, want) {
					t.Errorf("warning lacks %q:\n%s", want, log)
				}
			}
		})
	}
}

// TestAuthorizedKeysMaxAge: an answer older than MaxAge is not served,
// and MaxAge 0 neither writes nor reads a cache.
func TestAuthorizedKeysMaxAge(t *testing.T) {
	t.Parallel()
	key := testkit.AuthorizedKeyLine(t)
	f := testkit.NewStubServer(t)
	f.Answer(http.StatusOK, key)
	opts := client.KeysOptions{CacheDir: filepath.Join(t.TempDir(), "cache"), MaxAge: time.Hour}
	if out, log, err := keysAt(t, f.URL, opts); err != nil || out != key {
		t.Fatalf("live answer: out %q, err %v\n%s", out, err, log)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(filepath.Join(opts.CacheDir, "alice.keys"), old, old); err != nil {
		t.Fatal(err)
	}
	dead := testkit.DeadURL(t)
	out, log, err := keysAt(t, dead, opts)
	if out != "" || !errors.Is(err, client.ErrNoKeys) || !strings.Contains(log, "too old") {
		t.Fatalf("a 2h-old answer with MaxAge 1h: out %q, err %v\n%s", out, err, log)
	}
	// Younger than MaxAge, it is served.
	opts.MaxAge = 3 * time.Hour
	if out, log, _ := keysAt(t, dead, opts); out != key {
		t.Fatalf("a 2h-old answer with MaxAge 3h: out %q\n%s", out, log)
	}

	// No cache: none written, and one left from before is not read.
	opts.MaxAge = 0
	opts.CacheDir = filepath.Join(t.TempDir(), "cache")
	if out, log, err := keysAt(t, f.URL, opts); err != nil || out != key {
		t.Fatalf("live answer: out %q, err %v\n%s", out, err, log)
	}
	if _, err := os.Stat(opts.CacheDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("MaxAge 0 made a cache: %v", err)
	}
	withCache := opts
	withCache.MaxAge = time.Hour
	if out, _, err := keysAt(t, f.URL, withCache); err != nil || out != key {
		t.Fatal(err)
	}
	out, log, err = keysAt(t, dead, opts)
	if out != "" || !errors.Is(err, client.ErrNoKeys) || !strings.Contains(log, "cache is off") {
		t.Fatalf("with the cache off and the server down: out %q, err %v\n%s", out, err, log)
	}
}

// TestAuthorizedKeysKeepsOnlyTheFingerprintAndNoOptions: with a
// fingerprint only that key is returned, and options the answer carries
// are dropped.
func TestAuthorizedKeysKeepsOnlyTheFingerprintAndNoOptions(t *testing.T) {
	t.Parallel()
	one, two := testkit.AuthorizedKeyLine(t), testkit.AuthorizedKeyLine(t)
	f := testkit.NewStubServer(t)
	f.Answer(http.StatusOK, `command="/bin/evil",no-pty `+one+two)
	out, log, err := keysAt(t, f.URL, client.KeysOptions{})
	if err != nil || out != one+two {
		t.Fatalf("got %q, %v, want both keys without options\n%s", out, err, log)
	}
	k, _, _, _, err := gossh.ParseAuthorizedKey([]byte(two))
	if err != nil {
		t.Fatal(err)
	}
	out, _, err = keysAt(t, f.URL, client.KeysOptions{Fingerprint: gossh.FingerprintSHA256(k)})
	if err != nil || out != two {
		t.Fatalf("with the fingerprint of the second: %q, %v", out, err)
	}
}

// TestPlainHTTPToAnotherHost: keys fetched without TLS from another host
// can be swapped by anyone on the path; loopback and https cannot.
func TestPlainHTTPToAnotherHost(t *testing.T) {
	t.Parallel()
	for server, want := range map[string]bool{
		"http://keys.example.org":  true,
		"http://192.0.2.1:11371":   true,
		"http://[2001:db8::1]":     true,
		"http://127.0.0.1:1":       false,
		"http://127.1.2.3:1":       false,
		"http://[::1]:1":           false,
		"http://localhost:1":       false,
		"https://keys.example.org": false,
	} {
		c, err := client.New(server, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.PlainHTTP(); got != want {
			t.Errorf("%s: PlainHTTP %v, want %v", server, got, want)
		}
	}
}

// TestAuthorizedKeysRefusesUnsafeCache: a cache another local user could
// write to could be used to plant keys, so a cache directory or file
// that is group- or world-writable, or owned by another user, is not
// read (and the log says so).
func TestAuthorizedKeysRefusesUnsafeCache(t *testing.T) {
	t.Parallel()
	key := testkit.AuthorizedKeyLine(t)
	f := testkit.NewStubServer(t)
	f.Answer(http.StatusOK, key)
	dead := testkit.DeadURL(t)
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
				testkit.Root(t, "to give a cache to another user")
			}
			opts := client.KeysOptions{CacheDir: filepath.Join(t.TempDir(), "cache"), MaxAge: time.Hour}
			if out, log, err := keysAt(t, f.URL, opts); err != nil || out != key {
				t.Fatalf("live answer: out %q, err %v\n%s", out, err, log)
			}
			file := filepath.Join(opts.CacheDir, "alice.keys")
			if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("cache file: %v, %v; want mode 0600", fi.Mode(), err)
			}
			tt.spoil(t, opts.CacheDir, file)
			out, log, err := keysAt(t, dead, opts)
			if out != "" || !errors.Is(err, client.ErrNoKeys) {
				t.Fatalf("served an unsafe cache: out %q, err %v\n%s", out, err, log)
			}
			if !strings.Contains(log, "not using the cache") {
				t.Fatalf("did not say why the cache was refused:\n%s", log)
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

// TestMapUser: without a map the user name is the handle (never a system
// account's name); with one, its line names the handle, and a user
// without a line has none.
func TestMapUser(t *testing.T) {
	t.Parallel()
	m := filepath.Join(t.TempDir(), "users.map")
	if err := os.WriteFile(m, []byte("# user handle\nalice alice-smith\n\nbob  bob\nubuntu nora\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ file, user, want, err string }{
		{"", "alice", "alice", ""},
		{"", "Root", "", "invalid handle"},
		// A system account (issue 31) is no one's by name: whoever holds
		// the handle from an older Kith, only the map gives it one.
		{"", "ubuntu", "", "system account"},
		{"", "www-data", "", "system account"},
		{m, "ubuntu", "nora", ""},
		{m, "alice", "alice-smith", ""},
		{m, "bob", "bob", ""},
		{m, "mallory", "", `has no line for user "mallory"`},
		{filepath.Join(t.TempDir(), "none"), "alice", "", "map file"},
	} {
		h, err := client.MapUser(tt.file, tt.user)
		if string(h) != tt.want || (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("MapUser(%q, %q) = %q, %v; want %q, %q", tt.file, tt.user, h, err, tt.want, tt.err)
		}
	}
}

// TestAuthorizedKeysWithLogKeyReturnsOnlyKeysInTheLog: with a log key a
// key is returned only when the records proving it are in a signed
// checkpoint consistent with the last one seen; a key proven after the
// checkpoint waits for the next; an edited proof, a rewritten log and a
// log signed by another key return nothing.
func TestAuthorizedKeysWithLogKeyReturnsOnlyKeysInTheLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := newServer(t)
	c := srv.client()
	u := newUser(t)
	dir := t.TempDir()
	k1, k2, k3 := u.sshKey(dir, "one"), u.sshKey(dir, "two"), u.sshKey(dir, "three")
	if _, err := c.Claim(ctx, "alice", k1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Add(ctx, "alice", k2, k1); err != nil {
		t.Fatal(err)
	}
	srv.integrate()
	key := srv.log.Key().VerifierKey()
	cache := filepath.Join(dir, "cache")
	ak := func(logKey string) (string, string, error) {
		return keysAt(t, srv.url, client.KeysOptions{CacheDir: cache, MaxAge: time.Hour, LogKey: logKey})
	}
	out, log, err := ak(key)
	if err != nil || !strings.Contains(out, k1.Pub) || !strings.Contains(out, k2.Pub) {
		t.Fatalf("keys in the log: %v\n%s%s", err, out, log)
	}

	// Proven, but not yet in a checkpoint: not returned until it is.
	if _, err := c.Add(ctx, "alice", k3, k1); err != nil {
		t.Fatal(err)
	}
	out, log, err = ak(key)
	if err != nil || strings.Contains(out, k3.Pub) || !strings.Contains(out, k1.Pub) {
		t.Fatalf("a key proven after the checkpoint: %v\n%s%s", err, out, log)
	}
	if !strings.Contains(log, "not in the checkpoint") {
		t.Errorf("no reason given for the missing key:\n%s", log)
	}
	srv.integrate()
	if out, _, err = ak(key); err != nil || !strings.Contains(out, k3.Pub) {
		t.Fatalf("the key after the next checkpoint: %v\n%s", err, out)
	}

	// Another key's checkpoint: nothing.
	otherKey, err := tlog.NewKey(srv.log.Key().Name(), make([]byte, tlog.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	if out, _, err := ak(otherKey.VerifierKey()); !errors.Is(err, client.ErrNoKeys) || out != "" {
		t.Fatalf("a checkpoint by another key: %v %q", err, out)
	}

	// k2's proof edited in the database, the chain recomputed: the
	// server now serves a record that is not the log's entry, so its
	// bundle does not hold and nothing is returned.
	recs, err := srv.store.Log(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var seq int64
	for _, e := range recs {
		if e.From.Value == k2.ID {
			seq = e.Seq
		}
	}
	if seq == 0 {
		t.Fatal("no record signed by k2")
	}
	srv.rewriteRecord(seq, "edited")
	out, log, err = ak(key)
	if !errors.Is(err, client.ErrNoKeys) || out != "" || !strings.Contains(log, "not in the checkpoint") {
		t.Fatalf("an edited proof: %v %q\n%s", err, out, log)
	}

	// The operator rebuilds the tree over the edited log: the checkpoint
	// is not consistent with the one this host saw; nothing is returned.
	srv.rebuildTree()
	out, log, err = ak(key)
	if !errors.Is(err, client.ErrNoKeys) || out != "" || !strings.Contains(log, "not consistent") {
		t.Fatalf("a rewritten log: %v %q\n%s", err, out, log)
	}
}
