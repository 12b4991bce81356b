// errors.go: the sentinel errors of the login flow, one per thing a person
// or an operator can be told.

package oidc

import (
	"errors"
	"fmt"
)

// Errors of this package; test with errors.Is. Each returned error wraps
// one of them with the operation and the provider's name. A refused ID
// token wraps ErrIDToken and, where the cause is known, one more of the
// ErrSignature … ErrNonce group.
var (
	// ErrConfig: a ProviderConfig or Options value is invalid. The error is a
	// *ConfigError naming the field.
	ErrConfig = errors.New("invalid configuration")
	// ErrUnknownProvider: no provider of that name is configured.
	ErrUnknownProvider = errors.New("unknown provider")
	// ErrProviderUnavailable: the provider's discovery document or keys
	// could not be fetched; the login can be tried again later.
	ErrProviderUnavailable = errors.New("provider unavailable")
	// ErrNoLogin: the callback came without a valid login cookie: the login
	// was never begun in this browser, took longer than ten minutes, was
	// already finished (a replayed callback), or the cookie was tampered
	// with.
	ErrNoLogin = errors.New("no login in progress")
	// ErrState: the callback's state parameter is missing or is not the one
	// this browser's login began with (a forged or crossed callback).
	ErrState = errors.New("state mismatch")
	// ErrDenied: the provider answered the callback with an error, e.g. the
	// person declined, or the callback carries no code.
	ErrDenied = errors.New("provider refused the login")
	// ErrExchange: the provider refused to exchange the code for tokens
	// (e.g. a replayed or expired code, or a wrong client secret).
	ErrExchange = errors.New("code exchange failed")
	// ErrIDToken: the ID token is missing, malformed or fails verification.
	ErrIDToken = errors.New("invalid ID token")
	// ErrSignature: the ID token's signature does not verify with the key
	// it names.
	ErrSignature = errors.New("bad signature")
	// ErrUnknownKey: the ID token names a key the provider does not publish.
	ErrUnknownKey = errors.New("signed by an unknown key")
	// ErrIssuer: the ID token, or the provider's discovery document, names
	// another issuer than the one configured.
	ErrIssuer = errors.New("wrong issuer")
	// ErrAudience: the ID token was issued to another client.
	ErrAudience = errors.New("issued to another client")
	// ErrExpired: the ID token has expired.
	ErrExpired = errors.New("expired")
	// ErrNonce: the ID token's nonce is not the one this login sent.
	ErrNonce = errors.New("nonce mismatch")
	// ErrEmailDomain: the provider is restricted to some email domains and
	// the account's email is not verified in one of them.
	ErrEmailDomain = errors.New("email domain not allowed")
)

// ConfigError is the error of an invalid ProviderConfig or Options: which
// provider, which field (by its configuration key, e.g. "client_secret_file")
// and what is wrong. It wraps ErrConfig.
type ConfigError struct {
	Provider string // the provider's Name, if known
	Field    string // the configuration key
	Reason   string
}

// Error says which field is wrong and why; it never contains a secret.
func (e *ConfigError) Error() string {
	if e.Provider == "" {
		return fmt.Sprintf("oidc: %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("oidc: provider %q: %s: %s", e.Provider, e.Field, e.Reason)
}

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }
