package hkp

import (
	"bytes"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gpgHome is a throwaway GnuPG home pointed at a keyserver.
type gpgHome struct {
	t         *testing.T
	gpg, dir  string
	keyserver string
}

// newGPGHome makes a GnuPG home in a short directory (gpg-agent sockets
// live in it) whose dirmngr uses keyserver; agents are killed at cleanup.
func newGPGHome(t *testing.T, gpg, keyserver string) *gpgHome {
	t.Helper()
	dir, err := os.MkdirTemp("", "kg")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := "keyserver " + keyserver + "\nstandard-resolver\n"
	if err := os.WriteFile(filepath.Join(dir, "dirmngr.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	g := &gpgHome{t: t, gpg: gpg, dir: dir, keyserver: keyserver}
	t.Cleanup(func() {
		cmd := exec.Command("gpgconf", "--kill", "all")
		cmd.Env = g.env()
		cmd.Run()
		os.RemoveAll(dir)
	})
	return g
}

func (g *gpgHome) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GNUPGHOME=") && !strings.HasPrefix(strings.ToLower(kv), "http_proxy=") {
			env = append(env, kv)
		}
	}
	return append(env, "GNUPGHOME="+g.dir)
}

// run runs gpg in batch mode and returns its stdout; it fails the test
// when gpg fails.
func (g *gpgHome) run(stdin string, args ...string) string {
	g.t.Helper()
	out, errOut, err := g.try(stdin, args...)
	if err != nil {
		g.t.Fatalf("gpg %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func (g *gpgHome) try(stdin string, args ...string) (string, string, error) {
	full := append([]string{"--batch", "--no-tty", "--yes", "--pinentry-mode", "loopback", "--passphrase", "",
		"--keyserver", g.keyserver}, args...)
	cmd := exec.Command(g.gpg, full...)
	cmd.Env = g.env()
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return "", "", err
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), errOut.String(), err
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		return out.String(), errOut.String(), exec.ErrWaitDelay
	}
}

// colons lists the public keys with --with-colons.
func (g *gpgHome) colons(args ...string) string {
	return g.run("", append([]string{"--with-colons", "--fixed-list-mode", "--list-keys"}, args...)...)
}

func TestGPGSendsReceivesSearchesAndRefreshes(t *testing.T) {
	gpg := needTool(t, "gpg")
	needTool(t, "gpgconf")
	ts := newTestServer(t, Options{})
	u, _ := url.Parse(ts.url)
	keyserver := "hkp://" + u.Host

	alice := newGPGHome(t, gpg, keyserver)
	alice.run("", "--quick-gen-key", "Alice Gnupg <alice.gpg@example.org>", "ed25519", "cert,sign", "never")
	fpr := firstField(alice.colons(), "fpr", 10)
	if len(fpr) != 40 {
		t.Fatalf("no fingerprint in gpg's listing")
	}
	keyID := fpr[24:]
	alice.run("", "--quick-add-key", fpr, "cv25519", "encr", "never")
	alice.run("", "--send-keys", fpr)
	if n := ts.keyCount(); n != 1 {
		t.Fatalf("%d keys stored after --send-keys", n)
	}

	bob := newGPGHome(t, gpg, keyserver)
	// By fingerprint.
	bob.run("", "--recv-keys", fpr)
	if got := bob.colons(fpr); !strings.Contains(got, "Alice Gnupg") {
		t.Fatalf("received key not listed:\n%s", got)
	}
	// By 64-bit key ID, into a fresh home.
	carol := newGPGHome(t, gpg, keyserver)
	carol.run("", "--recv-keys", "0x"+keyID)
	if got := carol.colons(fpr); !strings.Contains(got, "Alice Gnupg") || strings.Count(got, "\nsub:") != 1 {
		t.Fatalf("key by ID:\n%s", got)
	}

	// Search by email and by name: gpg lists the machine-readable index.
	for _, q := range []string{"alice.gpg@example.org", "Alice Gnupg"} {
		out := carol.run("", "--with-colons", "--search-keys", q)
		if !strings.Contains(out, "pub:"+fpr+":") || !strings.Contains(out, "uid:Alice Gnupg <alice.gpg@example.org>:") {
			t.Errorf("search %q:\n%s", q, out)
		}
	}

	// A new user ID and a new subkey reach bob through --refresh-keys.
	alice.run("", "--quick-add-uid", fpr, "Alice Work <alice@work.example>")
	alice.run("", "--quick-add-key", fpr, "ed25519", "sign", "never")
	alice.run("", "--send-keys", fpr)
	bob.run("", "--refresh-keys")
	got := bob.colons(fpr)
	if !strings.Contains(got, "Alice Work") || strings.Count(got, "\nsub:") != 2 {
		t.Fatalf("after refresh:\n%s", got)
	}
	// The merge kept both user IDs on the server.
	r := ts.lookup("op=index&options=mr&search=0x" + fpr)
	if strings.Count(r.body, "\nuid:") != 2 {
		t.Errorf("server index after merge:\n%s", r.body)
	}

	// A revocation: gpg writes a revocation certificate at key creation.
	rev, err := os.ReadFile(filepath.Join(alice.dir, "openpgp-revocs.d", fpr+".rev"))
	if err != nil {
		t.Fatal(err)
	}
	cert := strings.Replace(string(rev), ":-----BEGIN PGP PUBLIC KEY BLOCK-----", "-----BEGIN PGP PUBLIC KEY BLOCK-----", 1)
	alice.run(cert, "--import")
	alice.run("", "--send-keys", fpr)
	bob.run("", "--refresh-keys")
	if got := bob.colons(fpr); !strings.HasPrefix(firstLine(got, "pub:"), "pub:r:") {
		t.Errorf("revocation did not reach bob:\n%s", got)
	}
	r = ts.lookup("op=index&options=mr&search=0x" + fpr)
	if !strings.Contains(r.body, "pub:"+fpr+":22:255:") || !strings.Contains(firstLine(r.body, "pub:"), ":r") {
		t.Errorf("server index does not flag the revocation:\n%s", r.body)
	}
}

// firstField returns field n (1-based) of the first record of type typ.
func firstField(colons, typ string, n int) string {
	for _, l := range strings.Split(colons, "\n") {
		f := strings.Split(l, ":")
		if f[0] == typ && len(f) >= n {
			return f[n-1]
		}
	}
	return ""
}

func firstLine(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
