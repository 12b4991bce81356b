package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestMailAndDiscoverySettings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kith.toml")
	os.WriteFile(file, []byte("[smtp]\naddress = \"mail.example.org:587\"\nusername = \"kith\"\npassword_file = \"/etc/kith/smtp\"\n[wkd]\ndomains = [\"example.org\", \"example.net\"]\n[hkp]\nemail_lookup = \"verified\"\n"), 0o600)
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg, _, err := loadConfig(fs, []string{"--config", file, "--smtp-from", "keys@example.org"},
		[]string{"KITH_SMTP_STARTTLS=false", "KITH_WKD_DOMAINS=example.com, example.edu", "KITH_SMTP_MAILS_PER_ADDRESS_PER_HOUR=5"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SMTP.Address != "mail.example.org:587" || cfg.SMTP.Username != "kith" || cfg.SMTP.PasswordFile != "/etc/kith/smtp" ||
		cfg.SMTP.From != "keys@example.org" || cfg.SMTP.StartTLS || cfg.HKP.EmailLookup != "verified" || cfg.SMTP.MailsPerAddressPerHour != 5 {
		t.Errorf("config %+v %+v", cfg.SMTP, cfg.HKP)
	}
	if !slices.Equal(cfg.WKD.Domains, []string{"example.com", "example.edu"}) {
		t.Errorf("wkd.domains %q (the environment beats the file)", cfg.WKD.Domains)
	}
	def := defaultConfig()
	if !def.SMTP.StartTLS || def.HKP.EmailLookup != "all" || def.mailFrom() != "kith@127.0.0.1" || def.SMTP.MailsPerAddressPerHour != 3 {
		t.Errorf("defaults: starttls %v, email_lookup %q, from %q, mails per address %d", def.SMTP.StartTLS, def.HKP.EmailLookup, def.mailFrom(), def.SMTP.MailsPerAddressPerHour)
	}
}

func TestMailAndDiscoverySettingsRefuseBadValues(t *testing.T) {
	for _, c := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--smtp-address", "mail.example.org"}, "setting smtp.address"},
		{[]string{"--smtp-from", "Kith <k@example.org>"}, "setting smtp.from"},
		{[]string{"--smtp-username", "kith"}, "setting smtp.password_file"},
		{[]string{"--wkd-domains", "Example.org"}, "setting wkd.domains"},
		{[]string{"--wkd-domains", "https://example.org"}, "setting wkd.domains"},
		{[]string{"--hkp-email-lookup", "some"}, "setting hkp.email_lookup"},
		{[]string{"--smtp-mails-per-address-per-hour", "0"}, "setting smtp.mails_per_address_per_hour"},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if _, _, err := loadConfig(fs, c.args, nil); err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%q: %v, want %q", c.args, err, c.wantErr)
		}
	}
}
