// Package oidc is Kith's OpenID Connect login: the protocol between Kith (the
// relying party) and the providers people already have accounts with
// (Keycloak, Okta, Google, GitLab, Dex, any certified OpenID provider).
//
// It owns:
//
//   - provider configuration ([ProviderConfig]), with the client secret
//     taken from the config, a file or an environment variable and never
//     printed or logged;
//   - discovery and key sets, on go-oidc and x/oauth2 ([NewProvider]); a
//     provider that is down when Kith starts is discovered later, on the
//     next login;
//   - the authorization code flow with PKCE (S256), state and nonce, bound
//     to a short-lived, encrypted and authenticated cookie ([Provider.Begin],
//     [Provider.Finish]);
//   - verification of the ID token and the claims Kith keeps from it
//     ([Login]), including the provider's public key (JWK) that verified
//     it, so that the login is evidence a third party can re-check offline
//     ([VerifyEvidence]);
//   - open-redirect protection for the page to return to ([SafeNext]);
//   - a stateless CSRF token helper for state-changing forms ([CSRFToken],
//     [CheckCSRF]).
//
// It does not own sessions (the server-side session store is the web
// package's), identities and handles (package identity decides whether a
// login creates or finds an identity and whether a proposed handle is free),
// evidence records (identity stores the [Login]'s raw ID token and JWK), or
// pages and routes (the web package mounts /login/{provider} on
// [Provider.Begin] and /login/{provider}/callback on [Provider.Finish]).
//
// Errors are sentinels to test with errors.Is, so a page can tell a person
// what went wrong: [ErrNoLogin], [ErrState], [ErrDenied], [ErrExchange],
// [ErrIDToken] (with [ErrSignature], [ErrUnknownKey], [ErrIssuer],
// [ErrAudience], [ErrExpired] or [ErrNonce] beside it), [ErrEmailDomain],
// [ErrProviderUnavailable], [ErrUnknownProvider] and [ErrConfig].
//
// Package oidctest runs a real OpenID provider in-process for tests.
package oidc
