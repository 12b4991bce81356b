// sshca_config.go: wiring the SSH user certificate authority: its key
// (ssh_ca.key_file, or the database's shared secret), its policy from
// the [ssh_ca] settings, and the principals file.

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/ssh"
)

// caKeySecret names the SSH CA key's seed in the secrets table.
const caKeySecret = "ssh_ca.key"

// maxCertificateValidity bounds ssh_ca.max_validity: certificates are
// meant to be short-lived, and the KRL must list a revoked one until it
// expires.
const maxCertificateValidity = 7 * 24 * time.Hour

// criticalOptions are the critical options OpenSSH knows; a certificate
// with any other is refused by sshd.
var criticalOptions = map[string]bool{"force-command": true, "source-address": true, "verify-required": true}

// validate checks the [ssh_ca] settings.
func (c SSHCAConfig) validate() error {
	switch {
	case c.Validity <= 0:
		return errors.New("setting ssh_ca.validity: must be positive")
	case c.MaxValidity < c.Validity:
		return fmt.Errorf("setting ssh_ca.max_validity: %s is shorter than ssh_ca.validity %s", c.MaxValidity, c.Validity)
	case time.Duration(c.MaxValidity) > maxCertificateValidity:
		return fmt.Errorf("setting ssh_ca.max_validity: %s is longer than %s: certificates are meant to be short-lived", c.MaxValidity, maxCertificateValidity)
	case c.CertificatesPerHour == 0:
		return errors.New("setting ssh_ca.certificates_per_hour: must not be 0 (negative means no cap)")
	}
	if _, err := parseOptions(c.CriticalOptions, true); err != nil {
		return fmt.Errorf("setting ssh_ca.critical_options: %w", err)
	}
	if _, err := parseOptions(c.Extensions, false); err != nil {
		return fmt.Errorf("setting ssh_ca.extensions: %w", err)
	}
	return nil
}

// parseOptions reads "name" and "name=value" entries.
func parseOptions(list []string, critical bool) (map[string]string, error) {
	out := map[string]string{}
	for _, o := range list {
		name, value, _ := strings.Cut(o, "=")
		switch {
		case name == "" || strings.ContainsAny(name, " \t\r\n"):
			return nil, fmt.Errorf("%q is not name or name=value", o)
		case critical && !criticalOptions[name]:
			return nil, fmt.Errorf("%q is not a critical option OpenSSH knows (force-command, source-address, verify-required)", name)
		case critical && name != "verify-required" && value == "":
			return nil, fmt.Errorf("%s needs a value (%s=...)", name, name)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s given twice", name)
		}
		out[name] = value
	}
	return out, nil
}

// caKey returns the SSH CA: from ssh_ca.key_file when set, else the
// store's shared secret, so that every node of one database signs with
// the same key.
func caKey(ctx context.Context, cfg Config, st *postgres.Store) (*ssh.CA, error) {
	if cfg.SSHCA.KeyFile == "" {
		seed, err := st.Secret(ctx, caKeySecret, ssh.CASeedSize)
		if err != nil {
			return nil, fmt.Errorf("setting ssh_ca.key_file: %w", err)
		}
		return ssh.NewCA(seed)
	}
	data, err := os.ReadFile(cfg.SSHCA.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("setting ssh_ca.key_file: %w", err)
	}
	ca, err := ssh.ParseCAKey(data)
	if err != nil {
		return nil, fmt.Errorf("setting ssh_ca.key_file: %s: %w", cfg.SSHCA.KeyFile, err)
	}
	return ca, nil
}

// readPrincipals reads a principals file: "handle principal..." lines,
// # comments and blank lines ignored.
func readPrincipals(path string) (map[identity.Handle][]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("setting ssh_ca.principals_file: %w", err)
	}
	out := map[identity.Handle][]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		h, err := identity.ParseHandle(f[0])
		if err != nil {
			return nil, fmt.Errorf("setting ssh_ca.principals_file: %s:%d: %w", path, n, err)
		}
		if len(f) < 2 {
			return nil, fmt.Errorf("setting ssh_ca.principals_file: %s:%d: %s names no principal", path, n, h)
		}
		for _, p := range f[1:] {
			if strings.Contains(p, ",") {
				return nil, fmt.Errorf("setting ssh_ca.principals_file: %s:%d: principal %q: separate principals by spaces", path, n, p)
			}
		}
		out[h] = append(out[h], f[1:]...)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("setting ssh_ca.principals_file: %w", err)
	}
	return out, nil
}

// certificateAuthority returns the CA and its policy when ssh_ca.enabled,
// else nil.
func certificateAuthority(ctx context.Context, cfg Config, st *postgres.Store) (identity.CertificateAuthority, identity.CertificatePolicy, error) {
	if !cfg.SSHCA.Enabled {
		return nil, identity.CertificatePolicy{}, nil
	}
	ca, err := caKey(ctx, cfg, st)
	if err != nil {
		return nil, identity.CertificatePolicy{}, err
	}
	policy := identity.CertificatePolicy{
		Validity: time.Duration(cfg.SSHCA.Validity), MaxValidity: time.Duration(cfg.SSHCA.MaxValidity),
		PerHour: cfg.SSHCA.CertificatesPerHour,
	}
	if policy.CriticalOptions, err = parseOptions(cfg.SSHCA.CriticalOptions, true); err != nil {
		return nil, policy, err
	}
	if policy.Extensions, err = parseOptions(cfg.SSHCA.Extensions, false); err != nil {
		return nil, policy, err
	}
	if cfg.SSHCA.PrincipalsFile != "" {
		extra, err := readPrincipals(cfg.SSHCA.PrincipalsFile)
		if err != nil {
			return nil, policy, err
		}
		policy.Principals = func(h identity.Handle) []string { return extra[h] }
	}
	return verify.CertificateAuthority{CA: ca}, policy, nil
}
