package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/web/api"
)

// testGPG runs gpg in a throwaway home.
type testGPG struct {
	t    *testing.T
	home string
}

func newTestGPG(t *testing.T) *testGPG {
	t.Helper()
	requireTool(t, "gpg")
	home, err := os.MkdirTemp("/tmp", "kg") // short: gpg-agent's socket path
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(home, 0o700)
	t.Cleanup(func() {
		c := exec.Command("gpgconf", "--kill", "all")
		c.Env = append(os.Environ(), "GNUPGHOME="+home)
		c.Run()
		os.RemoveAll(home)
	})
	return &testGPG{t: t, home: home}
}

func (g *testGPG) run(stdin string, args ...string) []byte {
	g.t.Helper()
	c := exec.Command("gpg", append([]string{"--batch", "--yes", "--no-tty", "--pinentry-mode", "loopback", "--passphrase", ""}, args...)...)
	c.Env = append(os.Environ(), "GNUPGHOME="+g.home)
	c.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		g.t.Fatalf("gpg %v: %v\n%s", args, err, errb.String())
	}
	return out.Bytes()
}

// newKey makes an Ed25519 signing key and returns its fingerprint.
func (g *testGPG) newKey(uid string) string {
	g.t.Helper()
	g.run("", "--quick-gen-key", uid, "ed25519", "sign", "0")
	for _, l := range strings.Split(string(g.run("", "--with-colons", "--list-keys", uid)), "\n") {
		if strings.HasPrefix(l, "fpr:") {
			return strings.Split(l, ":")[9]
		}
	}
	g.t.Fatalf("no fingerprint for %s", uid)
	return ""
}

// TestLoadRefreshesIdentityLinks is item 3 of the identity-core issue: a
// proven OpenPGP key updated through `kith load` (a new auth subkey, then
// that subkey revoked) changes what the handle serves, as an HKP upload
// would, and loading the same file again changes nothing.
func TestLoadRefreshesIdentityLinks(t *testing.T) {
	a := newAPIServer(t)
	g := newTestGPG(t)
	fpr := g.newKey("Dana <dana@example.org>")
	load := func() {
		t.Helper()
		file := filepath.Join(t.TempDir(), "dana.asc")
		if err := os.WriteFile(file, g.run("", "--export", "--armor", fpr), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, errOut, err := runKith(t, "load", "--database-url", a.dbURL, file); err != nil {
			t.Fatalf("load: %v\n%s", err, errOut)
		}
	}
	keys := func() string {
		t.Helper()
		resp, err := http.Get(a.srv.URL + "/users/dana.keys")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	load()
	stmt := a.challenge("dana", fpr, "claim")
	a.post("/api/v1/identities", api.ClaimRequest{SignedStatement: api.SignedStatement{
		Statement: stmt, Signature: string(g.run(stmt, "--local-user", fpr, "--clearsign", "--output", "-")),
	}})
	if got := keys(); got != "" {
		t.Fatalf("before any auth subkey dana serves %q", got)
	}

	g.run("", "--quick-add-key", fpr, "ed25519", "sign,auth", "0")
	load()
	var subID string
	for _, l := range strings.Split(string(g.run("", "--with-colons", "--list-keys", fpr)), "\n") {
		if f := strings.Split(l, ":"); f[0] == "sub" && strings.Contains(f[11], "a") {
			subID = f[4]
		}
	}
	// `kith load` is another node: the server's cached answer goes with
	// the notification.
	want := string(g.run("", "--export-ssh-key", subID+"!"))
	if !eventually(30*time.Second, 20*time.Millisecond, func() bool { return keys() == want }) {
		t.Fatalf("after loading the new auth subkey dana serves %q, want %q", keys(), want)
	}
	before := logLength(t, a)
	load()
	if n := logLength(t, a); n != before {
		t.Errorf("loading the same key again appended %d records", n-before)
	}

	// Revoke the subkey (the key's only one) with gpg.
	g.run("y\n0\n\ny\n", "--command-fd", "0", "--edit-key", fpr, "key", "1", "revkey", "save")
	load()
	if !eventually(30*time.Second, 20*time.Millisecond, func() bool { return keys() == "" }) {
		t.Fatalf("after loading the revoked auth subkey dana serves %q", keys())
	}
}

// logLength counts the records of the API server's evidence log.
func logLength(t *testing.T, a *apiServer) int {
	t.Helper()
	recs, err := a.store.Log(context.Background(), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}
