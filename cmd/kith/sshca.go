// sshca.go: the clients of a Kith server (kith id, known-hosts,
// authorized-keys, ssh-cert, ssh-ca-key, krl, verify-log) share their
// --server flag and its checks here; and the clients of the SSH
// certificate authority: `kith ssh-cert` gets a certificate for a proven
// key and writes it beside the key, where ssh finds it; `kith ssh-ca-key`
// prints the CA's key for sshd's TrustedUserCAKeys; `kith krl` fetches
// the revocation list for sshd's RevokedKeys, checks it and installs it
// atomically, for a cron job. The work is package web/api/client's.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/kith-keyserver/kith/ssh"
	"github.com/kith-keyserver/kith/web/api/client"
)

// serverFlag registers --server (default $KITH_SERVER) on fs.
func serverFlag(fs *flag.FlagSet, env *environment) *string {
	return fs.String("server", getenv(env, idServerEnv), "Kith server `URL` (env "+idServerEnv+")")
}

// newServerClient checks a --server value and returns a client for it
// whose requests take at most timeout (0: the client's default).
func newServerClient(server string, timeout time.Duration) (*client.Client, error) {
	if server == "" {
		return nil, fmt.Errorf("%w: no server: give --server URL or set %s", errUsage, idServerEnv)
	}
	c, err := client.New(server, client.Options{Timeout: timeout, UserAgent: "kith/" + version})
	if err != nil {
		return nil, fmt.Errorf("%w: --server %q is not an http(s) URL", errUsage, server)
	}
	return c, nil
}

// newToolFlags returns a client command's flag set (newFlagSetWith),
// whose help is synopsis and summary.
func newToolFlags(env *environment, name, synopsis, summary string) *flag.FlagSet {
	return newFlagSetWith(env, name, func(w io.Writer) {
		fmt.Fprintf(w, "Usage: kith %s\n\n%s\n\nFlags:\n", synopsis, summary)
	})
}

// parseInterleaved parses flags that may come before, between or after
// the positional arguments, which it returns.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// getenv reads a variable of the command's environment.
func getenv(env *environment, name string) string {
	for _, kv := range env.environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// caKeys reads the CA keys to expect from file (lines as
// TrustedUserCAKeys holds them); no file: the server's.
func caKeys(ctx context.Context, c *client.Client, tools *client.Tools, file string) ([]gossh.PublicKey, error) {
	if file == "" {
		return c.CAKeys(ctx)
	}
	data, err := os.ReadFile(tools.ExpandHome(file))
	if err != nil {
		return nil, fmt.Errorf("--ca-key: %w", err)
	}
	return client.ParseCAKeys(data)
}

func runSSHCert(ctx context.Context, env *environment, args []string) error {
	fs := newToolFlags(env, "ssh-cert", "ssh-cert HANDLE --ssh-key FILE [--device [--provider NAME]] [--validity D] [--principals P,...] [--ca-key FILE]",
		"Gets an SSH user certificate for a key proven for HANDLE, signing the server's statement with\n"+
			"ssh-keygen -Y sign, and writes it to FILE-cert.pub, where ssh looks for it. With --device the key\n"+
			"need not be linked: a login at the server's OpenID provider, on any other device, approves it\n"+
			"(the OAuth 2.0 device authorization grant): kith shows a code to enter there and waits.")
	server := serverFlag(fs, env)
	keyFile := fs.String("ssh-key", "", "the SSH key `file` to certify: a private key, or a .pub file whose key is in the agent")
	validity := fs.Duration("validity", 0, "how long the certificate is to be valid (a `duration`; default: the server's, 16h unless configured)")
	principals := fs.String("principals", "", "comma-separated `principals` to certify, a subset of the identity's (default: all)")
	caFile := fs.String("ca-key", "", "`file` with the CA key to expect (as kith ssh-ca-key prints it); default: the server's")
	device := fs.Bool("device", false, "have a login at the server's OpenID provider, on another device, approve the certificate (for a host without a browser)")
	provider := fs.String("provider", "", "with --device: the server's OpenID provider to log in at, by `name` (default: its first)")
	toAgent := fs.Bool("agent", true, "also add the certificate to the ssh-agent (SSH_AUTH_SOCK), which forgets it when it expires (ssh-add -t)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *keyFile == "" {
		return misuse(env, "ssh-cert", "takes HANDLE and --ssh-key FILE")
	}
	c, err := newServerClient(*server, 0)
	if err != nil {
		return err
	}
	tools := &client.Tools{Env: env.environ}
	s, err := tools.SSHKey(ctx, *keyFile)
	if err != nil {
		return err
	}
	var req client.CertificateRequest // no CA keys: the server's, fetched after
	if *caFile != "" {
		if req.CAKeys, err = caKeys(ctx, c, tools, *caFile); err != nil {
			return err
		}
	}
	if *validity != 0 {
		req.Validity = validity.String()
	}
	for _, p := range strings.Split(*principals, ",") {
		if p = strings.TrimSpace(p); p != "" {
			req.Principals = append(req.Principals, p)
		}
	}
	var cert *client.Certificate
	if *device {
		cert, err = c.DeviceCertificate(ctx, pos[0], s, client.DeviceRequest{CertificateRequest: req, Provider: *provider,
			Show: func(d client.DeviceCode) {
				fmt.Fprintf(env.stdout, "To approve a certificate for %s as %s, open on any device\n  %s\nand enter the code\n  %s\n", s.ID, pos[0], d.VerificationURI, d.UserCode)
				if d.VerificationURIComplete != "" {
					fmt.Fprintf(env.stdout, "(or open %s)\n", d.VerificationURIComplete)
				}
				fmt.Fprintf(env.stdout, "Log in there as an account linked to %s (at %s). Waiting until %s...\n", pos[0], d.Provider, d.Expires.Local().Format(time.Kitchen))
			}})
	} else {
		cert, err = c.Certificate(ctx, pos[0], s, req)
	}
	if err != nil {
		return err
	}
	out := client.CertificateFile(s.File)
	if err := client.WriteAtomic(out, []byte(cert.Line+"\n"), 0o644); err != nil {
		return err
	}
	_, before := ssh.CertificateValidity(cert.Cert)
	fmt.Fprintf(env.stdout, "wrote %s: principals %s, valid until %s, serial %d\n", out, strings.Join(cert.Cert.ValidPrincipals, ","),
		before.Local().Format(time.RFC3339), cert.Cert.Serial)
	for _, g := range cert.Grants {
		fmt.Fprintf(env.stdout, "  principal %s: granted by the login's claim %s = %q\n", g.Principal, g.Claim, g.Value)
	}
	fmt.Fprintf(env.stdout, "  published in the log: %s\n", cert.Log)
	// A host certificate is for sshd's HostCertificate: an agent holds
	// keys to log in with, never a host's.
	if *toAgent && cert.Cert.CertType == gossh.UserCert {
		addToAgent(ctx, env, tools, s.File, cert.Cert)
	}
	return nil
}

// addToAgent adds a certificate written beside keyFile to the ssh-agent,
// to be forgotten when it expires, and says what it did. A certificate
// the agent cannot take is no failure: it is written, and ssh finds it
// beside the key.
func addToAgent(ctx context.Context, env *environment, tools *client.Tools, keyFile string, cert *gossh.Certificate) {
	life, err := tools.AddCertificate(ctx, keyFile, cert)
	switch {
	case err == nil:
		fmt.Fprintf(env.stdout, "  added to the ssh-agent for %s, until it expires\n", life)
	case errors.Is(err, client.ErrNoAgent):
		// Nothing to add to.
	case errors.Is(err, client.ErrKeyEncrypted):
		_, before := ssh.CertificateValidity(cert)
		fmt.Fprintf(env.stderr, "kith: not added to the ssh-agent: %s is protected by a passphrase; add it with: ssh-add -t %d %s\n",
			keyFile, client.AgentLifetime(before, time.Now()), keyFile)
	default:
		fmt.Fprintf(env.stderr, "kith: not added to the ssh-agent: %v\n", err)
	}
}

func runSSHCAKey(ctx context.Context, env *environment, args []string) error {
	fs := newToolFlags(env, "ssh-ca-key", "ssh-ca-key [--server URL] [--known-hosts]",
		"Prints the server's SSH CA key: the line for the file sshd's TrustedUserCAKeys names; with\n"+
			"--known-hosts, the @cert-authority line for ssh's known_hosts that trusts the host\n"+
			"certificates the CA issues, for the host names the server certifies.")
	server := serverFlag(fs, env)
	knownHosts := fs.Bool("known-hosts", false, "print the @cert-authority line for known_hosts instead")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return misuse(env, "ssh-ca-key", "takes no arguments, got %q", pos)
	}
	c, err := newServerClient(*server, 0)
	if err != nil {
		return err
	}
	getLine := c.CALine
	if *knownHosts {
		getLine = c.CertAuthorityLine
	}
	line, err := getLine(ctx)
	if err != nil {
		return err
	}
	_, err = env.stdout.Write(line)
	return err
}

func runKRL(ctx context.Context, env *environment, args []string) error {
	fs := newToolFlags(env, "krl", "krl --server URL --out FILE [--ca-key FILE]",
		"Fetches the server's SSH certificate revocation list, checks that it parses and names the CA,\n"+
			"and replaces FILE (sshd's RevokedKeys) atomically. Run it from cron; on any failure FILE stays.")
	server := serverFlag(fs, env)
	out := fs.String("out", "", "the KRL `file` to write (sshd_config's RevokedKeys)")
	caFile := fs.String("ca-key", "", "`file` with the CA key the list must name (e.g. the TrustedUserCAKeys file); default: the server's")
	timeout := fs.Duration("timeout", 30*time.Second, "how long each fetch may take")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 || *out == "" {
		return misuse(env, "krl", "takes --server URL and --out FILE")
	}
	c, err := newServerClient(*server, *timeout)
	if err != nil {
		return err
	}
	cas, err := caKeys(ctx, c, &client.Tools{Env: env.environ}, *caFile)
	if err != nil {
		return err
	}
	krl, err := c.KRL(ctx, cas)
	if err == nil {
		err = krl.Install(*out)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "wrote %s: %d revoked certificates of CA %s (version %d)\n", *out, krl.Revoked(), ssh.FingerprintOf(krl.CA), krl.List.Version)
	return nil
}
