package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/subprocess"
	"github.com/kith-keyserver/kith/identity/testkit"
)

// rootOwnedDir makes a directory for the AuthorizedKeysCommand binary
// that sshd accepts: it and every directory above it owned by root and
// writable by nobody else (so not under /tmp, which anyone may write).
func rootOwnedDir(t *testing.T) string {
	t.Helper()
	for _, parent := range []string{"/run", "/var/lib", "/opt"} {
		fi, err := os.Stat(parent)
		if err != nil || fi.Mode().Perm()&0o022 != 0 {
			continue
		}
		dir, err := os.MkdirTemp(parent, "kith-sshd-")
		if err != nil {
			continue
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	t.Fatal("no root-owned directory that only root may write to")
	return ""
}

// TestSSHDLogsInOnlyWithProvenKeys runs a real sshd whose
// AuthorizedKeysCommand is kith authorized-keys against an in-process
// Kith API, as nobody with the cache directory the README has one make,
// and tries logins with proven, unlinked, claimed-only and revoked keys,
// then with the Kith server gone.
func TestSSHDLogsInOnlyWithProvenKeys(t *testing.T) {
	for _, tool := range []string{"sshd", "ssh", "ssh-keygen", "install"} {
		testkit.Tool(t, tool)
	}
	testkit.Root(t, "for sshd, which accepts an AuthorizedKeysCommand only in root-owned directories")
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		t.Fatal(err)
	}
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	// sshd wants its privilege separation directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}

	bin := rootOwnedDir(t)
	kithBin := filepath.Join(bin, "kith")
	if err := copyExecutable(kithBin); err != nil {
		t.Fatal(err)
	}

	a := newAPIServer(t)
	work := t.TempDir()
	keys := t.TempDir()
	proven := newSSHKeyPair(t, keys, "proven")
	unlinked := newSSHKeyPair(t, keys, "unlinked")
	claimed := newSSHKeyPair(t, keys, "claimed")
	revoked := newSSHKeyPair(t, keys, "revoked")
	a.claim("alice", proven)
	a.add("alice", claimed, proven, true)
	a.add("alice", revoked, proven, false)

	hostKey := filepath.Join(work, "host_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hostKey).CombinedOutput(); err != nil {
		t.Fatalf("host key: %v\n%s", err, out)
	}
	// The command runs as nobody, as in the README, so what it reads
	// sits where nobody can reach it, and its cache is made the
	// README's way.
	mapFile := filepath.Join(bin, "users.map")
	os.WriteFile(mapFile, []byte("# local user, Kith handle\n"+me.Username+" alice\n"), 0o644)
	cacheDir := filepath.Join(bin, "cache")
	if out, err := exec.Command("install", "-d", "-o", "nobody", "-m", "0700", cacheDir).CombinedOutput(); err != nil {
		t.Fatalf("install -d: %v\n%s", err, out)
	}
	const maxAge = time.Hour
	port := testkit.FreePort(t)
	config := filepath.Join(work, "sshd_config")
	cmd := fmt.Sprintf("%s authorized-keys --server %s --cache-dir %s --map %s --max-age %s --timeout 1s --fingerprint %%f %%u",
		kithBin, a.srv.URL, cacheDir, mapFile, maxAge)
	os.WriteFile(config, []byte(strings.Join([]string{
		"ListenAddress 127.0.0.1",
		"HostKey " + hostKey,
		"PidFile " + filepath.Join(work, "sshd.pid"),
		"AuthorizedKeysFile none",
		"AuthorizedKeysCommand " + cmd,
		"AuthorizedKeysCommandUser nobody",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"UsePAM no",
		"StrictModes no",
		"PermitRootLogin prohibit-password",
		"LogLevel VERBOSE",
		"",
	}, "\n")), 0o644)

	srv := exec.Command(sshd, "-D", "-e", "-f", config, "-p", fmt.Sprint(port))
	sshdLog := &testkit.SyncBuffer{}
	srv.Stdout, srv.Stderr = sshdLog, sshdLog
	if err := subprocess.Start(srv, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Kill()
		srv.Wait()
		if t.Failed() {
			t.Logf("sshd log:\n%s", sshdLog.String())
		}
	})
	listening := testkit.Poll(10*time.Second, func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if !listening {
		t.Fatalf("sshd did not listen on port %d:\n%s", port, sshdLog.String())
	}

	login := func(k sshKeyPair) bool {
		t.Helper()
		c := exec.Command("ssh", "-i", k.path, "-p", fmt.Sprint(port),
			"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
			"-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-o", "ConnectTimeout=10",
			"-F", "/dev/null", me.Username+"@127.0.0.1", "true")
		out, err := c.CombinedOutput()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 255 {
				t.Fatalf("ssh: %v\n%s", err, out)
			}
			return false
		}
		return true
	}

	if !login(proven) {
		t.Fatal("the proven key was refused")
	}
	if !login(revoked) {
		t.Fatal("the key proven by both signatures was refused before its revocation")
	}
	a.revoke("alice", revoked, proven)
	for _, tt := range []struct {
		name string
		key  sshKeyPair
	}{{"unlinked", unlinked}, {"claimed-only", claimed}, {"revoked", revoked}} {
		if login(tt.key) {
			t.Errorf("the %s key logged in", tt.name)
		}
	}

	// The server goes away: the cached answer still lets the proven key
	// in, with a warning in sshd's log, until it is older than max-age.
	if !login(proven) { // refreshes the cache
		t.Fatal("the proven key was refused")
	}
	if fi, err := os.Stat(filepath.Join(cacheDir, "alice.keys")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != nobodyUID(t) {
		t.Fatalf("the command, as nobody, did not cache its answer: %v", err)
	}
	a.srv.Close()
	if !login(proven) {
		t.Fatal("with the server down, the cached answer did not let the proven key in")
	}
	if !testkit.PollEvery(5*time.Second, 20*time.Millisecond, func() bool {
		return strings.Contains(sshdLog.String(), "serving the cached answer instead of a live one")
	}) {
		t.Fatal("sshd's log has no warning that a cached answer was served")
	}
	if login(revoked) {
		t.Fatal("with the server down, the revoked key logged in")
	}
	old := time.Now().Add(-maxAge - time.Minute)
	if err := os.Chtimes(filepath.Join(cacheDir, "alice.keys"), old, old); err != nil {
		t.Fatal(err)
	}
	if login(proven) {
		t.Fatal("the proven key logged in on a cached answer older than max-age")
	}
}

// nobodyUID is the uid of the user nobody.
func nobodyUID(t *testing.T) uint32 {
	t.Helper()
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("no user nobody: %v", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(uid)
}
