package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/kith-keyserver/kith/cmd/internal/settings"
)

// validate checks the [tls] section: an address, and exactly one source
// of certificates for it.
func (t TLSConfig) validate() error {
	if !t.enabled() {
		for _, s := range []struct {
			key string
			set bool
		}{{"tls.cert_file", t.CertFile != ""}, {"tls.key_file", t.KeyFile != ""},
			{"tls.acme_names", len(t.ACMENames) > 0}, {"tls.http_listen", t.HTTPListen != ""}} {
			if s.set {
				return fmt.Errorf("setting %s: needs tls.listen", s.key)
			}
		}
		return nil
	}
	if err := settings.CheckHostPort(t.Listen); err != nil {
		return fmt.Errorf("setting tls.listen: %w", err)
	}
	if t.HTTPListen != "" {
		if err := settings.CheckHostPort(t.HTTPListen); err != nil {
			return fmt.Errorf("setting tls.http_listen: %w", err)
		}
	}
	files := t.CertFile != "" || t.KeyFile != ""
	switch {
	case files && len(t.ACMENames) > 0:
		return errors.New("setting tls.acme_names: certificates come from tls.cert_file or from ACME, not both")
	case files && (t.CertFile == "" || t.KeyFile == ""):
		return errors.New("setting tls.cert_file: needs tls.key_file, and the other way round")
	case !files && len(t.ACMENames) == 0:
		return errors.New("setting tls.listen: needs tls.cert_file and tls.key_file, or tls.acme_names")
	}
	for _, n := range t.ACMENames {
		if !acmeName(n) {
			return fmt.Errorf("setting tls.acme_names: %q is not a lower-case host name with a dot (no wildcards, no addresses)", n)
		}
	}
	if u, err := url.Parse(t.ACMEDirectory); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("setting tls.acme_directory: %q is not an http(s) URL", t.ACMEDirectory)
	}
	return nil
}

// acmeName reports whether n is a host name a CA can validate over HTTP:
// two or more lower-case labels of letters, digits and hyphens, not all
// digits (an address).
func acmeName(n string) bool {
	if len(n) > 253 || !strings.Contains(n, ".") {
		return false
	}
	digitsOnly := true
	for _, label := range strings.Split(n, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			switch {
			case r >= 'a' && r <= 'z', r == '-':
				digitsOnly = false
			case r >= '0' && r <= '9':
			default:
				return false
			}
		}
	}
	return !digitsOnly
}
