package wkd_test

import (
	"crypto/tls"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp/gpgtest"
)

// listen443 listens on port 443 of a loopback address of its own
// (127.0.13.X), so that it meets no other server on the machine.
func listen443(t *testing.T) net.Listener {
	t.Helper()
	var last error
	for range 20 {
		addr := fmt.Sprintf("127.0.13.%d:443", 2+mrand.IntN(250))
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			return ln
		}
		last = err
	}
	t.Fatalf("no loopback address with a free port 443: %v", last)
	return nil
}

// TestGPGLocateKeysFindsAVerifiedKeyThroughWKD runs the real gpg
// --locate-keys against the directory over HTTPS. gpg's dirmngr needs
// https on port 443 and the test domain's names: the test serves TLS with
// a throwaway CA on a loopback address of its own, and runs gpg in a
// private mount namespace where a hosts file maps the names to that
// address and the system CA bundle is the throwaway CA (the machine's
// /etc/hosts and CA bundle are never touched).
func TestGPGLocateKeysFindsAVerifiedKeyThroughWKD(t *testing.T) {
	gpg := testkit.Tool(t, "gpg")
	unshare := testkit.Tool(t, "unshare")
	const bundle = "/etc/ssl/certs/ca-certificates.crt"
	testkit.Root(t, "for a private mount namespace")
	if _, err := os.Stat(bundle); err != nil {
		t.Fatalf("%s: %v (Debian package ca-certificates)", bundle, err)
	}
	e := newEnv(t)
	alice := e.store("Alice <alice@example.org>", "Alice <alice@home.example>")
	e.store("Mallory <alice@example.org>")
	e.verifyAddr(alice, "alice@example.org")

	ca := testkit.NewCA(t)
	cert := ca.Issue(t, "openpgpkey.example.org", "example.org")
	ln := listen443(t)
	srv := &http.Server{Handler: e.h, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ReadHeaderTimeout: 10 * time.Second}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	ip, _, _ := net.SplitHostPort(ln.Addr().String())

	home := gpgtest.New(t)
	if err := os.WriteFile(filepath.Join(home.Dir, "dirmngr.conf"), []byte("standard-resolver\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hosts := filepath.Join(dir, "hosts")
	os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"+ip+" openpgpkey.example.org example.org\n"), 0o644)
	caFile := ca.WriteCert(t, filepath.Join(dir, "ca.pem"))
	env := home.Env()

	script := `mount --bind "$1" /etc/hosts && mount --bind "$2" ` + bundle + ` && exec "$3" --batch --no-tty --auto-key-locate clear,wkd,nodefault --locate-keys alice@example.org`
	cmd := exec.Command(unshare, "-m", "--propagation", "private", "sh", "-c", script, "sh", hosts, caFile, gpg)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gpg --locate-keys: %v\n%s", err, out)
	}
	fp := strings.ToUpper(hex.EncodeToString(alice.Fingerprint()))
	if !strings.Contains(string(out), fp) {
		t.Fatalf("gpg did not locate %s:\n%s", fp, out)
	}
	list := exec.Command(gpg, "--batch", "--with-colons", "--list-keys")
	list.Env = env
	lout, err := list.Output()
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, l := range strings.Split(string(lout), "\n") {
		if f := strings.Split(l, ":"); len(f) > 9 && f[0] == "uid" {
			uids = append(uids, f[9])
		}
	}
	if len(uids) != 1 || uids[0] != "Alice <alice@example.org>" {
		t.Errorf("gpg imported user IDs %q, want only the located address", uids)
	}
	if strings.Count(string(lout), "\npub:") != 1 {
		t.Errorf("gpg imported more than one key:\n%s", lout)
	}
}
