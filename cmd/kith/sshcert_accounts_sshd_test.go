package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kith-keyserver/kith/web/api"
)

// sshAuthenticates reports whether ssh gets past authentication as login
// with the key and the certificate beside it: a system account's shell
// (nologin) then refuses the session, which is not ssh's 255.
func sshAuthenticates(t *testing.T, port int, login, key string) bool {
	t.Helper()
	out, err := exec.Command("ssh", "-i", key, "-p", fmt.Sprint(port),
		"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-o", "ConnectTimeout=10", "-F", "/dev/null",
		login+"@127.0.0.1", "true").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 255 {
		return false
	} else if err != nil && !ok {
		t.Fatalf("ssh: %v\n%s", err, out)
	}
	return true
}

// TestStrangerGetsNoCertificateForASystemAccount: issue 31's attack on
// the CA, against a real sshd that trusts it without an
// AuthorizedPrincipalsFile. A stranger's fresh key cannot claim daemon
// (a system account every Debian has), so gets no certificate for it and
// no login as it; the operator's principals file still grants the
// account to nora, whose certificate sshd accepts as daemon.
func TestStrangerGetsNoCertificateForASystemAccount(t *testing.T) {
	requireSSHDAsRoot(t)
	work, keys := t.TempDir(), t.TempDir()
	principals := filepath.Join(work, "principals")
	os.WriteFile(principals, []byte("nora daemon\n"), 0o644)
	cfg := defaultConfig()
	cfg.SSHCA.PrincipalsFile = principals
	a := newCAServer(t, cfg)
	stranger, nora := newSSHKeyPair(t, keys, "stranger"), newSSHKeyPair(t, keys, "nora")

	for _, name := range []string{"daemon", "ubuntu", "ec2-user", "www-data", "postgres"} {
		var refusal api.ErrorBody
		code := postJSON(t, a.srv.URL+"/api/v1/challenges", api.ChallengeRequest{Handle: name, Factor: stranger.pub, Purpose: "claim"}, &refusal)
		if code != http.StatusUnprocessableEntity || refusal.Error.Code != "reserved_handle" {
			t.Errorf("a stranger claiming %s: %d %+v, want 422 reserved_handle (as for admin)", name, code, refusal)
			if name == "daemon" && code == http.StatusCreated {
				a.claim(name, stranger) // the attack as it went
			}
		}
	}
	if out, errOut, err := kithCmd("ssh-cert", "daemon", "--ssh-key", stranger.path, "--server", a.srv.URL); err == nil {
		t.Errorf("kith ssh-cert daemon for a stranger's key: %s%s", out, errOut)
	}
	a.claim("nora", nora)
	if out, errOut, err := kithCmd("ssh-cert", "nora", "--ssh-key", nora.path, "--server", a.srv.URL); err != nil {
		t.Fatalf("kith ssh-cert nora: %v\n%s%s", err, out, errOut)
	}

	caFile := filepath.Join(work, "kith_user_ca.pub")
	out, _, err := kithCmd("ssh-ca-key", "--server", a.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(caFile, []byte(out), 0o644)
	port := startSSHD(t, newSSHKeyPair(t, work, "host_ed25519").path, "TrustedUserCAKeys "+caFile).port
	if !sshAuthenticates(t, port, "daemon", nora.path) {
		t.Fatal("nora's certificate, granted daemon by the principals file, is not accepted as daemon: the test proves nothing")
	}
	if sshAuthenticates(t, port, "daemon", stranger.path) {
		t.Error("the stranger's key is accepted as daemon")
	}
}
