// flow.go: the authorization code flow with PKCE (S256), state and nonce:
// Begin sends the browser to the provider, Finish takes the callback,
// exchanges the code and verifies the ID token.

package oidc

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Begin starts a login: it seals a new state, nonce and PKCE verifier, and
// next (through SafeNext), into the flow cookie and redirects the browser to
// the provider's authorization endpoint. It writes the response only on
// success; on error (ErrProviderUnavailable when the provider cannot be
// discovered) the caller renders the error page.
func (p *Provider) Begin(w http.ResponseWriter, r *http.Request, next string) error {
	return p.BeginWith(w, r, BeginOptions{Next: next})
}

// BeginOptions are the choices of a login's start.
type BeginOptions struct {
	// Next is where the login returns (through SafeNext).
	Next string
	// Nonce, when set, is the nonce to send instead of a random one: a
	// consent login's commitment to the statement it approves (as
	// OpenPubkey does), which must itself hold at least 128 bits of
	// randomness. Finish checks the ID token carries it, as always.
	Nonce string
	// Pending is what the caller needs back when the login finishes
	// (Login.Pending): sealed in the flow cookie with the rest, so nobody
	// but this server reads or changes it. At most MaxPending bytes.
	Pending string
	// Scopes, when set, are the scopes to ask for instead of the
	// provider's configured ones: a consent login asks for "openid" only,
	// so that its ID token carries no email or name.
	Scopes []string
}

// MaxPending is the most BeginOptions.Pending may hold.
const MaxPending = 2600

// minNonceLen is the shortest nonce BeginWith takes from its caller:
// 22 base64url characters are 128 bits.
const minNonceLen = 22

// BeginWith is Begin with the nonce and pending data of opts.
func (p *Provider) BeginWith(w http.ResponseWriter, r *http.Request, opts BeginOptions) error {
	ctx := r.Context()
	next := opts.Next
	if len(opts.Pending) > MaxPending {
		return fmt.Errorf("oidc: %s: begin: %d bytes pending, at most %d fit in the flow cookie", p.cfg.Name, len(opts.Pending), MaxPending)
	}
	if opts.Nonce != "" && (len(opts.Nonce) < minNonceLen || len(opts.Nonce) > 255 || printable(opts.Nonce, 255) != opts.Nonce) {
		return fmt.Errorf("oidc: %s: begin: a nonce must be %d to 255 printable characters, not %d", p.cfg.Name, minNonceLen, len(opts.Nonce))
	}
	d, err := p.discover(ctx)
	if err != nil {
		return err
	}
	state, err := randomToken()
	if err != nil {
		return fmt.Errorf("oidc: %s: begin: %w", p.cfg.Name, err)
	}
	nonce := opts.Nonce
	if nonce == "" {
		if nonce, err = randomToken(); err != nil {
			return fmt.Errorf("oidc: %s: begin: %w", p.cfg.Name, err)
		}
	}
	verifier := oauth2.GenerateVerifier()
	now := p.now()
	safe := SafeNext(next)
	secure := p.secure || r.TLS != nil
	name := cookieName(p.cfg.Name, secure)
	value, err := p.sealer.seal(name, flowState{
		Provider: p.cfg.Name,
		State:    state,
		Nonce:    nonce,
		Verifier: verifier,
		Next:     safe,
		Pending:  opts.Pending,
		Expires:  now.Add(FlowLifetime).Unix(),
	})
	if err != nil {
		return fmt.Errorf("oidc: %s: begin: %w", p.cfg.Name, err)
	}
	http.SetCookie(w, flowCookie(name, value, secure, now.Add(FlowLifetime)))
	w.Header().Set("Cache-Control", "no-store")
	authOpts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier), gooidc.Nonce(nonce)}
	if len(opts.Scopes) > 0 {
		authOpts = append(authOpts, oauth2.SetAuthURLParam("scope", strings.Join(opts.Scopes, " ")))
	}
	target := d.oauth.AuthCodeURL(state, authOpts...)
	p.log.DebugContext(ctx, "oidc: login begun", slog.String("next", safe), slog.Bool("next_refused", safe != next))
	http.Redirect(w, r, target, http.StatusFound)
	return nil
}

// Finish completes a login at the callback URL. It deletes the flow cookie
// first (a login finishes at most once: a replayed callback finds no
// cookie), then checks the state, exchanges the code with the PKCE
// verifier, verifies the ID token (signature by a key the provider
// publishes, issuer, audience and authorized party, expiry, nonce, and the
// access token hash when present) and the email domain restriction.
//
// It writes only the cookie deletion: the caller creates the session and
// redirects to Login.Next. On error the Login is nil and the error wraps one
// of ErrNoLogin, ErrState, ErrDenied, ErrExchange, ErrIDToken (with its
// cause), ErrEmailDomain or ErrProviderUnavailable.
func (p *Provider) Finish(w http.ResponseWriter, r *http.Request) (*Login, error) {
	login, err := p.finish(w, r)
	if err != nil {
		p.log.DebugContext(r.Context(), "oidc: login refused", slog.Any("error", err))
		return nil, err
	}
	p.log.DebugContext(r.Context(), "oidc: login verified", slog.String("subject", login.Subject), slog.Bool("email_verified", login.EmailVerified))
	return login, nil
}

func (p *Provider) finish(w http.ResponseWriter, r *http.Request) (*Login, error) {
	ctx := r.Context()
	fail := func(kind error, format string, args ...any) error {
		return fmt.Errorf("oidc: %s: finish: %w: %s", p.cfg.Name, kind, fmt.Sprintf(format, args...))
	}
	w.Header().Set("Cache-Control", "no-store")
	flow, err := p.takeFlow(w, r)
	if err != nil {
		return nil, fail(ErrNoLogin, "%v", err)
	}
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		return nil, fail(ErrDenied, "%s: %s", printable(e, 64), printable(q.Get("error_description"), 200))
	}
	got := q.Get("state")
	if got == "" {
		return nil, fail(ErrState, "the callback has no state")
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(flow.State)) != 1 {
		return nil, fail(ErrState, "the callback's state is not this login's")
	}
	code := q.Get("code")
	if code == "" {
		return nil, fail(ErrDenied, "the callback has no code")
	}
	d, err := p.discover(ctx)
	if err != nil {
		return nil, err
	}
	tok, err := d.oauth.Exchange(gooidc.ClientContext(ctx, p.client), code, oauth2.VerifierOption(flow.Verifier))
	if err != nil {
		return nil, fail(ErrExchange, "%s", describeExchangeError(err))
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, fail(ErrIDToken, "the token response has no id_token")
	}
	claims, jwk, err := p.verifyIDToken(ctx, d, raw, tok.AccessToken)
	if err != nil {
		return nil, fmt.Errorf("oidc: %s: finish: %w", p.cfg.Name, err)
	}
	if subtle.ConstantTimeCompare([]byte(claims.Nonce), []byte(flow.Nonce)) != 1 {
		return nil, fmt.Errorf("oidc: %s: finish: %w: %w", p.cfg.Name, ErrIDToken, ErrNonce)
	}
	if err := p.checkEmailDomain(claims); err != nil {
		return nil, fmt.Errorf("oidc: %s: finish: %w", p.cfg.Name, err)
	}
	return &Login{
		Provider:          p.cfg.Name,
		Issuer:            claims.Issuer,
		Subject:           claims.Subject,
		Email:             claims.Email,
		EmailVerified:     claims.EmailVerified,
		PreferredUsername: claims.PreferredUsername,
		Name:              claims.Name,
		ProposedHandle:    proposeHandle(p.handleClaim, claims),
		RawIDToken:        raw,
		SigningKey:        jwk,
		AuthTime:          claims.AuthTime,
		IssuedAt:          claims.IssuedAt,
		Expiry:            claims.Expiry,
		Next:              SafeNext(flow.Next),
		Nonce:             claims.Nonce,
		Pending:           flow.Pending,
		MinimalClaims:     minimalClaims(raw),
		Claims:            claims,
	}, nil
}

// takeFlow reads and deletes this provider's flow cookie (under either
// name: the callback may come over another scheme than Begin saw).
func (p *Provider) takeFlow(w http.ResponseWriter, r *http.Request) (flowState, error) {
	var found *http.Cookie
	for _, secure := range []bool{true, false} {
		name := cookieName(p.cfg.Name, secure)
		c, err := r.Cookie(name)
		if err != nil {
			continue
		}
		http.SetCookie(w, clearCookie(name, secure))
		if found == nil {
			found = c
		}
	}
	if found == nil {
		return flowState{}, errors.New("no login cookie (the login was not begun in this browser, or was already finished)")
	}
	f, err := p.sealer.open(found.Name, found.Value, p.now())
	if err != nil {
		return flowState{}, err
	}
	if f.Provider != p.cfg.Name {
		return flowState{}, errors.New("the login cookie is for another provider")
	}
	return f, nil
}

// verifyIDToken verifies raw with the provider's keys and go-oidc's
// verifier (and its at_hash against accessToken, when both are present),
// and returns its claims and the JWK that verified it. Errors wrap
// ErrIDToken and, where known, the cause.
func (p *Provider) verifyIDToken(ctx context.Context, d *discovered, raw, accessToken string) (*Claims, []byte, error) {
	ctx = gooidc.ClientContext(ctx, p.client)
	// The signature first, with the key it names: this yields the key for
	// the evidence, and a clear error for a forged or foreign token.
	payload, jwk, err := d.keys.verify(ctx, raw)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrIDToken, err)
	}
	claims, err := parseClaims(payload)
	if err != nil {
		return nil, nil, err
	}
	if err := checkIssuerAudience(claims, p.cfg.Issuer, p.cfg.ClientID); err != nil {
		return nil, nil, err
	}
	// Then go-oidc's checks of the same token (issuer, audience, expiry, not
	// before), which are the authority.
	tok, err := d.verifier.Verify(ctx, raw)
	if err != nil {
		var expired *gooidc.TokenExpiredError
		if errors.As(err, &expired) {
			return nil, nil, fmt.Errorf("%w: %w at %s", ErrIDToken, ErrExpired, expired.Expiry.UTC().Format("2006-01-02T15:04:05Z"))
		}
		return nil, nil, fmt.Errorf("%w: %v", ErrIDToken, err)
	}
	if accessToken != "" && tok.AccessTokenHash != "" {
		// Kith does not use the access token, but a mismatched at_hash
		// means the token response was put together from two responses.
		if err := tok.VerifyAccessToken(accessToken); err != nil {
			return nil, nil, fmt.Errorf("%w: at_hash: %v", ErrIDToken, err)
		}
	}
	return claims, jwk, nil
}

// checkIssuerAudience checks iss, aud and azp (OpenID Connect Core 1.0,
// 3.1.3.7, items 2 to 5).
func checkIssuerAudience(c *Claims, issuer, clientID string) error {
	if c.Issuer != issuer {
		return fmt.Errorf("%w: %w: the token names %q, not %q", ErrIDToken, ErrIssuer, c.Issuer, issuer)
	}
	if !slices.Contains(c.Audience, clientID) {
		return fmt.Errorf("%w: %w: audience %q does not include %q", ErrIDToken, ErrAudience, c.Audience, clientID)
	}
	if (len(c.Audience) > 1 || c.AuthorizedParty != "") && c.AuthorizedParty != clientID {
		return fmt.Errorf("%w: %w: authorized party %q is not %q", ErrIDToken, ErrAudience, c.AuthorizedParty, clientID)
	}
	return nil
}

// checkEmailDomain applies AllowedEmailDomains: the email must be verified
// by the provider and its domain listed.
func (p *Provider) checkEmailDomain(c *Claims) error {
	if len(p.allowedDomains) == 0 {
		return nil
	}
	if c.Email == "" || !c.EmailVerified {
		return fmt.Errorf("%w: the provider did not assert a verified email", ErrEmailDomain)
	}
	i := strings.LastIndexByte(c.Email, '@')
	if i < 0 {
		return fmt.Errorf("%w: %q is not an email address", ErrEmailDomain, c.Email)
	}
	if !slices.Contains(p.allowedDomains, strings.ToLower(c.Email[i+1:])) {
		return fmt.Errorf("%w: %q", ErrEmailDomain, c.Email[i+1:])
	}
	return nil
}

// describeExchangeError summarises a token endpoint error without its
// response body, which could echo what was sent.
func describeExchangeError(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		s := "the provider answered"
		if re.Response != nil {
			s += " " + re.Response.Status
		}
		if re.ErrorCode != "" {
			s += ": " + printable(re.ErrorCode, 64)
		}
		if re.ErrorDescription != "" {
			s += ": " + printable(re.ErrorDescription, 200)
		}
		return s
	}
	return err.Error()
}

// randomToken returns 32 random bytes, base64url-encoded.
func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// printable clips s to n bytes of printable ASCII, for error text that
// came from outside.
func printable(s string, n int) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < n; i++ {
		if c := s[i]; c >= ' ' && c < 0x7f {
			b.WriteByte(c)
		} else {
			b.WriteByte('?')
		}
	}
	return b.String()
}

// minimalTokenClaims are the claims an ID token may carry and still tell
// nothing about its account beyond the account itself: issuer, subject,
// audience, times, nonce and the protocol's own.
var minimalTokenClaims = map[string]bool{
	"iss": true, "sub": true, "aud": true, "azp": true, "exp": true, "iat": true, "nbf": true, "auth_time": true,
	"nonce": true, "at_hash": true, "c_hash": true, "s_hash": true, "sid": true, "jti": true, "amr": true, "acr": true,
	"typ": true, "client_id": true,
}

// minimalClaims reports whether the (verified) token's payload holds only
// minimalTokenClaims.
func minimalClaims(raw string) bool {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(payload, &m) != nil {
		return false
	}
	for k := range m {
		if !minimalTokenClaims[k] {
			return false
		}
	}
	return true
}
