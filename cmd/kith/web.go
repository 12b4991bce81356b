package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/maillink"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/oidc"
	"github.com/kith-keyserver/kith/web"
)

// newProviders returns the configured OpenID providers, which the pages'
// logins and the API's device logins share.
func newProviders(ctx context.Context, cfg Config, st *postgres.Store, log *slog.Logger) (*oidc.Providers, error) {
	key, err := cookieKey(ctx, cfg, st)
	if err != nil {
		return nil, fmt.Errorf("setting web.cookie_key_file: %w", err)
	}
	providers, err := oidc.NewProviders(ctx, cfg.oidcProviders(), oidc.Options{CookieKey: key, Logger: log.With("component", "oidc")})
	if err != nil {
		return nil, fmt.Errorf("setting oidc.provider: %w", err)
	}
	return providers, nil
}

// mountPages adds the web pages and the OpenID Connect login (at
// providers) to mux.
func mountPages(ctx context.Context, mux *http.ServeMux, cfg Config, st *postgres.Store, ids *identity.Service,
	ks *keys.Service, providers *oidc.Providers, limits clientLimits, log *slog.Logger) error {
	key, err := cookieKey(ctx, cfg, st)
	if err != nil {
		return fmt.Errorf("setting web.cookie_key_file: %w", err)
	}
	mailer, err := cfg.mailer(log.With("component", "mail"))
	if err != nil {
		return err
	}
	// The pages mail the same links as the VKS API, through the same
	// service: its per-address window and per-recipient cap count both.
	deps := web.Deps{Keys: st, Uploads: ks, Identities: ids, Sessions: st, VerifiedEmails: st, Emails: ids,
		Mailer: &maillink.Mailer{PublicURL: cfg.publicURL(), Server: cfg.serverName(), Mail: mailer}}
	if len(cfg.OIDC.Providers) > 0 {
		deps.Providers = providers
	}
	pages, err := web.NewHandler(deps, web.Options{
		CSRFKey:         key,
		SessionLifetime: time.Duration(cfg.Web.SessionLifetime),
		SessionIdle:     time.Duration(cfg.Web.SessionIdle),
		// With TLS of Kith's own, browsers on the plain listeners are sent
		// to https: a cookie is only ever wanted there.
		SecureCookies:    cfg.Web.SecureCookies || cfg.TLS.enabled() || strings.HasPrefix(cfg.publicURL(), "https://"),
		UploadLimit:      limits.uploads,
		EmailLookupLimit: limits.emailLookups,
		// The pages' mail buttons: as many as the VKS API's requests.
		MailRequestsPerMinute: cfg.MailRequestsPerMinute,
		Logger:                log.With("component", "web"),
	})
	if err != nil {
		return fmt.Errorf("web: %w", err)
	}
	go pages.Run(ctx)
	pages.Register(mux)
	return nil
}

// cookieKey returns the key that seals login cookies and CSRF tokens: the
// file's when web.cookie_key_file is set, else the store's shared secret,
// so that every node of one database uses the same key.
func cookieKey(ctx context.Context, cfg Config, st *postgres.Store) ([]byte, error) {
	if cfg.Web.CookieKeyFile == "" {
		return st.Secret(ctx, "web.cookie_key", oidc.CookieKeySize)
	}
	b, err := os.ReadFile(cfg.Web.CookieKeyFile)
	if err != nil {
		return nil, err
	}
	if len(b) != oidc.CookieKeySize {
		return nil, fmt.Errorf("%s holds %d bytes, want exactly %d random bytes", cfg.Web.CookieKeyFile, len(b), oidc.CookieKeySize)
	}
	return b, nil
}
