package client_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/web/api/client"
)

// TestAgentForgetsTheCertificateAtExpiry: a certificate added to the
// agent is there with its key, not the key alone, and the agent drops it
// once it expires; a key protected by a passphrase, a .pub file and an
// environment without an agent are refused, each with its reason.
func TestAgentForgetsTheCertificateAtExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := newServer(t)
	c := srv.client()
	u := newUser(t)
	sock := testkit.SSHAgent(t)
	key := u.sshKey("", "id_ed25519")
	if _, err := c.Claim(ctx, "alice", key); err != nil {
		t.Fatal(err)
	}
	cert, err := c.Certificate(ctx, "alice", key, client.CertificateRequest{Validity: "4s"})
	if err != nil {
		t.Fatal(err)
	}
	tools := &client.Tools{Env: append(u.tools.Env, "SSH_AUTH_SOCK="+sock)}
	life, err := tools.AddCertificate(ctx, key.File, cert.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if life <= 0 || life > 4*time.Second {
		t.Errorf("lifetime %s, want at most the 4s validity", life)
	}
	held := testkit.AgentKeys(t, sock)
	if len(held) != 1 || !bytes.Equal(held[0].Blob, cert.Cert.Marshal()) {
		t.Fatalf("the agent holds %d keys %v, want the certificate only", len(held), held)
	}
	testkit.Eventually(t, 2*time.Minute, "the agent forgets the expired certificate", func() bool {
		return len(testkit.AgentKeys(t, sock)) == 0
	})

	locked := filepath.Join(t.TempDir(), "locked")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "a passphrase", "-f", locked).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	if _, err := tools.AddCertificate(ctx, locked, cert.Cert); !errors.Is(err, client.ErrKeyEncrypted) {
		t.Errorf("passphrase-protected key: %v, want ErrKeyEncrypted", err)
	}
	if _, err := tools.AddCertificate(ctx, key.File+".pub", cert.Cert); err == nil {
		t.Error("a .pub file: added")
	}
	other := u.sshKey(t.TempDir(), "other")
	if _, err := tools.AddCertificate(ctx, other.File, cert.Cert); err == nil {
		t.Error("another key's file: added")
	}
	if _, err := u.tools.AddCertificate(ctx, key.File, cert.Cert); !errors.Is(err, client.ErrNoAgent) {
		t.Errorf("no SSH_AUTH_SOCK: %v, want ErrNoAgent", err)
	}
	if n := len(testkit.AgentKeys(t, sock)); n != 0 {
		t.Errorf("the refused adds left %d keys in the agent", n)
	}
}

// TestAgentLifetimeIsTheValidityLeft: whole seconds, at least one.
func TestAgentLifetimeIsTheValidityLeft(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		before time.Time
		want   uint32
	}{
		{now.Add(16 * time.Hour), 16 * 3600},
		{now.Add(1500 * time.Millisecond), 1},
		{now, 1},
		{now.Add(-time.Hour), 1},
	} {
		if got := client.AgentLifetime(tt.before, now); got != tt.want {
			t.Errorf("AgentLifetime(now+%s) = %d, want %d", tt.before.Sub(now), got, tt.want)
		}
	}
}
