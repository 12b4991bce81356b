package main

import (
	"bytes"
	"flag"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/ssh"
)

// TestSSHCASettingsRefusedWhenBad: each bad [ssh_ca] setting stops the
// start with an error naming it.
func TestSSHCASettingsRefusedWhenBad(t *testing.T) {
	for _, c := range []struct {
		file, want string
	}{
		{"[ssh_ca]\nvalidity = \"0s\"\n", "ssh_ca.validity"},
		{"[ssh_ca]\nvalidity = \"20h\"\nmax_validity = \"10h\"\n", "ssh_ca.max_validity"},
		{"[ssh_ca]\nmax_validity = \"720h\"\n", "short-lived"},
		{"[ssh_ca]\ncertificates_per_hour = 0\n", "ssh_ca.certificates_per_hour"},
		{"[ssh_ca]\ncritical_options = [\"no-touch-required\"]\n", "ssh_ca.critical_options"},
		{"[ssh_ca]\ncritical_options = [\"force-command\"]\n", "needs a value"},
		{"[ssh_ca]\nextensions = [\"permit-pty\", \"permit-pty\"]\n", "twice"},
		{"[ssh_ca]\ncolour = \"blue\"\n", "unknown setting ssh_ca.colour"},
	} {
		file := filepath.Join(t.TempDir(), "kith.toml")
		os.WriteFile(file, []byte(c.file), 0o600)
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if _, _, err := loadConfig(fs, []string{"--config", file}, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error naming %q", c.file, err, c.want)
		}
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg, _, err := loadConfig(fs, []string{"--ssh-ca-enabled", "--ssh-ca-critical-options", "source-address=10.0.0.0/8", "--ssh-ca-validity", "1h"},
		[]string{"KITH_SSH_CA_EXTENSIONS=permit-pty"})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.SSHCA.Enabled || cfg.SSHCA.Validity.String() != "1h0m0s" || !slices.Equal(cfg.SSHCA.Extensions, []string{"permit-pty"}) ||
		!slices.Equal(cfg.SSHCA.CriticalOptions, []string{"source-address=10.0.0.0/8"}) {
		t.Errorf("settings: %+v", cfg.SSHCA)
	}
}

// TestSSHCAKeyIsSharedByNodesOrFromFile: two nodes of one database get
// the same CA key from its secrets; ssh_ca.key_file takes an ssh-keygen
// Ed25519 key or a 32-byte seed instead; a principals file gives extras,
// and a bad one stops the start.
func TestSSHCAKeyIsSharedByNodesOrFromFile(t *testing.T) {
	testkit.Tool(t, "ssh-keygen")
	dbURL := pgtest.NewDatabase(t)
	ctx := t.Context()
	open := func() *postgres.Store {
		st, err := postgres.Open(ctx, dbURL, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return st
	}
	one, two := open(), open()
	cfg := defaultConfig()
	cfg.SSHCA.Enabled = true
	a, _, err := certificateAuthority(ctx, cfg, one)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := certificateAuthority(ctx, cfg, two)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.PublicKey(), b.PublicKey()) {
		t.Error("two nodes of one database have different CA keys")
	}

	dir := t.TempDir()
	keyFile := filepath.Join(dir, "ca")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ca", "-f", keyFile).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	cfg.SSHCA.KeyFile = keyFile
	fromFile, _, err := certificateAuthority(ctx, cfg, one)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := os.ReadFile(keyFile + ".pub")
	if !bytes.Equal(fromFile.PublicKey(), mustBlob(t, string(pub))) {
		t.Error("the CA key is not the key file's")
	}
	seed := filepath.Join(dir, "seed")
	os.WriteFile(seed, bytes.Repeat([]byte{9}, 32), 0o600)
	cfg.SSHCA.KeyFile = seed
	if _, _, err := certificateAuthority(ctx, cfg, one); err != nil {
		t.Errorf("a 32-byte seed: %v", err)
	}
	os.WriteFile(seed, []byte("short"), 0o600)
	if _, _, err := certificateAuthority(ctx, cfg, one); err == nil || !strings.Contains(err.Error(), "ssh_ca.key_file") {
		t.Errorf("a bad key file: %v", err)
	}
	cfg.SSHCA.KeyFile = ""

	principals := filepath.Join(dir, "principals")
	os.WriteFile(principals, []byte("# extras\nnora deploy backup\n\nnora web\n"), 0o600)
	cfg.SSHCA.PrincipalsFile = principals
	_, policy, err := certificateAuthority(ctx, cfg, one)
	if err != nil {
		t.Fatal(err)
	}
	if got := policy.Principals(identity.Handle("nora")); !slices.Equal(got, []string{"deploy", "backup", "web"}) {
		t.Errorf("nora's extras: %v", got)
	}
	if got := policy.Principals(identity.Handle("bob")); len(got) != 0 {
		t.Errorf("bob's extras: %v", got)
	}
	for _, bad := range []string{"Not_A_Handle root\n", "nora\n", "nora a,b\n"} {
		os.WriteFile(principals, []byte(bad), 0o600)
		if _, _, err := certificateAuthority(ctx, cfg, one); err == nil || !strings.Contains(err.Error(), "ssh_ca.principals_file") {
			t.Errorf("principals file %q: %v", bad, err)
		}
	}
	cfg.SSHCA.Enabled = false
	if ca, _, err := certificateAuthority(ctx, cfg, one); ca != nil || err != nil {
		t.Errorf("disabled: %v, %v", ca, err)
	}
}

// TestServeSSHCAOneKeyForEveryNode: two kith serve nodes of one database
// with ssh_ca.enabled serve the same CA key, which kith ssh-ca-key
// prints, and an empty revocation list naming it; a node without the
// setting issues nothing.
func TestServeSSHCAOneKeyForEveryNode(t *testing.T) {
	url := pgtest.NewDatabase(t)
	one := startServe(t, tempDir(t), nil, "--database-url", url, "--ssh-ca-enabled")
	two := startServe(t, tempDir(t), nil, "--database-url", url, "--ssh-ca-enabled")
	off := startServe(t, tempDir(t), nil, "--database-url", url)
	for _, s := range []*server{one, two, off} {
		s.waitHealth(t, http.StatusOK, 60*time.Second)
	}
	get := func(s *server, path string) (int, []byte) {
		t.Helper()
		resp, err := http.Get("http://" + s.addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	st1, key1 := get(one, "/ssh/ca.pub")
	st2, key2 := get(two, "/ssh/ca.pub")
	if st1 != 200 || st2 != 200 || keyFields(string(key1)) != keyFields(string(key2)) {
		t.Fatalf("the nodes serve CA keys %d %q and %d %q", st1, key1, st2, key2)
	}
	printed, _, err := kithCmd("ssh-ca-key", "--server", "http://"+two.addr)
	if err != nil || keyFields(printed) != keyFields(string(key1)) {
		t.Errorf("kith ssh-ca-key printed %q (%v), the node serves %q", printed, err, key1)
	}
	st, body := get(one, "/ssh/krl")
	krl, err := ssh.ParseKRL(body)
	if st != 200 || err != nil || !krl.NamesCA(mustBlob(t, string(key1))) {
		t.Errorf("GET /ssh/krl: %d %v", st, err)
	}
	if st, _ := get(off, "/ssh/ca.pub"); st != http.StatusNotFound {
		t.Errorf("the node without ssh_ca.enabled: /ssh/ca.pub %d", st)
	}
	for _, s := range []*server{one, two, off} {
		s.stop(t)
	}
}

// keyFields is a key line without its comment.
func keyFields(line string) string {
	f := strings.Fields(line)
	if len(f) < 2 {
		return line
	}
	return f[0] + " " + f[1]
}
