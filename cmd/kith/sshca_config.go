// sshca_config.go: wiring the SSH user certificate authority: its key
// (ssh_ca.key_file, or the database's shared secret), its policy from
// the [ssh_ca] settings, and the principals file.

package main

import (
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
	if _, err := ssh.ParseCertificateOptions(c.CriticalOptions, true); err != nil {
		return fmt.Errorf("setting ssh_ca.critical_options: %w", err)
	}
	if _, err := parseClaimPrincipals(c.ClaimPrincipals); err != nil {
		return err
	}
	if _, err := ssh.ParseCertificateOptions(c.Extensions, false); err != nil {
		return fmt.Errorf("setting ssh_ca.extensions: %w", err)
	}
	return nil
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
	if policy.CriticalOptions, err = ssh.ParseCertificateOptions(cfg.SSHCA.CriticalOptions, true); err != nil {
		return nil, policy, err
	}
	if policy.Extensions, err = ssh.ParseCertificateOptions(cfg.SSHCA.Extensions, false); err != nil {
		return nil, policy, err
	}
	if policy.ClaimPrincipals, err = parseClaimPrincipals(cfg.SSHCA.ClaimPrincipals); err != nil {
		return nil, policy, err
	}
	if cfg.SSHCA.PrincipalsFile != "" {
		f, err := os.Open(cfg.SSHCA.PrincipalsFile)
		if err != nil {
			return nil, policy, fmt.Errorf("setting ssh_ca.principals_file: %w", err)
		}
		extra, err := identity.ParsePrincipals(f)
		f.Close()
		if err != nil {
			return nil, policy, fmt.Errorf("setting ssh_ca.principals_file: %s: %w", cfg.SSHCA.PrincipalsFile, err)
		}
		policy.Principals = func(h identity.Handle) []string { return extra[h] }
	}
	return verify.CertificateAuthority{CA: ca}, policy, nil
}

// parseClaimPrincipals reads ssh_ca.claim_principals: entries
// "principal=claim:value", split at the first = and the first : after
// it (a claim's name has none; a value may, as GitHub's "org:team"
// groups do).
func parseClaimPrincipals(entries []string) ([]identity.ClaimPrincipal, error) {
	var out []identity.ClaimPrincipal
	for _, e := range entries {
		p, rest, ok1 := strings.Cut(strings.TrimSpace(e), "=")
		claim, value, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("setting ssh_ca.claim_principals: %q is not principal=claim:value (e.g. ops=groups:admins)", e)
		}
		cp := identity.ClaimPrincipal{Claim: claim, Value: value, Principal: p}
		if err := cp.Check(); err != nil {
			return nil, fmt.Errorf("setting ssh_ca.claim_principals: %q: %w", e, err)
		}
		out = append(out, cp)
	}
	return out, nil
}
