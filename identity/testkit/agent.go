// agent.go: an ssh-agent of a test's own, for the clients that hand it
// certificates, and a look at what it holds.

package testkit

import (
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/ssh/agent"
)

// SSHAgent starts an ssh-agent on a socket in a temporary directory and
// returns the socket's path (SSH_AUTH_SOCK); the agent is stopped when t
// ends. It skips t when ssh-agent is missing (fails it under CI=true).
func SSHAgent(t testing.TB) string {
	t.Helper()
	bin := Tool(t, "ssh-agent")
	sock := filepath.Join(t.TempDir(), "agent.sock")
	cmd := exec.Command(bin, "-D", "-a", sock)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start ssh-agent: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	Eventually(t, 30*time.Second, "ssh-agent listens on "+sock, func() bool {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return sock
}

// AgentKeys lists the keys and certificates the agent at sock holds.
func AgentKeys(t testing.TB, sock string) []*agent.Key {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("ssh-agent: %v", err)
	}
	defer c.Close()
	keys, err := agent.NewClient(c).List()
	if err != nil {
		t.Fatalf("ssh-agent: list: %v", err)
	}
	return keys
}
