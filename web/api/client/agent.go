// agent.go: handing a certificate to the user's ssh-agent with a lifetime
// that ends when the certificate does (ssh-add -t), so that the agent
// forgets it at expiry instead of offering an expired certificate until
// sshd's MaxAuthTries locks the user out.

package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/kith-keyserver/kith/ssh"
)

// ErrNoAgent says the environment names no ssh-agent (SSH_AUTH_SOCK).
var ErrNoAgent = errors.New("no ssh-agent: SSH_AUTH_SOCK is not set")

// ErrKeyEncrypted says the key file is protected by a passphrase, which
// AddCertificate does not ask for: ssh-add -t can add the key and its
// certificate instead.
var ErrKeyEncrypted = errors.New("the key file is protected by a passphrase")

// AgentLifetime is how long an agent is to keep a certificate valid
// until before: the whole seconds left, at least one.
func AgentLifetime(before, now time.Time) uint32 {
	left := before.Sub(now) / time.Second
	switch {
	case left < 1:
		return 1
	case left > 1<<31:
		return 1 << 31
	}
	return uint32(left)
}

// AddCertificate adds the certificate of the key in file (a private key
// file without a passphrase) to the ssh-agent of the tools' environment,
// with a lifetime that ends at the certificate's expiry, and returns that
// lifetime. It reads the private key only to hand it to the agent, as
// ssh-add does; the key itself is not added on its own. A .pub file (a
// key only the agent holds) cannot be given a certificate this way: the
// agent protocol adds a certificate with its private key.
func (t *Tools) AddCertificate(ctx context.Context, file string, cert *gossh.Certificate) (time.Duration, error) {
	sock := t.getenv("SSH_AUTH_SOCK")
	if sock == "" {
		return 0, ErrNoAgent
	}
	file = t.ExpandHome(file)
	if strings.HasSuffix(file, ".pub") {
		return 0, fmt.Errorf("add the certificate to the agent: %s is a public key: the agent takes a certificate with its private key", file)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, fmt.Errorf("add the certificate to the agent: %w", err)
	}
	key, err := gossh.ParseRawPrivateKey(data)
	if _, ok := errors.AsType[*gossh.PassphraseMissingError](err); ok {
		return 0, fmt.Errorf("add the certificate to the agent: %s: %w", file, ErrKeyEncrypted)
	}
	if err != nil {
		return 0, fmt.Errorf("add the certificate to the agent: %s: %w", file, err)
	}
	signer, err := gossh.NewSignerFromKey(key)
	if err != nil {
		return 0, fmt.Errorf("add the certificate to the agent: %s: %w", file, err)
	}
	if !ssh.SameKey(signer.PublicKey(), cert.Key) {
		return 0, fmt.Errorf("add the certificate to the agent: the certificate is not for the key in %s", file)
	}
	_, before := ssh.CertificateValidity(cert)
	life := AgentLifetime(before, time.Now())
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return 0, fmt.Errorf("add the certificate to the agent: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	err = agent.NewClient(conn).Add(agent.AddedKey{PrivateKey: key, Certificate: cert, Comment: cert.KeyId, LifetimeSecs: life})
	if err != nil {
		return 0, fmt.Errorf("add the certificate to the agent: %w", err)
	}
	return time.Duration(life) * time.Second, nil
}
