package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/identity/tlog"
)

// runLogKeyServer runs kith log-key --server url and returns what it
// printed to stdout and stderr.
func runLogKeyServer(t *testing.T, url string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(kithBinary(t), "log-key", "--server", url)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + cmd.Dir}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// TestLogKeyFromServer: kith log-key --server prints the key a running
// kith serve serves at /log/key, as kith log-key prints it from the
// store, once the served checkpoint verifies with it; a server in the
// middle that serves the real checkpoint with a key of its own (same
// name) gets a loud refusal and no key printed.
func TestLogKeyFromServer(t *testing.T) {
	url := pgtest.NewDatabase(t)
	s := startServe(t, tempDir(t), nil, "--database-url", url)
	s.waitHealth(t, http.StatusOK, 30*time.Second)
	base := "http://" + s.addr
	// The background signer signs a first checkpoint at start.
	if !testkit.PollEvery(30*time.Second, 50*time.Millisecond, func() bool {
		code, _ := getBody(t, base+"/log/checkpoint")
		return code == http.StatusOK
	}) {
		t.Fatal("no checkpoint signed")
	}

	printed, errOut, err := runLogKeyServer(t, base)
	fromStore, _, serr := kithCmd("log-key", "--database-url", url, "--listen", s.addr)
	if err != nil || serr != nil || printed != fromStore || !strings.HasSuffix(printed, "\n") {
		t.Fatalf("kith log-key --server printed %q (%v, %s); from the store %q (%v)", printed, err, errOut, fromStore, serr)
	}

	// The attacker serves the real checkpoint, and a key of the same name.
	_, served := getBody(t, base+"/log/key")
	name, _, _ := strings.Cut(strings.TrimSpace(served), "+")
	forged, err := tlog.NewKey(name, bytes.Repeat([]byte{9}, tlog.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	mitm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/log/key" {
			io.WriteString(w, forged.VerifierKey()+"\n")
			return
		}
		resp, err := http.Get(base + r.URL.RequestURI())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	defer mitm.Close()
	printed, errOut, err = runLogKeyServer(t, mitm.URL)
	if err == nil || printed != "" {
		t.Fatalf("a key that does not sign the checkpoint: exit %v, printed %q", err, printed)
	}
	if !strings.Contains(errOut, "does not verify") || !strings.Contains(errOut, forged.VerifierKey()) || !strings.Contains(errOut, "not printing a key") {
		t.Errorf("the refusal does not say what failed: %q", errOut)
	}
	s.stop(t)
}
