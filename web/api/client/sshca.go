// sshca.go: the SSH certificate authority's clients: a certificate for a
// proven key, the CA's key, and the revocation list, each checked against
// the CA expected before anything is written.

package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	gossh "golang.org/x/crypto/ssh"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/ssh"
	"github.com/kith-keyserver/kith/web/api"
)

// CertificateRequest is what Certificate asks for.
type CertificateRequest struct {
	// Validity is how long the certificate is to be valid (e.g. "1h");
	// empty means the server's default.
	Validity string
	// Principals are the principals to certify, a subset of the
	// identity's; empty means all of them.
	Principals []string
	// CAKeys are the CA keys the certificate must be signed by (see
	// ParseCAKeys); empty means the server's (CAKeys).
	CAKeys []gossh.PublicKey
}

// Certificate is an SSH certificate the CA issued: a user certificate, or
// a host certificate for a host identity (host:NAME).
type Certificate struct {
	// Line is the certificate as a -cert.pub file holds it.
	Line string
	// Cert is the certificate parsed and checked.
	Cert *gossh.Certificate
	// Log is the URL of the ssh.certificate record that publishes it.
	Log string
	// Grants are the principals a device login's claims granted.
	Grants []api.PrincipalGrant
}

// Certificate gets a certificate for the SSH key s, proven for handle,
// signing the server's statement with it, and checks what came back: a
// certificate for this key, signed by one of the CA keys expected.
func (c *Client) Certificate(ctx context.Context, handle string, s Signer, req CertificateRequest) (*Certificate, error) {
	resp, err := c.certify(ctx, handle, s, req)
	if err != nil {
		var r *Refusal
		if errors.As(err, &r) {
			r.Hint = certificateHint(r.Code, handle, s.File)
		}
		return nil, err
	}
	return c.checkCertificate(ctx, handle, resp, s, req.CAKeys)
}

// checkCertificate checks a certificate the server issued for s as
// handle: a certificate for this key (a host certificate for a host:
// handle), signed by one of the CA keys cas (none: the server's).
func (c *Client) checkCertificate(ctx context.Context, handle string, resp api.CertificateResponse, s Signer, cas []gossh.PublicKey) (*Certificate, error) {
	var err error
	if len(cas) == 0 {
		if cas, err = c.CAKeys(ctx); err != nil {
			return nil, err
		}
	}
	k, err := ssh.ParseAuthorizedKey([]byte(resp.Certificate))
	if err != nil || k.Cert == nil {
		return nil, fmt.Errorf("the server's certificate does not parse: %v", err)
	}
	parse := ssh.ParseUserCertificate
	if strings.HasPrefix(handle, identity.HostPrefix) {
		parse = ssh.ParseHostCertificate
	}
	cert, err := parse(k.Cert.Marshal())
	if err != nil {
		return nil, fmt.Errorf("the server's certificate: %w", err)
	}
	mine, err := ssh.ParseAuthorizedKey([]byte(s.Pub))
	if err != nil {
		return nil, err
	}
	if !ssh.SameKey(cert.Key, mine.Public) {
		return nil, fmt.Errorf("the server certified another key than %s", s.ID)
	}
	if !caAmong(cert.SignatureKey, cas) {
		return nil, fmt.Errorf("the certificate is signed by %s, not by the CA expected", ssh.FingerprintOf(cert.SignatureKey))
	}
	return &Certificate{Line: resp.Certificate, Cert: cert, Log: c.server + resp.Log, Grants: resp.Grants}, nil
}

// certify asks for a certificate for s.
func (c *Client) certify(ctx context.Context, handle string, s Signer, req CertificateRequest) (api.CertificateResponse, error) {
	var resp api.CertificateResponse
	stmt, err := c.Challenge(ctx, identity.PurposeCertificate, handle, s.Pub)
	if err != nil {
		return resp, err
	}
	sig, err := s.Sign(ctx, stmt)
	if err != nil {
		return resp, err
	}
	areq := api.CertificateRequest{Statement: stmt, Signature: sig, Validity: req.Validity, Principals: req.Principals}
	err = c.call(ctx, "get a certificate for "+s.ID, http.MethodPost, "/api/v1/ssh/certificates", handle, areq, &resp)
	return resp, err
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

// CALine returns the server's SSH user CA key: the one line of GET
// /ssh/ca.pub, for sshd's TrustedUserCAKeys.
func (c *Client) CALine(ctx context.Context) ([]byte, error) {
	data, err := c.get(ctx, "/ssh/ca.pub", maxSmallBody)
	if err != nil {
		return nil, err
	}
	keys, err := ssh.ParseAuthorizedKeys(data)
	if err != nil || len(keys) != 1 || keys[0].Cert != nil {
		return nil, fmt.Errorf("the server's CA key is not one key line: %q", clip(string(data)))
	}
	return ssh.MarshalAuthorizedKey(keys[0]), nil
}

// CertAuthorityLine returns the server's @cert-authority line (GET
// /ssh/ca.known_hosts) for ssh's known_hosts, checked to be one such
// line with one plain key.
func (c *Client) CertAuthorityLine(ctx context.Context) ([]byte, error) {
	data, err := c.get(ctx, "/ssh/ca.known_hosts", maxSmallBody)
	if err != nil {
		return nil, err
	}
	rest, ok := bytes.CutPrefix(bytes.TrimSpace(data), []byte("@cert-authority "))
	var key []*ssh.Key
	if ok && bytes.Count(data, []byte("\n")) <= 1 {
		if _, k, found := bytes.Cut(rest, []byte(" ")); found {
			key, err = ssh.ParseAuthorizedKeys(k)
		}
	}
	if !ok || err != nil || len(key) != 1 || key[0].Cert != nil {
		return nil, fmt.Errorf("the server's @cert-authority line is not one: %q", clip(string(data)))
	}
	return append(bytes.TrimSpace(data), '\n'), nil
}

// CAKeys returns the server's SSH user CA keys.
func (c *Client) CAKeys(ctx context.Context) ([]gossh.PublicKey, error) {
	data, err := c.get(ctx, "/ssh/ca.pub", maxSmallBody)
	if err != nil {
		return nil, fmt.Errorf("fetch the CA key: %w", err)
	}
	return ParseCAKeys(data)
}

// ParseCAKeys reads CA keys as a TrustedUserCAKeys file holds them.
func ParseCAKeys(data []byte) ([]gossh.PublicKey, error) {
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
		return nil, fmt.Errorf("CA key: no key in %q", clip(string(data)))
	}
	return out, nil
}

// KRL is a checked revocation list.
type KRL struct {
	// Data is the list as served, for sshd's RevokedKeys.
	Data []byte
	// List is the list parsed.
	List *ssh.KRL
	// CA is the CA key it names, one of those expected.
	CA gossh.PublicKey
}

// Revoked is the number of the CA's certificates the list revokes.
func (k *KRL) Revoked() int {
	n := 0
	for _, s := range k.List.Certificates {
		if bytes.Equal(s.CA, k.CA.Marshal()) {
			n += len(s.Serials)
		}
	}
	return n
}

// KRL fetches the server's certificate revocation list and checks that
// it parses and names one of the CA keys cas.
func (c *Client) KRL(ctx context.Context, cas []gossh.PublicKey) (*KRL, error) {
	data, err := c.get(ctx, "/ssh/krl", ssh.MaxKRLSize)
	if err != nil {
		return nil, err
	}
	list, err := ssh.ParseKRL(data)
	if err != nil {
		return nil, fmt.Errorf("the server's revocation list: %w", err)
	}
	for _, k := range cas {
		if list.NamesCA(k.Marshal()) {
			return &KRL{Data: data, List: list, CA: k}, nil
		}
	}
	return nil, errors.New("the server's revocation list names none of the CA keys expected")
}

// Install replaces the list in path atomically, unless path holds a
// newer list: a replayed or stale answer never takes a list back.
func (k *KRL) Install(path string) error {
	if old, err := os.ReadFile(path); err == nil {
		if prev, err := ssh.ParseKRL(old); err == nil && prev.Version > k.List.Version {
			return fmt.Errorf("the server's list (version %d) is older than %s (version %d): kept %s", k.List.Version, path, prev.Version, path)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return WriteAtomic(path, k.Data, 0o644)
}

// CertificateFile is where ssh looks for the certificate of the key in
// keyFile: KEY-cert.pub.
func CertificateFile(keyFile string) string {
	return strings.TrimSuffix(keyFile, ".pub") + "-cert.pub"
}

// WriteAtomic replaces path by data: a temporary file beside it, synced,
// then renamed over it, so that a reader sees the old file or the new
// one, never part of one.
func WriteAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(f.Name()) // after a successful rename there is nothing to remove
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
