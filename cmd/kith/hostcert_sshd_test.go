package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostCertificateWithRealSSH is the done-when test of host
// certificates, with real OpenSSH: root on a host publishes its host key
// as host:NAME and gets a host certificate for it (kith ssh-cert, signing
// with the host key); sshd presents it (HostCertificate); plain ssh with
// strict host key checking and nothing in known_hosts but the
// @cert-authority line (kith ssh-ca-key --known-hosts) connects. A host
// key without a certificate is refused, so the line is what lets ssh in.
// Once the host key's link is revoked and the KRL refreshed (kith krl,
// ssh's RevokedHostKeys), ssh refuses the certificate. A host whose keys
// are lost gets its name back through kith host release.
func TestHostCertificateWithRealSSH(t *testing.T) {
	requireSSHDAsRoot(t)
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	a := newCAServer(t, defaultConfig())
	work, keys := t.TempDir(), t.TempDir()
	hostKey := newSSHKeyPair(t, keys, "ssh_host_ed25519_key")
	newHostKey := newSSHKeyPair(t, keys, "ssh_host_new_ed25519_key")
	bare := newSSHKeyPair(t, keys, "ssh_host_bare_ed25519_key")
	userKey := newSSHKeyPair(t, keys, "user")
	authorized := filepath.Join(work, "authorized_keys")
	if err := os.WriteFile(authorized, []byte(userKey.pub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const name = "sshd.example.test"
	mustKith := func(args ...string) string {
		t.Helper()
		out, errOut, err := kithCmd(args...)
		if err != nil {
			t.Fatalf("kith %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}

	// The host side, as root on it runs it: publish the host key, get its
	// certificate beside it.
	mustKith("id", "claim", "host:"+name, "--ssh-key", hostKey.path, "--server", a.srv.URL)
	out := mustKith("ssh-cert", "host:"+name, "--ssh-key", hostKey.path, "--server", a.srv.URL)
	certFile := hostKey.path + "-cert.pub"
	if !strings.Contains(out, "wrote "+certFile) || !strings.Contains(out, "principals "+name+",") {
		t.Fatalf("kith ssh-cert for the host said:\n%s", out)
	}
	// A person's handle gets no host certificate and a host no user
	// certificate: the file ssh-keygen reads is a host certificate.
	if desc, err := exec.Command("ssh-keygen", "-L", "-f", certFile).CombinedOutput(); err != nil || !strings.Contains(string(desc), "host certificate") {
		t.Fatalf("ssh-keygen -L: %v\n%s", err, desc)
	}

	// The client side: nothing but the @cert-authority line.
	line := mustKith("ssh-ca-key", "--known-hosts", "--server", a.srv.URL)
	if !strings.HasPrefix(line, "@cert-authority *.example.test,[*.example.test]:* ssh-ed25519 ") {
		t.Fatalf("kith ssh-ca-key --known-hosts printed %q", line)
	}
	knownHosts, krlFile := filepath.Join(work, "known_hosts"), filepath.Join(work, "host.krl")
	os.WriteFile(knownHosts, []byte(line), 0o644)
	refreshKRL := func() {
		t.Helper()
		mustKith("krl", "--server", a.srv.URL, "--out", krlFile)
	}
	refreshKRL()
	connect := func(port int) (bool, string) {
		t.Helper()
		c := exec.Command("ssh", "-F", "/dev/null", "-i", userKey.path, "-p", fmt.Sprint(port),
			"-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-o", "ConnectTimeout=30",
			"-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile="+knownHosts, "-o", "GlobalKnownHostsFile=/dev/null",
			"-o", "CheckHostIP=no", "-o", "HostKeyAlias="+name, "-o", "RevokedHostKeys="+krlFile,
			me.Username+"@127.0.0.1", "echo", "in")
		out, err := c.CombinedOutput()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 255 {
				t.Fatalf("ssh: %v\n%s", err, out)
			}
			return false, string(out)
		}
		return strings.Contains(string(out), "in"), string(out)
	}

	certified := startSSHD(t, hostKey.path, "HostCertificate "+certFile, "AuthorizedKeysFile "+authorized)
	if ok, out := connect(certified.port); !ok {
		t.Fatalf("ssh did not connect to the host whose certificate Kith issued:\n%s", out)
	}
	uncertified := startSSHD(t, bare.path, "AuthorizedKeysFile "+authorized)
	if ok, out := connect(uncertified.port); ok || !strings.Contains(out, "Host key verification failed") {
		t.Fatalf("a host without a certificate: connected %v:\n%s", ok, out)
	}

	// The host rotates its key: the new one, co-signed by the old, and
	// the old revoked. Until the KRL is refreshed ssh still takes the old
	// certificate (so that what refuses it next is the list).
	a.add("host:"+name, newHostKey, hostKey, false)
	a.revoke("host:"+name, hostKey, newHostKey)
	if ok, out := connect(certified.port); !ok {
		t.Fatalf("the old certificate stopped working before the KRL was refreshed:\n%s", out)
	}
	refreshKRL()
	if !keygenRevoked(t, krlFile, certFile) {
		t.Fatal("ssh-keygen -Q does not find the old host certificate revoked")
	}
	if ok, out := connect(certified.port); ok || !strings.Contains(out, "Host key verification failed") {
		t.Fatalf("the revoked host certificate: connected %v:\n%s", ok, out)
	}
	// The new key's certificate works, and the log verifies with both.
	mustKith("ssh-cert", "host:"+name, "--ssh-key", newHostKey.path, "--server", a.srv.URL)
	rotated := startSSHD(t, newHostKey.path, "HostCertificate "+newHostKey.path+"-cert.pub", "AuthorizedKeysFile "+authorized)
	if ok, out := connect(rotated.port); !ok {
		t.Fatalf("the new host key's certificate:\n%s", out)
	}

	// The host is reinstalled and its keys are lost: no old key can
	// co-sign the new one, and the name is held. The operator releases
	// it: the lost key's certificate is revoked with its link, and the
	// reinstalled host claims the name and gets a certificate again.
	reinstalled := newSSHKeyPair(t, keys, "ssh_host_reinstalled_ed25519_key")
	if _, errOut, err := kithCmd("id", "claim", "host:"+name, "--ssh-key", reinstalled.path, "--server", a.srv.URL); err == nil || !strings.Contains(err.Error()+errOut, "handle_taken") {
		t.Fatalf("a claim of the held name: %v\n%s", err, errOut)
	}
	out = mustKith("host", "release", name, "--reason", "reinstalled, keys lost", "--database-url", a.dbURL)
	if !strings.Contains(out, "may be claimed again") {
		t.Fatalf("kith host release said:\n%s", out)
	}
	refreshKRL()
	if ok, out := connect(rotated.port); ok || !strings.Contains(out, "Host key verification failed") {
		t.Fatalf("the released key's certificate: connected %v:\n%s", ok, out)
	}
	mustKith("id", "claim", "host:"+name, "--ssh-key", reinstalled.path, "--server", a.srv.URL)
	mustKith("ssh-cert", "host:"+name, "--ssh-key", reinstalled.path, "--server", a.srv.URL)
	back := startSSHD(t, reinstalled.path, "HostCertificate "+reinstalled.path+"-cert.pub", "AuthorizedKeysFile "+authorized)
	if ok, out := connect(back.port); !ok {
		t.Fatalf("the reinstalled host's certificate:\n%s", out)
	}
	a.integrate()
	mustKith("verify-log", "--server", a.srv.URL)
}
