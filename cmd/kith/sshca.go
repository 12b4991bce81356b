// sshca.go: the clients of the SSH certificate authority. `kith ssh-cert`
// gets a certificate for a key proven for an identity (signing the
// server's statement with ssh-keygen -Y sign, as kith id does) and writes
// it beside the key, where ssh finds it; `kith ssh-ca-key` prints the
// CA's key for sshd's TrustedUserCAKeys; `kith krl` fetches the
// revocation list for sshd's RevokedKeys, checks it and installs it
// atomically, for a cron job.

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/ssh"
	"github.com/kith-keyserver/kith/web/api"
)

// serverFlag registers --server (default $KITH_SERVER) on fs.
func serverFlag(fs *flag.FlagSet, env *environment) *string {
	return fs.String("server", getenv(env, idServerEnv), "Kith server `URL` (env "+idServerEnv+")")
}

// newServerClient checks a --server value and returns a client for it.
func newServerClient(env *environment, server string, timeout time.Duration) (*idClient, error) {
	if server == "" {
		return nil, fmt.Errorf("%w: no server: give --server URL or set %s", errUsage, idServerEnv)
	}
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: --server %q is not an http(s) URL", errUsage, server)
	}
	return &idClient{env: env, server: strings.TrimSuffix(server, "/"), http: &http.Client{Timeout: timeout}}, nil
}

// newToolFlags returns a client command's flag set (newFlagSetWith),
// whose help is synopsis and summary.
func newToolFlags(env *environment, name, synopsis, summary string) *flag.FlagSet {
	return newFlagSetWith(env, name, func(w io.Writer) {
		fmt.Fprintf(w, "Usage: kith %s\n\n%s\n\nFlags:\n", synopsis, summary)
	})
}

func runSSHCert(ctx context.Context, env *environment, args []string) error {
	fs := newToolFlags(env, "ssh-cert", "ssh-cert HANDLE --ssh-key FILE [--validity D] [--principals P,...] [--ca-key FILE]",
		"Gets an SSH user certificate for a key proven for HANDLE, signing the server's statement with\n"+
			"ssh-keygen -Y sign, and writes it to FILE-cert.pub, where ssh looks for it.")
	server := serverFlag(fs, env)
	keyFile := fs.String("ssh-key", "", "the SSH key `file` to certify: a private key, or a .pub file whose key is in the agent")
	validity := fs.Duration("validity", 0, "how long the certificate is to be valid (a `duration`; default: the server's, 16h unless configured)")
	principals := fs.String("principals", "", "comma-separated `principals` to certify, a subset of the identity's (default: all)")
	caFile := fs.String("ca-key", "", "`file` with the CA key to expect (as kith ssh-ca-key prints it); default: the server's")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *keyFile == "" {
		return misuse(env, "ssh-cert", "takes HANDLE and --ssh-key FILE")
	}
	c, err := newServerClient(env, *server, 30*time.Second)
	if err != nil {
		return err
	}
	handle := pos[0]
	s, err := c.sshSigner(ctx, *keyFile)
	if err != nil {
		return err
	}
	stmt, err := c.challenge(ctx, string(identity.PurposeCertificate), handle, s.pub)
	if err != nil {
		return err
	}
	sig, err := c.sign(ctx, s, stmt)
	if err != nil {
		return err
	}
	req := api.CertificateRequest{Statement: stmt, Signature: sig}
	if *validity != 0 {
		req.Validity = validity.String()
	}
	if *principals != "" {
		for _, p := range strings.Split(*principals, ",") {
			if p = strings.TrimSpace(p); p != "" {
				req.Principals = append(req.Principals, p)
			}
		}
	}
	var resp api.CertificateResponse
	if err := c.call(ctx, "get a certificate for "+s.id, http.MethodPost, "/api/v1/ssh/certificates", handle, req, &resp); err != nil {
		return certHint(err, handle, *keyFile)
	}
	// Check what came back before writing it: a certificate for this
	// key, signed by the CA this client expects.
	ca, err := c.expectedCA(ctx, *caFile)
	if err != nil {
		return err
	}
	k, err := ssh.ParseAuthorizedKey([]byte(resp.Certificate))
	if err != nil || k.Cert == nil {
		return fmt.Errorf("the server's certificate does not parse: %v", err)
	}
	cert, err := ssh.ParseUserCertificate(k.Cert.Marshal())
	if err != nil {
		return fmt.Errorf("the server's certificate: %w", err)
	}
	mine, err := ssh.ParseAuthorizedKey([]byte(s.pub))
	if err != nil {
		return err
	}
	if !ssh.SameKey(cert.Key, mine.Public) {
		return fmt.Errorf("the server certified another key than %s", s.id)
	}
	if !caAmong(cert.SignatureKey, ca) {
		return fmt.Errorf("the certificate is signed by %s, not by the CA expected", ssh.FingerprintOf(cert.SignatureKey))
	}
	out := strings.TrimSuffix(s.file, ".pub") + "-cert.pub"
	if err := writeAtomic(out, []byte(resp.Certificate+"\n"), 0o644); err != nil {
		return err
	}
	_, before := ssh.CertificateValidity(cert)
	fmt.Fprintf(env.stdout, "wrote %s: principals %s, valid until %s, serial %d\n", out, strings.Join(cert.ValidPrincipals, ","),
		before.Local().Format(time.RFC3339), cert.Serial)
	fmt.Fprintf(env.stdout, "  published in the log: %s%s\n", c.server, resp.Log)
	return nil
}

// certHint gives a refusal of a certificate request the hint that fits
// it.
func certHint(err error, handle, keyFile string) error {
	var r *refusal
	if !errors.As(err, &r) {
		return err
	}
	switch identity.Code(r.code) {
	case identity.CodeNotProven:
		r.hint = fmt.Sprintf("only a key proven for %s gets a certificate: prove it with 'kith id add %s --ssh-key %s' ('kith id show %s' lists what is proven)", handle, handle, keyFile, handle)
	case identity.CodePrincipalNotAllowed:
		r.hint = "ask for the identity's own principals only, or leave --principals out"
	case identity.CodeBadValidity:
		r.hint = "ask for a shorter --validity, or leave it out for the server's default"
	case identity.CodeCADisabled:
		r.hint = "this server is not an SSH certificate authority (ssh_ca.enabled is off)"
	case identity.CodeRateLimited:
		r.hint = "use the certificate you got last, or wait an hour"
	}
	return r
}

// caAmong reports whether key is one of the CA keys.
func caAmong(key gossh.PublicKey, cas []gossh.PublicKey) bool {
	for _, ca := range cas {
		if ssh.SameKey(key, ca) {
			return true
		}
	}
	return false
}

// expectedCA returns the CA keys to expect: those in file (lines as
// TrustedUserCAKeys holds them), or else the server's.
func (c *idClient) expectedCA(ctx context.Context, file string) ([]gossh.PublicKey, error) {
	var data []byte
	var err error
	if file != "" {
		if data, err = os.ReadFile(c.expandHome(file)); err != nil {
			return nil, fmt.Errorf("--ca-key: %w", err)
		}
	} else if data, err = c.fetch(ctx, "/ssh/ca.pub", 64<<10); err != nil {
		return nil, fmt.Errorf("fetch the CA key: %w", err)
	}
	keys, err := ssh.ParseAuthorizedKeys(data)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	var out []gossh.PublicKey
	for _, k := range keys {
		if k.Cert == nil {
			out = append(out, k.Public)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("CA key: no key in %q", clipText(string(data)))
	}
	return out, nil
}

func clipText(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// fetch GETs path and returns at most limit bytes of a 200 answer.
func (c *idClient) fetch(ctx context.Context, path string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.server+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, clipText(strings.TrimSpace(string(body))))
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("GET %s: more than %d bytes", path, limit)
	}
	return body, nil
}

func runSSHCAKey(ctx context.Context, env *environment, args []string) error {
	fs := newToolFlags(env, "ssh-ca-key", "ssh-ca-key [--server URL]",
		"Prints the server's SSH user CA key: the line for the file sshd's TrustedUserCAKeys names.")
	server := serverFlag(fs, env)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return misuse(env, "ssh-ca-key", "takes no arguments, got %q", pos)
	}
	c, err := newServerClient(env, *server, 30*time.Second)
	if err != nil {
		return err
	}
	data, err := c.fetch(ctx, "/ssh/ca.pub", 64<<10)
	if err != nil {
		return err
	}
	keys, err := ssh.ParseAuthorizedKeys(data)
	if err != nil || len(keys) != 1 || keys[0].Cert != nil {
		return fmt.Errorf("the server's CA key is not one key line: %q", clipText(string(data)))
	}
	env.stdout.Write(ssh.MarshalAuthorizedKey(keys[0]))
	return nil
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
	c, err := newServerClient(env, *server, *timeout)
	if err != nil {
		return err
	}
	cas, err := c.expectedCA(ctx, *caFile)
	if err != nil {
		return err
	}
	data, err := c.fetch(ctx, "/ssh/krl", ssh.MaxKRLSize)
	if err != nil {
		return err
	}
	krl, err := ssh.ParseKRL(data)
	if err != nil {
		return fmt.Errorf("the server's revocation list: %w", err)
	}
	var ca gossh.PublicKey
	for _, k := range cas {
		if krl.NamesCA(k.Marshal()) {
			ca = k
		}
	}
	if ca == nil {
		return fmt.Errorf("the server's revocation list names none of the CA keys expected")
	}
	// Never go back to an older list (a replayed or stale answer).
	if old, err := os.ReadFile(*out); err == nil {
		if prev, err := ssh.ParseKRL(old); err == nil && prev.Version > krl.Version {
			return fmt.Errorf("the server's list (version %d) is older than %s (version %d): kept %s", krl.Version, *out, prev.Version, *out)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", *out, err)
	}
	if err := writeAtomic(*out, data, 0o644); err != nil {
		return err
	}
	n := 0
	for _, s := range krl.Certificates {
		if bytes.Equal(s.CA, ca.Marshal()) {
			n += len(s.Serials)
		}
	}
	fmt.Fprintf(env.stdout, "wrote %s: %d revoked certificates of CA %s (version %d)\n", *out, n, ssh.FingerprintOf(ca), krl.Version)
	return nil
}

// writeAtomic replaces path by data: a temporary file beside it, synced,
// then renamed over it, so that a reader sees the old file or the new
// one, never part of one.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename there is nothing to remove
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
