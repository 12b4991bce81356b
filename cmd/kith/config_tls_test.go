package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTLSSettings: the [tls] section from the file, the environment and
// flags, and what it makes of the public URL and the redirect's port.
func TestTLSSettings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kith.toml")
	os.WriteFile(file, []byte("[tls]\nlisten = \":443\"\nacme_names = [\"keys.example.org\", \"openpgpkey.example.org\"]\nhttp_listen = \":80\"\n"), 0o600)
	for _, c := range []struct {
		name           string
		args, env      []string
		public, port   string
		acme, certFile bool
	}{
		{"off by default", nil, nil, "http://127.0.0.1:11371", "", false, false},
		{"ACME from the file", []string{"--config", file}, nil, "https://keys.example.org", "443", true, false},
		{"files from the environment", nil, []string{"KITH_TLS_LISTEN=127.0.0.1:8443", "KITH_TLS_CERT_FILE=c.pem", "KITH_TLS_KEY_FILE=k.pem"},
			"https://127.0.0.1:8443", "8443", false, true},
		{"public_url names the port browsers use", []string{"--tls-listen", ":8443", "--tls-cert-file", "c.pem", "--tls-key-file", "k.pem", "--public-url", "https://keys.example.org/"},
			nil, "https://keys.example.org", "443", false, true},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg, _, err := loadConfig(fs, c.args, c.env)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := cfg.publicURL(); got != c.public {
			t.Errorf("%s: public URL %q, want %q", c.name, got, c.public)
		}
		if cfg.TLS.enabled() && cfg.httpsPort() != c.port {
			t.Errorf("%s: https port %q, want %q", c.name, cfg.httpsPort(), c.port)
		}
		if (len(cfg.TLS.ACMENames) > 0) != c.acme || (cfg.TLS.CertFile != "") != c.certFile {
			t.Errorf("%s: %+v", c.name, cfg.TLS)
		}
		if !strings.HasPrefix(cfg.TLS.ACMEDirectory, "https://") {
			t.Errorf("%s: ACME directory %q", c.name, cfg.TLS.ACMEDirectory)
		}
	}
}

func TestTLSSettingsRefuseBadValues(t *testing.T) {
	for _, c := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--tls-cert-file", "c.pem", "--tls-key-file", "k.pem"}, "setting tls.cert_file: needs tls.listen"},
		{[]string{"--tls-http-listen", ":80"}, "setting tls.http_listen: needs tls.listen"},
		{[]string{"--tls-listen", ":443"}, "setting tls.listen: needs"},
		{[]string{"--tls-listen", ":70000", "--tls-acme-names", "keys.example.org"}, "setting tls.listen"},
		{[]string{"--tls-listen", ":443", "--tls-cert-file", "c.pem"}, "needs tls.key_file"},
		{[]string{"--tls-listen", ":443", "--tls-cert-file", "c.pem", "--tls-key-file", "k.pem"}, "setting public_url: needed"},
		{[]string{"--tls-listen", "0.0.0.0:8443", "--tls-cert-file", "c.pem", "--tls-key-file", "k.pem"}, "setting public_url: needed"},
		{[]string{"--tls-listen", ":443", "--tls-cert-file", "c.pem", "--tls-key-file", "k.pem", "--tls-acme-names", "keys.example.org"}, "not both"},
		{[]string{"--tls-listen", ":443", "--tls-acme-names", "*.example.org"}, "setting tls.acme_names"},
		{[]string{"--tls-listen", ":443", "--tls-acme-names", "Keys.example.org"}, "setting tls.acme_names"},
		{[]string{"--tls-listen", ":443", "--tls-acme-names", "192.0.2.1"}, "setting tls.acme_names"},
		{[]string{"--tls-listen", ":443", "--tls-acme-names", "localhost"}, "setting tls.acme_names"},
		{[]string{"--tls-listen", ":443", "--tls-acme-names", "keys.example.org", "--tls-acme-directory", "acme.example.org"}, "setting tls.acme_directory"},
		{[]string{"--tls-listen", ":443", "--tls-acme-names", "keys.example.org", "--tls-http-listen", "nowhere"}, "setting tls.http_listen"},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if _, _, err := loadConfig(fs, c.args, nil); err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%q: err = %v, want one mentioning %q", c.args, err, c.wantErr)
		}
	}
}
