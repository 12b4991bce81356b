package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/subprocess"
	"github.com/kith-keyserver/kith/identity/testkit"
)

// sshdHost is a real sshd on loopback with one host key, letting in the
// running user with one key.
type sshdHost struct {
	port int
	cmd  *exec.Cmd
	log  *testkit.SyncBuffer
}

// requireSSHDAsRoot needs sshd, ssh, ssh-keygen and the other tools, and
// root, which sshd needs to log the running user in: it skips without
// them, and fails when CI=true.
func requireSSHDAsRoot(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range append([]string{"sshd", "ssh", "ssh-keygen"}, tools...) {
		testkit.Tool(t, tool)
	}
	testkit.Root(t, "to run sshd, which logs users in only as root")
}

// startSSHD runs sshd on a loopback port with hostKey and the config
// lines (which win over the defaults here, as sshd takes a keyword's first
// value); it stops with the test.
func startSSHD(t *testing.T, hostKey string, lines ...string) *sshdHost {
	t.Helper()
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil { // privilege separation
		t.Fatal(err)
	}
	work := t.TempDir()
	port := testkit.FreePort(t)
	config := filepath.Join(work, "sshd_config")
	os.WriteFile(config, []byte(strings.Join(append(lines,
		"ListenAddress 127.0.0.1",
		"HostKey "+hostKey,
		"PidFile "+filepath.Join(work, "sshd.pid"),
		"AuthorizedKeysFile none",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"UsePAM no",
		"StrictModes no",
		"PermitRootLogin prohibit-password",
		"LogLevel VERBOSE",
		"",
	), "\n")), 0o644)
	h := &sshdHost{port: port, log: &testkit.SyncBuffer{}}
	h.cmd = exec.Command(sshd, "-D", "-e", "-f", config, "-p", fmt.Sprint(port))
	h.cmd.Stdout, h.cmd.Stderr = h.log, h.log
	if err := subprocess.Start(h.cmd, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.stop()
		if t.Failed() {
			t.Logf("sshd (port %d) log:\n%s", port, h.log.String())
		}
	})
	if !testkit.PollEvery(30*time.Second, 20*time.Millisecond, func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		t.Fatalf("sshd did not listen:\n%s", h.log.String())
	}
	return h
}

func (h *sshdHost) stop() {
	if h.cmd.ProcessState == nil {
		h.cmd.Process.Kill()
		h.cmd.Wait()
	}
}

// TestKnownHostsCommandWithRealSSH: a real sshd with its own host key; the
// host key published as host:NAME through the real kith binary (kith id
// claim, signed by the host key); then plain ssh with
// KnownHostsCommand="kith known-hosts --server URL %H", strict host key
// checking and no known_hosts file connects. When sshd comes back with
// another host key, ssh refuses; once the new key is published (co-signed
// by the old) and the old revoked, ssh connects again, and the old key is
// refused. With the server gone, ssh refuses (fail closed).
func TestKnownHostsCommandWithRealSSH(t *testing.T) {
	requireSSHDAsRoot(t)
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	kithBin := filepath.Join(bin, "kith")
	if err := copyExecutable(kithBin); err != nil {
		t.Fatal(err)
	}
	a := newAPIServer(t)
	keys := t.TempDir()
	// Host keys as sshd keeps them: a private key with its .pub beside.
	hostKey1 := newSSHKeyPair(t, keys, "ssh_host_ed25519_key")
	hostKey2 := newSSHKeyPair(t, keys, "ssh_host_new_ed25519_key")
	stranger := newSSHKeyPair(t, keys, "stranger")
	userKey := newSSHKeyPair(t, keys, "user")
	authorized := filepath.Join(keys, "authorized_keys")
	if err := os.WriteFile(authorized, []byte(userKey.pub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const name = "sshd.example.test"

	kith := func(args ...string) (string, string, error) {
		t.Helper()
		c := exec.Command(kithBin, args...)
		c.Env = append(os.Environ(), "KITH_SERVER=")
		var out, errb bytes.Buffer
		c.Stdout, c.Stderr = &out, &errb
		err := c.Run()
		return out.String(), errb.String(), err
	}
	mustKith := func(args ...string) string {
		t.Helper()
		out, errOut, err := kith(args...)
		if err != nil {
			t.Fatalf("kith %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}
	// connect runs ssh to the host as the running user and reports
	// whether it got in, and ssh's messages.
	connect := func(h *sshdHost) (bool, string) {
		t.Helper()
		c := exec.Command("ssh", "-F", "/dev/null", "-i", userKey.path, "-p", fmt.Sprint(h.port),
			"-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-o", "ConnectTimeout=30",
			"-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=/dev/null", "-o", "GlobalKnownHostsFile=/dev/null",
			"-o", "CheckHostIP=no", "-o", "HostKeyAlias="+name,
			"-o", "KnownHostsCommand="+kithBin+" known-hosts --server "+a.srv.URL+" %H",
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
	wantRefusedFor := func(what string, h *sshdHost, reason string) {
		t.Helper()
		ok, out := connect(h)
		if ok {
			t.Fatalf("%s: ssh connected:\n%s", what, out)
		}
		if !strings.Contains(out, reason) {
			t.Fatalf("%s: ssh failed, but not with %q:\n%s", what, reason, out)
		}
	}
	wantRefused := func(what string, h *sshdHost) {
		t.Helper()
		wantRefusedFor(what, h, "Host key verification failed")
	}

	host := startSSHD(t, hostKey1.path, "AuthorizedKeysFile "+authorized)
	// Nothing published yet: ssh knows no key and refuses.
	wantRefused("before the host key is published", host)

	// A stranger cannot publish a name outside the operator's list.
	if out, errOut, err := kith("id", "claim", "host:github.com", "--ssh-key", stranger.path, "--server", a.srv.URL); err == nil || !strings.Contains(errOut, "host_not_allowed") {
		t.Fatalf("a stranger's claim of host:github.com: %v\n%s%s", err, out, errOut)
	}

	// Root on the host publishes its key, signing with the host key.
	out := mustKith("id", "claim", "host:"+name, "--ssh-key", hostKey1.path, "--server", a.srv.URL)
	if !strings.Contains(out, "claimed host:"+name) || !strings.Contains(out, "/hosts/"+name+".known_hosts") {
		t.Fatalf("kith id claim said:\n%s", out)
	}
	if got, want := mustKith("known-hosts", "--server", a.srv.URL, name), name+" "+keyOnlyLine(hostKey1.pub)+"\n"; got != want {
		t.Fatalf("kith known-hosts printed %q, want %q", got, want)
	}
	if ok, out := connect(host); !ok {
		t.Fatalf("ssh did not connect to the host whose key is published:\n%s", out)
	}

	// The host key changes (a reinstalled or impersonated host): refused.
	host.stop()
	host2 := startSSHD(t, hostKey2.path, "AuthorizedKeysFile "+authorized)
	wantRefused("after the host key changed", host2)

	// The operator rotates: the new key, co-signed by the old, then the
	// old one revoked. The new host connects, the old key is refused.
	mustKith("id", "add", "host:"+name, "--ssh-key", hostKey2.path, "--by-ssh-key", hostKey1.path, "--server", a.srv.URL)
	mustKith("id", "revoke", "host:"+name, hostKey1.path+".pub", "--by-ssh-key", hostKey2.path, "--server", a.srv.URL)
	if got := mustKith("id", "show", "host:"+name, "--server", a.srv.URL); !strings.Contains(got, "revoked") || !strings.Contains(got, "proven") {
		t.Errorf("kith id show after the rotation:\n%s", got)
	}
	if ok, out := connect(host2); !ok {
		t.Fatalf("ssh did not connect with the rotated key published:\n%s", out)
	}
	host1again := startSSHD(t, hostKey1.path, "AuthorizedKeysFile "+authorized)
	wantRefused("with the revoked host key", host1again)

	// The server goes away: kith known-hosts prints nothing and fails, and
	// ssh gives up on the connection.
	a.srv.Close()
	if out, _, err := kith("known-hosts", "--server", a.srv.URL, "--timeout", "5s", name); err == nil || out != "" {
		t.Fatalf("with the server gone, kith known-hosts printed %q and returned %v", out, err)
	}
	wantRefusedFor("with the server gone", host2, "KnownHostsCommand failed")
}
