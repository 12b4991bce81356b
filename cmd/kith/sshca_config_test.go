package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
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
	requireTool(t, "ssh-keygen")
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
