package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp/gpgtest"
	"github.com/kith-keyserver/kith/web/api"
)

// TestLoadRefreshesIdentityLinks is item 3 of the identity-core issue: a
// proven OpenPGP key updated through `kith load` (a new auth subkey, then
// that subkey revoked) changes what the handle serves, as an HKP upload
// would, and loading the same file again changes nothing.
func TestLoadRefreshesIdentityLinks(t *testing.T) {
	a := newAPIServer(t)
	g := gpgtest.New(t)
	fpr := g.NewKey("Dana <dana@example.org>", "sign")
	load := func() {
		t.Helper()
		file := filepath.Join(t.TempDir(), "dana.asc")
		if err := os.WriteFile(file, g.Run("", "--export", "--armor", fpr), 0o644); err != nil {
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
		Statement: stmt, Signature: string(g.Run(stmt, "--local-user", fpr, "--clearsign", "--output", "-")),
	}})
	if got := keys(); got != "" {
		t.Fatalf("before any auth subkey dana serves %q", got)
	}

	g.Run("", "--quick-add-key", fpr, "ed25519", "sign,auth", "0")
	load()
	var subID string
	for _, l := range strings.Split(string(g.Run("", "--with-colons", "--list-keys", fpr)), "\n") {
		if f := strings.Split(l, ":"); f[0] == "sub" && strings.Contains(f[11], "a") {
			subID = f[4]
		}
	}
	// `kith load` is another node: the server's cached answer goes with
	// the notification.
	want := string(g.Run("", "--export-ssh-key", subID+"!"))
	if !testkit.PollEvery(30*time.Second, 20*time.Millisecond, func() bool { return keys() == want }) {
		t.Fatalf("after loading the new auth subkey dana serves %q, want %q", keys(), want)
	}
	before := logLength(t, a)
	load()
	if n := logLength(t, a); n != before {
		t.Errorf("loading the same key again appended %d records", n-before)
	}

	// Revoke the subkey (the key's only one) with gpg.
	g.Run("y\n0\n\ny\n", "--command-fd", "0", "--edit-key", fpr, "key", "1", "revkey", "save")
	load()
	if !testkit.PollEvery(30*time.Second, 20*time.Millisecond, func() bool { return keys() == "" }) {
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
