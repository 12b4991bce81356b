// config_mail.go: checking and using the [smtp], [wkd] and [hkp]
// settings of email verification and key discovery.

package main

import (
	"fmt"
	"log/slog"
	netmail "net/mail"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/kith-keyserver/kith/cmd/internal/settings"
	"github.com/kith-keyserver/kith/identity/mail"
)

// validateMail checks the [smtp], [wkd] and [hkp] settings.
func (c Config) validateMail() error {
	if c.SMTP.Address != "" {
		if err := settings.CheckHostPort(c.SMTP.Address); err != nil {
			return fmt.Errorf("setting smtp.address: %w", err)
		}
	}
	if c.SMTP.From != "" {
		if a, err := netmail.ParseAddress(c.SMTP.From); err != nil || a.Address != c.SMTP.From {
			return fmt.Errorf("setting smtp.from: %q is not a bare email address", c.SMTP.From)
		}
	}
	if c.SMTP.MailsPerAddressPerHour == 0 {
		return fmt.Errorf("setting smtp.mails_per_address_per_hour: must not be 0 (negative means no cap)")
	}
	if c.SMTP.Username != "" && c.SMTP.PasswordFile == "" {
		return fmt.Errorf("setting smtp.password_file: needed with smtp.username")
	}
	for _, d := range c.WKD.Domains {
		if d != strings.ToLower(d) || strings.ContainsAny(d, "/:@ ") || !strings.Contains(d, ".") {
			return fmt.Errorf("setting wkd.domains: %q is not a lower-case domain name", d)
		}
	}
	switch c.HKP.EmailLookup {
	case "all", "verified":
	default:
		return fmt.Errorf("setting hkp.email_lookup: %q is neither all nor verified", c.HKP.EmailLookup)
	}
	return nil
}

// mailFrom is the sender address of Kith's mails.
func (c Config) mailFrom() string {
	if c.SMTP.From != "" {
		return c.SMTP.From
	}
	host := "localhost"
	if u, err := url.Parse(c.publicURL()); err == nil && u.Hostname() != "" {
		host = u.Hostname()
	}
	if !strings.Contains(host, ".") {
		host += ".localdomain"
	}
	return "kith@" + host
}

// mailer returns the configured sender: SMTP, or the outbox in the data
// directory when no server is set.
func (c Config) mailer(log *slog.Logger) (mail.Sender, error) {
	if c.SMTP.Address == "" {
		return &mail.Outbox{Dir: filepath.Join(c.DataDir, "outbox"), From: c.mailFrom(), Log: log}, nil
	}
	s := &mail.SMTP{Address: c.SMTP.Address, From: c.mailFrom(), Username: c.SMTP.Username, StartTLS: c.SMTP.StartTLS}
	if c.SMTP.PasswordFile != "" {
		b, err := os.ReadFile(c.SMTP.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("setting smtp.password_file: %w", err)
		}
		s.Password = strings.TrimRight(string(b), "\r\n")
	}
	return s, nil
}
