// config.go: one provider's configuration, its validation, and how it
// prints: the client secret never leaves this value in text.

package oidc

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
)

// Claims that can propose a handle (ProviderConfig.HandleClaim).
const (
	HandleClaimPreferredUsername = "preferred_username"
	HandleClaimEmail             = "email"
)

// defaultScopes are requested when ProviderConfig.Scopes is empty: the
// subject ("openid"), the email and whether the provider verified it
// ("email"), and the username and display name ("profile"). Nothing more:
// Kith asks only for what it keeps (see Login).
var defaultScopes = []string{"openid", "email", "profile"}

// redacted stands for a secret wherever a ProviderConfig is printed.
const redacted = "[redacted]"

// ProviderConfig configures one OpenID provider. The field tags name its
// configuration keys, which errors use.
//
// The client secret comes from exactly one of ClientSecret,
// ClientSecretFile (its content, without trailing white space) and
// ClientSecretEnv (the environment variable of that name), or from none
// for a public client (PKCE alone then protects the code). The secret is
// read when the provider is made, and is never printed: ProviderConfig
// implements fmt.Stringer, fmt.GoStringer, slog.LogValuer and
// json.Marshaler, all redacting it.
type ProviderConfig struct {
	// Name identifies the provider in URLs (/login/{name}) and in evidence:
	// 1 to 32 lower-case letters, digits and '-'.
	Name string `toml:"name" json:"name"`
	// Issuer is the provider's issuer URL, exactly as its discovery document
	// and ID tokens state it (mind a trailing slash): https, or http on a
	// loopback address for development.
	Issuer string `toml:"issuer" json:"issuer"`
	// ClientID is Kith's client ID at the provider.
	ClientID string `toml:"client_id" json:"client_id"`
	// ClientSecret is Kith's client secret, inline.
	ClientSecret string `toml:"client_secret" json:"client_secret"`
	// ClientSecretFile names a file holding the client secret.
	ClientSecretFile string `toml:"client_secret_file" json:"client_secret_file"`
	// ClientSecretEnv names an environment variable holding the client
	// secret.
	ClientSecretEnv string `toml:"client_secret_env" json:"client_secret_env"`
	// Scopes to request; "openid email profile" when empty. "openid" is
	// added when missing.
	Scopes []string `toml:"scopes" json:"scopes"`
	// AllowedEmailDomains, when not empty, restricts logins to accounts
	// whose email the provider verified and whose domain is one of these
	// (exact match, case-insensitive; list subdomains separately).
	AllowedEmailDomains []string `toml:"allowed_email_domains" json:"allowed_email_domains"`
	// HandleClaim is the claim that proposes a handle: "preferred_username"
	// (the default) or "email" (its local part).
	HandleClaim string `toml:"handle_claim" json:"handle_claim"`
	// RedirectURL is Kith's callback URL registered at the provider, e.g.
	// https://keys.example.org/login/gitlab/callback: https, or http on a
	// loopback address for development.
	RedirectURL string `toml:"redirect_url" json:"redirect_url"`
}

// Validate checks the configuration without reading the secret's file or
// variable. Its error is a *ConfigError naming the field.
func (c ProviderConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Provider: c.Name, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if !validName(c.Name) {
		return bad("name", "must be 1 to 32 lower-case letters, digits and '-', starting with a letter or digit (got %q)", c.Name)
	}
	if err := checkURL(c.Issuer, false); err != nil {
		return bad("issuer", "%v", err)
	}
	if c.ClientID == "" {
		return bad("client_id", "is required")
	}
	n := 0
	for _, s := range []string{c.ClientSecret, c.ClientSecretFile, c.ClientSecretEnv} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return bad("client_secret", "set only one of client_secret, client_secret_file and client_secret_env")
	}
	for _, s := range c.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n\"\\") {
			return bad("scopes", "%q is not a scope", s)
		}
	}
	for _, d := range c.AllowedEmailDomains {
		if !validDomain(d) {
			return bad("allowed_email_domains", "%q is not a domain name", d)
		}
	}
	switch c.HandleClaim {
	case "", HandleClaimPreferredUsername, HandleClaimEmail:
	default:
		return bad("handle_claim", "must be %q or %q (got %q)", HandleClaimPreferredUsername, HandleClaimEmail, c.HandleClaim)
	}
	if err := checkURL(c.RedirectURL, true); err != nil {
		return bad("redirect_url", "%v", err)
	}
	return nil
}

// secret reads the client secret from where the configuration says.
func (c ProviderConfig) secret() (string, error) {
	switch {
	case c.ClientSecretFile != "":
		b, err := os.ReadFile(c.ClientSecretFile)
		if err != nil {
			// The path is configuration, not a secret; the content never
			// reaches an error.
			return "", &ConfigError{Provider: c.Name, Field: "client_secret_file", Reason: fmt.Sprintf("cannot read %q: %v", c.ClientSecretFile, unwrapPathError(err))}
		}
		s := strings.TrimRight(string(b), " \t\r\n")
		if s == "" {
			return "", &ConfigError{Provider: c.Name, Field: "client_secret_file", Reason: fmt.Sprintf("%q is empty", c.ClientSecretFile)}
		}
		return s, nil
	case c.ClientSecretEnv != "":
		s, ok := os.LookupEnv(c.ClientSecretEnv)
		if !ok || s == "" {
			return "", &ConfigError{Provider: c.Name, Field: "client_secret_env", Reason: fmt.Sprintf("environment variable %s is not set", c.ClientSecretEnv)}
		}
		return s, nil
	default:
		return c.ClientSecret, nil
	}
}

// scopes returns the scopes to request, with "openid" first.
func (c ProviderConfig) scopes() []string {
	src := c.Scopes
	if len(src) == 0 {
		src = defaultScopes
	}
	out := []string{"openid"}
	for _, s := range src {
		if s != "openid" {
			out = append(out, s)
		}
	}
	return out
}

// redact returns a copy with the inline secret replaced.
func (c ProviderConfig) redact() redactedConfig {
	r := redactedConfig(c)
	if r.ClientSecret != "" {
		r.ClientSecret = redacted
	}
	return r
}

// redactedConfig is ProviderConfig without its methods, for printing.
type redactedConfig ProviderConfig

// String prints the configuration with the client secret redacted.
func (c ProviderConfig) String() string {
	return fmt.Sprintf("%+v", c.redact())
}

// GoString prints the configuration, as %#v does, with the client secret
// redacted.
func (c ProviderConfig) GoString() string {
	return "oidc.ProviderConfig" + strings.TrimPrefix(fmt.Sprintf("%#v", c.redact()), "oidc.redactedConfig")
}

// Format makes every verb (%v, %+v, %s, %q, %x …) print the redacted form,
// so no formatting of a ProviderConfig can show its secret.
func (c ProviderConfig) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		fmt.Fprint(f, c.GoString())
		return
	}
	fmt.Fprint(f, c.String())
}

// LogValue logs the configuration as a group, with the client secret
// redacted (the secret file's path and variable's name are logged: they are
// not secret).
func (c ProviderConfig) LogValue() slog.Value {
	r := c.redact()
	return slog.GroupValue(
		slog.String("name", r.Name),
		slog.String("issuer", r.Issuer),
		slog.String("client_id", r.ClientID),
		slog.String("client_secret", r.ClientSecret),
		slog.String("client_secret_file", r.ClientSecretFile),
		slog.String("client_secret_env", r.ClientSecretEnv),
		slog.Any("scopes", r.Scopes),
		slog.Any("allowed_email_domains", r.AllowedEmailDomains),
		slog.String("handle_claim", r.HandleClaim),
		slog.String("redirect_url", r.RedirectURL),
	)
}

// MarshalJSON encodes the configuration with the client secret redacted.
// (Decoding is the ordinary one: a configuration file may hold the secret.)
func (c ProviderConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(c.redact())
}

// validName reports whether s is a provider name.
func validName(s string) bool {
	if len(s) < 1 || len(s) > 32 || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// validDomain reports whether s looks like a DNS name (letters, digits,
// '-' and '.', with at least one dot); case does not matter.
func validDomain(s string) bool {
	if len(s) < 3 || len(s) > 253 || !strings.Contains(s, ".") || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if !(c >= 'a' && c <= 'z' || s[i] >= '0' && s[i] <= '9' || s[i] == '-' || s[i] == '.') {
			return false
		}
	}
	return true
}

// checkURL checks an issuer or redirect URL: absolute, https (or http on a
// loopback host), no fragment; an issuer has no query either.
func checkURL(s string, redirect bool) error {
	if s == "" {
		return fmt.Errorf("is required")
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL", s)
	}
	if u.Host == "" || u.User != nil || u.Fragment != "" || (!redirect && u.RawQuery != "") {
		return fmt.Errorf("%q must be an absolute URL with a host and no user, fragment or query", s)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopback(u.Hostname()) {
			return fmt.Errorf("%q must use https (http only on a loopback address)", s)
		}
	default:
		return fmt.Errorf("%q must use https", s)
	}
	return nil
}

// isLoopback reports whether host is localhost or a loopback address.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// unwrapPathError drops the path from an *os.PathError, which the caller
// already names.
func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
