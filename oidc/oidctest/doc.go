// Package oidctest runs a real OpenID provider in-process for tests: the
// OpenID-certified provider library github.com/zitadel/oidc/v3 (its op
// package) over a minimal in-memory storage written here, on a loopback
// TLS server. It serves discovery, the key set, the authorization and
// token endpoints, and a login page that a test's HTTP client (with a
// cookie jar) drives without a browser:
//
//	GET  /login?authRequestID=ID   a form with the request ID and a username
//	POST /login                    approves the request as that user and
//	                               redirects back through the provider to
//	                               the client's redirect URI with a code
//
// With Config.AutoLogin the GET approves at once, so a plain client that
// follows redirects goes from Kith's Begin straight to its callback.
//
// It also serves the device authorization grant (RFC 8628): the device
// authorization endpoint (discovery's device_authorization_endpoint), the
// device code at the token endpoint, and the verification page a test
// posts the user code to (see device.go). A user's Groups go into ID
// tokens as the groups claim when the client asks for scope groups.
//
// Some switches make the provider misbehave on purpose, so tests can check
// that Kith handles what it sends: Client.Audience (more audiences in ID
// tokens; the provider always adds the client's own, with azp naming it),
// Client.IDTokenLifetime below zero (tokens already expired) and
// Server.SignWithUnpublishedKey (tokens signed by a key the key set does not
// list).
//
// It is for tests only: nothing checks passwords, and all state is in
// memory.
package oidctest
