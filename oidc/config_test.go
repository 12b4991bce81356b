package oidc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func validConfig() ProviderConfig {
	return ProviderConfig{
		Name:        "gitlab",
		Issuer:      "https://gitlab.example",
		ClientID:    "kith",
		RedirectURL: "https://keys.example/login/gitlab/callback",
	}
}

func TestProviderConfigValidate(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	dev := validConfig()
	dev.Issuer, dev.RedirectURL = "http://127.0.0.1:5556/dex", "http://localhost:11371/login/gitlab/callback"
	if err := dev.Validate(); err != nil {
		t.Errorf("loopback http config: %v", err)
	}
	for _, tc := range []struct {
		field string
		edit  func(*ProviderConfig)
	}{
		{"name", func(c *ProviderConfig) { c.Name = "" }},
		{"name", func(c *ProviderConfig) { c.Name = "Git Lab" }},
		{"name", func(c *ProviderConfig) { c.Name = "-x" }},
		{"issuer", func(c *ProviderConfig) { c.Issuer = "" }},
		{"issuer", func(c *ProviderConfig) { c.Issuer = "http://gitlab.example" }},
		{"issuer", func(c *ProviderConfig) { c.Issuer = "https://gitlab.example/?tenant=1" }},
		{"issuer", func(c *ProviderConfig) { c.Issuer = "gitlab.example" }},
		{"client_id", func(c *ProviderConfig) { c.ClientID = "" }},
		{"client_secret", func(c *ProviderConfig) { c.ClientSecret, c.ClientSecretEnv = "x", "Y" }},
		{"client_secret", func(c *ProviderConfig) { c.ClientSecretFile, c.ClientSecretEnv = "/x", "Y" }},
		{"scopes", func(c *ProviderConfig) { c.Scopes = []string{"openid email"} }},
		{"allowed_email_domains", func(c *ProviderConfig) { c.AllowedEmailDomains = []string{"@example.org"} }},
		{"allowed_email_domains", func(c *ProviderConfig) { c.AllowedEmailDomains = []string{"localhost"} }},
		{"handle_claim", func(c *ProviderConfig) { c.HandleClaim = "sub" }},
		{"redirect_url", func(c *ProviderConfig) { c.RedirectURL = "" }},
		{"redirect_url", func(c *ProviderConfig) { c.RedirectURL = "http://keys.example/cb" }},
		{"redirect_url", func(c *ProviderConfig) { c.RedirectURL = "https://keys.example/cb#x" }},
	} {
		c := validConfig()
		tc.edit(&c)
		err := c.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: got %v, want a ConfigError for %s", c, err, tc.field)
			continue
		}
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("error %q does not name %s", err, tc.field)
		}
	}
}

func TestProviderConfigNeverPrintsSecret(t *testing.T) {
	const secret = "hunter2-very-secret"
	c := validConfig()
	c.ClientSecret = secret
	var out []string
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%T %v"} {
		out = append(out, fmt.Sprintf(f, c), fmt.Sprintf(f, &c))
	}
	out = append(out, fmt.Sprint(c), fmt.Sprintln([]ProviderConfig{c}), c.String(), c.GoString())
	var logs bytes.Buffer
	for _, h := range []slog.Handler{slog.NewJSONHandler(&logs, nil), slog.NewTextHandler(&logs, nil)} {
		slog.New(h).Info("config", "provider", c, "pointer", &c)
	}
	out = append(out, logs.String())
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, string(js))
	for _, s := range out {
		if strings.Contains(s, secret) || strings.Contains(s, fmt.Sprintf("%x", secret)) {
			t.Errorf("secret printed: %s", s)
		}
	}
	if !strings.Contains(logs.String(), "gitlab.example") || !strings.Contains(logs.String(), redacted) || !strings.Contains(c.GoString(), "oidc.ProviderConfig{") {
		t.Errorf("redacted forms lost the rest: %s\n%s", logs.String(), c.GoString())
	}
}

func TestClientSecretSources(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "secret")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KITH_TEST_OIDC_SECRET", "from-env")
	opts := Options{CookieKey: make([]byte, CookieKeySize), Logger: slog.New(slog.DiscardHandler)}
	// A provider that is not reachable: NewProvider still succeeds.
	base := validConfig()
	base.Issuer = "http://127.0.0.1:1"
	for _, tc := range []struct {
		edit func(*ProviderConfig)
		want string
	}{
		{func(c *ProviderConfig) { c.ClientSecret = "inline" }, "inline"},
		{func(c *ProviderConfig) { c.ClientSecretFile = file }, "from-file"},
		{func(c *ProviderConfig) { c.ClientSecretEnv = "KITH_TEST_OIDC_SECRET" }, "from-env"},
		{func(*ProviderConfig) {}, ""},
	} {
		c := base
		tc.edit(&c)
		p, err := NewProvider(t.Context(), c, opts)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		if p.secret != tc.want {
			t.Errorf("%v: secret %q, want %q", c, p.secret, tc.want)
		}
		if p.Config().ClientSecret != "" || strings.Contains(fmt.Sprintf("%v %+v", p, p), tc.want+"x") {
			t.Errorf("provider keeps the inline secret in its config")
		}
	}
	for _, tc := range []struct {
		field string
		edit  func(*ProviderConfig)
	}{
		{"client_secret_file", func(c *ProviderConfig) { c.ClientSecretFile = filepath.Join(dir, "missing") }},
		{"client_secret_env", func(c *ProviderConfig) { c.ClientSecretEnv = "KITH_TEST_OIDC_UNSET" }},
	} {
		c := base
		tc.edit(&c)
		_, err := NewProvider(t.Context(), c, opts)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("got %v, want a ConfigError for %s", err, tc.field)
		}
	}
	_, err := NewProvider(t.Context(), base, Options{CookieKey: []byte("short")})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "cookie_key" {
		t.Errorf("short cookie key: %v", err)
	}
}

func TestProvidersRejectDuplicateNames(t *testing.T) {
	c := validConfig()
	c.Issuer = "http://127.0.0.1:1"
	_, err := NewProviders(t.Context(), []ProviderConfig{c, c}, Options{CookieKey: make([]byte, CookieKeySize), Logger: slog.New(slog.DiscardHandler)})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "name" {
		t.Errorf("duplicate names: %v", err)
	}
	ps, err := NewProviders(t.Context(), []ProviderConfig{c}, Options{CookieKey: make([]byte, CookieKeySize), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ps.Get("nope"); ok {
		t.Error("Get of an unknown provider succeeded")
	}
	if got := ps.Names(); len(got) != 1 || got[0] != "gitlab" {
		t.Errorf("Names = %v", got)
	}
	err = ps.Begin(newRecorder(), httpRequest("/login/nope"), "nope", "/")
	wantErr(t, err, ErrUnknownProvider)
}
