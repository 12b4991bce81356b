package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/hkp"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/gpgtest"
	"github.com/kith-keyserver/kith/web/api"
)

// keyServer is HKP and the identity API over a fresh store, in-process:
// what `kith id` talks to.
type keyServer struct {
	url   string
	store *postgres.Store
}

func newKeyServer(t *testing.T) *keyServer {
	t.Helper()
	dbURL := pgtest.NewDatabase(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	policy := pgp.DefaultPolicy()
	st, err := postgres.Open(ctx, dbURL, postgres.Options{Policy: &policy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	log := slog.New(slog.DiscardHandler)
	svc, err := newIdentityService(st, "Kith test", testHostPolicy(t), log)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := api.NewHandler(ctx, api.Options{Service: svc, Keys: st, Watcher: st})
	if err != nil {
		t.Fatal(err)
	}
	keys := hkp.NewHandler(st, hkp.Options{Policy: policy, Logger: log})
	go keys.Run(ctx)
	mux := http.NewServeMux()
	keys.Register(mux)
	ids.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &keyServer{url: srv.URL, store: st}
}

func (k *keyServer) get(t *testing.T, path string) string {
	t.Helper()
	resp, err := http.Get(k.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

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
	requireTool(t, "ssh-keygen")
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

// ok runs kith and fails the test unless it succeeds.
func (u *idUser) ok(args ...string) string {
	u.t.Helper()
	out, errOut, code := u.kith(args...)
	if code != 0 {
		u.t.Fatalf("kith %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
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

// TestIDClientWithRealTools drives kith id claim, add, revoke and show,
// the real binary with the real ssh-keygen and gpg, against the API.
func TestIDClientWithRealTools(t *testing.T) {
	srv := newKeyServer(t)
	u := newIDUser(t, srv.url)
	main := newSSHKeyPair(t, filepath.Join(u.home, ".ssh"), "id_ed25519")
	laptop := newSSHKeyPair(t, t.TempDir(), "laptop")
	stranger := newSSHKeyPair(t, t.TempDir(), "stranger")
	fpr := u.gpg.NewKey("Nora <nora@example.org>", "sign")

	out := u.ok("id", "claim", "nora", "--ssh-key", "~/.ssh/id_ed25519")
	if !strings.Contains(out, "claimed nora with ssh SHA256:") {
		t.Errorf("claim printed %q", out)
	}
	if got := srv.get(t, "/users/nora.keys"); !strings.Contains(got, keyOnlyLine(main.pub)) {
		t.Fatalf("after claim nora serves %q", got)
	}

	// The one proven key here (the claim's, in ~/.ssh) co-signs; the
	// OpenPGP key is uploaded from gpg first.
	out = u.ok("id", "add", "nora", "--pgp", fpr)
	if !strings.Contains(out, "uploaded OpenPGP key "+fpr) || !strings.Contains(out, "linked pgp "+fpr+" to nora (proven), co-signed by ssh SHA256:") {
		t.Errorf("add --pgp printed %q", out)
	}

	// Now two keys here are proven: the client will not guess.
	before := logRecords(t, srv.store)
	errOut := u.refused("id", "add", "nora", "--ssh-key", laptop.path)
	if !strings.Contains(errOut, "several keys here are proven for nora") || !strings.Contains(errOut, "--by-pgp") {
		t.Errorf("ambiguous co-signer: stderr %q", errOut)
	}
	out = u.ok("id", "add", "--by-pgp", fpr, "nora", "--ssh-key", laptop.path)
	if !strings.Contains(out, "co-signed by pgp "+fpr) {
		t.Errorf("add --by-pgp printed %q", out)
	}
	if got := srv.get(t, "/users/nora.keys"); !strings.Contains(got, keyOnlyLine(laptop.pub)) {
		t.Fatalf("after add nora serves %q", got)
	}
	if n := logRecords(t, srv.store); n <= before {
		t.Fatalf("the add appended no record")
	}

	// A stranger's key cannot co-sign: the server says why and what to
	// do, and nothing is written.
	before = logRecords(t, srv.store)
	errOut = u.refused("id", "add", "nora", "--ssh-key", stranger.path, "--by-ssh-key", stranger.path)
	if !strings.Contains(errOut, "not_proven") && !strings.Contains(errOut, "not_authorized") {
		t.Errorf("stranger co-signing: stderr %q", errOut)
	}
	fresh := newSSHKeyPair(t, t.TempDir(), "fresh")
	errOut = u.refused("id", "add", "nora", "--ssh-key", fresh.path, "--by-ssh-key", stranger.path)
	t.Logf("a refusal:\n%s", errOut)
	if !strings.Contains(errOut, "what to do:") {
		t.Errorf("refusal without a hint: %q", errOut)
	}
	errOut = u.refused("id", "claim", "nora", "--ssh-key", stranger.path)
	if !strings.Contains(errOut, "handle_taken") || !strings.Contains(errOut, "kith id add nora") {
		t.Errorf("claim of a taken handle: stderr %q", errOut)
	}
	if n := logRecords(t, srv.store); n != before {
		t.Errorf("refused requests appended %d records", n-before)
	}

	laptopFP := fingerprintOf(t, laptop.pub)
	out = u.ok("id", "revoke", "nora", laptopFP, "--by-ssh-key", main.path)
	if !strings.Contains(out, "revoked ssh "+laptopFP+" from nora (revoked)") {
		t.Errorf("revoke printed %q", out)
	}
	if got := srv.get(t, "/users/nora.keys"); strings.Contains(got, keyOnlyLine(laptop.pub)) || !strings.Contains(got, keyOnlyLine(main.pub)) {
		t.Fatalf("after revoke nora serves %q", got)
	}

	out = u.ok("id", "show", "nora")
	t.Logf("kith id show nora:\n%s", out)
	for _, want := range []string{"proven   pgp   " + fpr, "revoked  ssh   " + laptopFP, "proven   ssh   " + fingerprintOf(t, main.pub), "ssh.challenge", "pgp.challenge"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	errOut = u.refused("id", "show", "nobody-here")
	if !strings.Contains(errOut, "unknown_identity") {
		t.Errorf("show of an unknown handle: %q", errOut)
	}
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

func logRecords(t *testing.T, st *postgres.Store) int {
	t.Helper()
	recs, err := st.Log(context.Background(), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

func keyOnlyLine(line string) string {
	f := strings.Fields(line)
	return f[0] + " " + f[1]
}

func fingerprintOf(t *testing.T, line string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "k.pub")
	if err := os.WriteFile(f, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ssh-keygen", "-l", "-E", "sha256", "-f", f).Output()
	if err != nil {
		t.Fatalf("ssh-keygen -l: %v", err)
	}
	return strings.Fields(string(out))[1]
}
