// provider.go: one configured OpenID provider: its discovery document, key
// set and OAuth 2.0 client, found lazily so that a provider down when Kith
// starts does not stop Kith.

package oidc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"
)

// Defaults of Options.
const (
	// DefaultRetryInterval is the least time between two discovery attempts
	// of a provider that is down.
	DefaultRetryInterval = 10 * time.Second
	// DefaultHTTPTimeout bounds each request to a provider when Options has
	// no HTTPClient.
	DefaultHTTPTimeout = 15 * time.Second
	// discoveryTimeout bounds one discovery attempt.
	discoveryTimeout = 15 * time.Second
)

// Options are the server-wide settings of every provider.
type Options struct {
	// CookieKey seals the login-flow cookie (AES-256-GCM): 32 random bytes,
	// the same on every Kith node, kept secret. Required.
	CookieKey []byte
	// HTTPClient makes the requests to providers (discovery, keys, token);
	// by default a client with DefaultHTTPTimeout.
	HTTPClient *http.Client
	// Logger receives debug lines about each login and warnings about
	// providers that are down; slog.Default() when nil. No secret, code,
	// state, nonce or token is ever logged.
	Logger *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// RetryInterval is the least time between discovery attempts of a
	// provider that is down; DefaultRetryInterval when zero.
	RetryInterval time.Duration
	// RequireDiscovery makes NewProvider fail when the provider cannot be
	// discovered, instead of retrying on the next login.
	RequireDiscovery bool
}

// Provider is one OpenID provider Kith accepts logins from. Its methods are
// safe for concurrent use.
type Provider struct {
	cfg            ProviderConfig // ClientSecret cleared
	secret         string
	scopes         []string
	allowedDomains []string // lower case
	handleClaim    string
	secure         bool // the redirect URL is https
	client         *http.Client
	log            *slog.Logger
	now            func() time.Time
	retry          time.Duration
	sealer         *sealer

	mu      sync.Mutex
	disc    *discovered
	lastErr error
	lastTry time.Time
}

// discovered is what discovery yields.
type discovered struct {
	oauth    oauth2.Config
	verifier *gooidc.IDTokenVerifier
	keys     *keySet
	algs     []string
}

// NewProvider checks cfg and opts, reads the client secret, and discovers
// the provider (its /.well-known/openid-configuration). A provider that
// cannot be discovered yet is not an error unless opts.RequireDiscovery is
// set: it is logged, and discovery is tried again on the next login (see
// Ready). Configuration errors are *ConfigError values.
func NewProvider(ctx context.Context, cfg ProviderConfig, opts Options) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	secret, err := cfg.secret()
	if err != nil {
		return nil, err
	}
	s, err := newSealer(opts.CookieKey)
	if err != nil {
		if ce, ok := errors.AsType[*ConfigError](err); ok {
			ce.Provider = cfg.Name
		}
		return nil, err
	}
	p := &Provider{
		cfg:         cfg,
		secret:      secret,
		scopes:      cfg.scopes(),
		handleClaim: cfg.HandleClaim,
		secure:      strings.HasPrefix(cfg.RedirectURL, "https://"),
		client:      opts.HTTPClient,
		log:         opts.Logger,
		now:         opts.Now,
		retry:       opts.RetryInterval,
		sealer:      s,
	}
	p.cfg.ClientSecret = ""
	for _, d := range cfg.AllowedEmailDomains {
		p.allowedDomains = append(p.allowedDomains, strings.ToLower(d))
	}
	if p.handleClaim == "" {
		p.handleClaim = HandleClaimPreferredUsername
	}
	if p.client == nil {
		p.client = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	p.log = p.log.With(slog.String("oidc_provider", cfg.Name))
	if p.now == nil {
		p.now = time.Now
	}
	if p.retry <= 0 {
		p.retry = DefaultRetryInterval
	}
	if _, err := p.discover(ctx); err != nil {
		if opts.RequireDiscovery {
			return nil, err
		}
		p.log.WarnContext(ctx, "oidc: provider not discovered; will retry on the next login", slog.Any("error", err))
	}
	return p, nil
}

// Name returns the provider's configured name.
func (p *Provider) Name() string { return p.cfg.Name }

// Issuer returns the provider's configured issuer URL.
func (p *Provider) Issuer() string { return p.cfg.Issuer }

// Config returns the provider's configuration, without the inline secret.
func (p *Provider) Config() ProviderConfig { return p.cfg }

// String names the provider; it never shows the secret.
func (p *Provider) String() string { return "oidc.Provider(" + p.cfg.Name + ")" }

// LogValue logs the provider's name and issuer.
func (p *Provider) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", p.cfg.Name), slog.String("issuer", p.cfg.Issuer))
}

// Ready discovers the provider if that has not succeeded yet (at most once
// per retry interval) and reports whether logins can begin. A login page
// can call it to show a provider as unavailable. The error wraps
// ErrProviderUnavailable, and ErrIssuer when the provider names another
// issuer than the configured one.
func (p *Provider) Ready(ctx context.Context) error {
	_, err := p.discover(ctx)
	return err
}

// discover returns the discovered provider, trying discovery when it has not
// succeeded and the last attempt is older than the retry interval.
func (p *Provider) discover(ctx context.Context) (*discovered, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.disc != nil {
		return p.disc, nil
	}
	now := p.now()
	if !p.lastTry.IsZero() && now.Sub(p.lastTry) < p.retry {
		return nil, p.lastErr
	}
	p.lastTry = now
	d, err := p.discoverOnce(ctx)
	if err != nil {
		p.lastErr = fmt.Errorf("oidc: %s: discovery: %w", p.cfg.Name, err)
		return nil, p.lastErr
	}
	p.disc, p.lastErr = d, nil
	p.log.DebugContext(ctx, "oidc: provider discovered", slog.String("issuer", p.cfg.Issuer), slog.Any("algorithms", d.algs))
	return d, nil
}

func (p *Provider) discoverOnce(ctx context.Context) (*discovered, error) {
	// A login's cancelled request must not fail discovery for everyone.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discoveryTimeout)
	defer cancel()
	gp, err := gooidc.NewProvider(gooidc.ClientContext(ctx, p.client), p.cfg.Issuer)
	if err != nil {
		var mismatch *gooidc.IssuerMismatchError
		if errors.As(err, &mismatch) {
			return nil, fmt.Errorf("%w: %w: the provider calls itself %q, not %q", ErrProviderUnavailable, ErrIssuer, mismatch.Discovered, mismatch.Provided)
		}
		return nil, fmt.Errorf("%w: %v", ErrProviderUnavailable, err)
	}
	var meta struct {
		JWKSURI string   `json:"jwks_uri"`
		Algs    []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := gp.Claims(&meta); err != nil {
		return nil, fmt.Errorf("%w: discovery document: %v", ErrProviderUnavailable, err)
	}
	// The endpoints must be as safe as the issuer: https, or http on a
	// loopback address.
	ep := gp.Endpoint()
	for _, e := range []struct{ name, url string }{{"jwks_uri", meta.JWKSURI}, {"authorization_endpoint", ep.AuthURL}, {"token_endpoint", ep.TokenURL}, {"device_authorization_endpoint", ep.DeviceAuthURL}} {
		if e.url == "" && e.name == "device_authorization_endpoint" {
			continue // optional: only the device grant needs it
		}
		if err := checkURL(e.url, true); err != nil {
			return nil, fmt.Errorf("%w: discovery document: %s: %v", ErrProviderUnavailable, e.name, err)
		}
	}
	var algs []jose.SignatureAlgorithm
	var names []string
	for _, a := range meta.Algs {
		if slices.Contains(asymmetricAlgs, jose.SignatureAlgorithm(a)) {
			algs = append(algs, jose.SignatureAlgorithm(a))
			names = append(names, a)
		}
	}
	if len(algs) == 0 {
		// RS256 is the one algorithm every provider must support.
		algs, names = []jose.SignatureAlgorithm{jose.RS256}, []string{string(jose.RS256)}
	}
	keys := &keySet{url: meta.JWKSURI, client: p.client, algs: algs, now: p.now}
	return &discovered{
		oauth: oauth2.Config{
			ClientID:     p.cfg.ClientID,
			ClientSecret: p.secret,
			Endpoint:     ep,
			RedirectURL:  p.cfg.RedirectURL,
			Scopes:       p.scopes,
		},
		verifier: gooidc.NewVerifier(p.cfg.Issuer, keys, &gooidc.Config{
			ClientID:             p.cfg.ClientID,
			SupportedSigningAlgs: names,
			Now:                  p.now,
		}),
		keys: keys,
		algs: names,
	}, nil
}
