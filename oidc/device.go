// device.go: the OAuth 2.0 device authorization grant (RFC 8628), for a
// login on a host without a browser: Kith asks the provider's device
// authorization endpoint (discovery's device_authorization_endpoint) for
// a device code and a user code, the person enters the user code at the
// provider's verification URI on another device and approves, and Kith
// redeems the device code at the token endpoint for an ID token.
//
// The device code never leaves the server: StartDevice seals it, with
// the caller's binding (a hash of what the login is to approve) and the
// grant's expiry, under the server's cookie key into DeviceAuthorization.
// Pending, which the caller hands its client; PollDevice opens it only
// with the same binding. So a device code approved for one request
// cannot be redeemed for another. The grant carries no nonce (RFC 8628
// has none, and Dex and zitadel put none in its ID tokens), so the ID
// token itself does not name what it approves: the binding is the
// server's, kept in the sealed state.

package oidc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Errors of the device authorization grant: the token endpoint's answers
// while the person has not finished (RFC 8628, 3.5), and a provider
// without the grant. Test with errors.Is.
var (
	// ErrAuthorizationPending: the person has not approved yet; poll
	// again after the interval.
	ErrAuthorizationPending = errors.New("authorization_pending")
	// ErrSlowDown: polled too often; poll again after the interval grown
	// by five seconds, for this and every later poll.
	ErrSlowDown = errors.New("slow_down")
	// ErrExpiredToken: the device code expired before it was approved;
	// start again.
	ErrExpiredToken = errors.New("expired_token")
	// ErrAccessDenied: the person denied the request.
	ErrAccessDenied = errors.New("access_denied")
	// ErrNoDeviceGrant: the provider's discovery document names no
	// device_authorization_endpoint.
	ErrNoDeviceGrant = errors.New("the provider offers no device authorization grant")
	// ErrDeviceBinding: the sealed device state does not open, is for
	// another provider, or was made for another request than the one
	// polled for.
	ErrDeviceBinding = errors.New("the device authorization is not this request's")
)

// DefaultDeviceInterval is the polling interval when the provider names
// none (RFC 8628, 3.2); SlowDownStep is what each slow_down adds (3.5).
const (
	DefaultDeviceInterval = 5 * time.Second
	SlowDownStep          = 5 * time.Second
)

// grantDeviceCode is the token request's grant type (RFC 8628, 3.4).
const grantDeviceCode = "urn:ietf:params:oauth:grant-type:device_code"

// DeviceAuthorization is a started device authorization grant: what the
// person is shown, and the sealed state to poll with.
type DeviceAuthorization struct {
	// UserCode is what the person enters at VerificationURI;
	// VerificationURIComplete, when the provider gives it, carries the
	// code already.
	UserCode                string
	VerificationURI         string
	VerificationURIComplete string
	// Expires is when the device code stops working.
	Expires time.Time
	// Interval is how long to wait between polls.
	Interval time.Duration
	// Pending is the grant's sealed state (device code, binding, expiry)
	// for PollDevice; neither readable nor changeable outside the
	// server.
	Pending string
}

// deviceState is what Pending seals. Short JSON names keep it small.
type deviceState struct {
	Provider   string `json:"p"`
	DeviceCode string `json:"c"`
	Binding    []byte `json:"b"` // SHA-256 of the caller's binding
	Expires    int64  `json:"e"` // Unix seconds
}

// deviceSealName is the name device states are sealed under.
func deviceSealName(provider string) string { return "kith device grant " + provider }

// deviceAnswer is the device authorization endpoint's answer (RFC 8628,
// 3.2).
type deviceAnswer struct {
	DeviceCode              string `json:"device_code"`
	UserCode                string `json:"user_code"`
	VerificationURI         string `json:"verification_uri"`
	VerificationURIComplete string `json:"verification_uri_complete"`
	// VerificationURL is what some providers (Google) send instead.
	VerificationURL string `json:"verification_url"`
	ExpiresIn       int64  `json:"expires_in"`
	Interval        int64  `json:"interval"`
}

// tokenAnswer is the token endpoint's answer, or its error (RFC 6749,
// 5.1 and 5.2).
type tokenAnswer struct {
	IDToken     string `json:"id_token"`
	AccessToken string `json:"access_token"`
	Error       string `json:"error"`
	Description string `json:"error_description"`
}

// maxAnswer bounds a provider's answer.
const maxAnswer = 1 << 20

// StartDevice asks the provider for a device code with the scopes (nil:
// the provider's configured scopes; openid is added when missing) and
// seals it with binding, which
// PollDevice must be given again. The client is authenticated with its
// secret, as HTTP Basic and in the form too: Dex reads the secret from
// the form, to redeem the approval for the client later.
func (p *Provider) StartDevice(ctx context.Context, scopes []string, binding []byte) (*DeviceAuthorization, error) {
	fail := func(kind error, format string, args ...any) error {
		return fmt.Errorf("oidc: %s: device authorization: %w: %s", p.cfg.Name, kind, fmt.Sprintf(format, args...))
	}
	d, err := p.discover(ctx)
	if err != nil {
		return nil, err
	}
	if d.oauth.Endpoint.DeviceAuthURL == "" {
		return nil, fmt.Errorf("oidc: %s: %w", p.cfg.Name, ErrNoDeviceGrant)
	}
	if scopes == nil {
		scopes = p.scopes
	}
	if !slices.Contains(scopes, "openid") {
		scopes = append([]string{"openid"}, scopes...)
	}
	form := url.Values{"client_id": {p.cfg.ClientID}, "scope": {strings.Join(scopes, " ")}}
	if p.secret != "" {
		form.Set("client_secret", p.secret)
	}
	body, status, err := p.post(ctx, d.oauth.Endpoint.DeviceAuthURL, form)
	if err != nil {
		return nil, fail(ErrProviderUnavailable, "%v", err)
	}
	if status != http.StatusOK {
		var t tokenAnswer
		json.Unmarshal(body, &t)
		return nil, fail(ErrDenied, "HTTP %d: %s: %s", status, printable(t.Error, 64), printable(t.Description, 200))
	}
	var a deviceAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fail(ErrProviderUnavailable, "the answer is not JSON: %v", err)
	}
	if a.VerificationURI == "" {
		a.VerificationURI = a.VerificationURL
	}
	if a.DeviceCode == "" || a.UserCode == "" || a.VerificationURI == "" || a.ExpiresIn <= 0 {
		return nil, fail(ErrProviderUnavailable, "the answer lacks device_code, user_code, verification_uri or expires_in")
	}
	interval := time.Duration(a.Interval) * time.Second
	if interval <= 0 {
		interval = DefaultDeviceInterval
	}
	now := p.now()
	expires := now.Add(time.Duration(a.ExpiresIn) * time.Second)
	sum := sha256.Sum256(binding)
	pending, err := p.sealer.sealJSON(deviceSealName(p.cfg.Name), deviceState{
		Provider: p.cfg.Name, DeviceCode: a.DeviceCode, Binding: sum[:], Expires: expires.Unix(),
	})
	if err != nil {
		return nil, err
	}
	p.log.DebugContext(ctx, "oidc: device authorization started", slog.Duration("interval", interval), slog.Time("expires", expires))
	return &DeviceAuthorization{
		UserCode: a.UserCode, VerificationURI: a.VerificationURI, VerificationURIComplete: a.VerificationURIComplete,
		Expires: expires, Interval: interval, Pending: pending,
	}, nil
}

// PollDevice asks the token endpoint once whether the device
// authorization sealed in pending (for binding) was approved. It returns
// the verified login, or an error wrapping ErrAuthorizationPending,
// ErrSlowDown, ErrExpiredToken, ErrAccessDenied, ErrDeviceBinding,
// ErrExchange or ErrIDToken. The ID token carries no nonce to check: see
// the file's comment for what binds it.
func (p *Provider) PollDevice(ctx context.Context, pending string, binding []byte) (*Login, error) {
	fail := func(kind error, format string, args ...any) error {
		return fmt.Errorf("oidc: %s: device token: %w: %s", p.cfg.Name, kind, fmt.Sprintf(format, args...))
	}
	var st deviceState
	if err := p.sealer.openJSON(deviceSealName(p.cfg.Name), pending, &st); err != nil || st.Provider != p.cfg.Name {
		return nil, fail(ErrDeviceBinding, "the device state does not open for this provider")
	}
	sum := sha256.Sum256(binding)
	if subtle.ConstantTimeCompare(sum[:], st.Binding) != 1 {
		return nil, fail(ErrDeviceBinding, "it was started for another request")
	}
	if !p.now().Before(time.Unix(st.Expires, 0)) {
		return nil, fail(ErrExpiredToken, "the device code expired at %s", time.Unix(st.Expires, 0).UTC().Format(time.RFC3339))
	}
	d, err := p.discover(ctx)
	if err != nil {
		return nil, err
	}
	form := url.Values{"grant_type": {grantDeviceCode}, "device_code": {st.DeviceCode}, "client_id": {p.cfg.ClientID}}
	body, status, err := p.post(ctx, d.oauth.Endpoint.TokenURL, form)
	if err != nil {
		return nil, fail(ErrProviderUnavailable, "%v", err)
	}
	var t tokenAnswer
	if err := json.Unmarshal(body, &t); err != nil {
		return nil, fail(ErrExchange, "HTTP %d, not JSON", status)
	}
	if status != http.StatusOK || t.Error != "" {
		for _, e := range []error{ErrAuthorizationPending, ErrSlowDown, ErrExpiredToken, ErrAccessDenied} {
			if t.Error == e.Error() {
				return nil, fail(e, "%s", printable(t.Description, 200))
			}
		}
		return nil, fail(ErrExchange, "HTTP %d: %s: %s", status, printable(t.Error, 64), printable(t.Description, 200))
	}
	if t.IDToken == "" {
		return nil, fail(ErrIDToken, "the token response has no id_token (was scope openid granted?)")
	}
	claims, jwk, err := p.verifyIDToken(ctx, d, t.IDToken, t.AccessToken)
	if err != nil {
		return nil, fmt.Errorf("oidc: %s: device token: %w", p.cfg.Name, err)
	}
	if err := p.checkEmailDomain(claims); err != nil {
		return nil, fmt.Errorf("oidc: %s: device token: %w", p.cfg.Name, err)
	}
	return &Login{
		Provider: p.cfg.Name, Issuer: claims.Issuer, Subject: claims.Subject,
		Email: claims.Email, EmailVerified: claims.EmailVerified,
		PreferredUsername: claims.PreferredUsername, Name: claims.Name,
		ProposedHandle: proposeHandle(p.handleClaim, claims),
		RawIDToken:     t.IDToken, SigningKey: jwk,
		AuthTime: claims.AuthTime, IssuedAt: claims.IssuedAt, Expiry: claims.Expiry,
		Next: "/", Nonce: claims.Nonce, MinimalClaims: minimalClaims(t.IDToken), Claims: claims,
	}, nil
}

// post sends a form to a provider endpoint, authenticating the client
// with HTTP Basic when it has a secret, and returns the bounded answer.
func (p *Provider) post(ctx context.Context, endpoint string, form url.Values) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if p.secret != "" {
		req.SetBasicAuth(url.QueryEscape(p.cfg.ClientID), url.QueryEscape(p.secret))
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, resp.StatusCode, err
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "application/json" && !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		return nil, resp.StatusCode, fmt.Errorf("HTTP %d with %s, not JSON", resp.StatusCode, printable(ct, 64))
	}
	return body, resp.StatusCode, nil
}
