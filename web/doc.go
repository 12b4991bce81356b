// Package web is Kith's server-rendered web frontend: templ pages that
// work without JavaScript, plain accessible HTML and one small embedded
// style sheet.
//
// It owns:
//
//   - the public pages: the home page with its search box (/), search
//     results (/search), a key's page (/keys/{fingerprint}; a subkey's
//     fingerprint or a 64-bit key ID leads there), uploading keys pasted
//     or as a file (/upload), statistics (/stats) and identity profiles
//     (/u/{handle});
//   - email addresses by mail, as keys.openpgp.org does them (email.go):
//     the upload result's mail buttons (/upload/email), the page a mailed
//     link opens and its one-click confirmation (/email/confirm/{fpr}/
//     {token}), and the manage flow (/manage, /manage/{fpr}/{token}):
//     withdrawing published addresses and a key's signed deletion; the
//     mails are package maillink's, sent through identity.Service;
//   - OpenID Connect login on package oidc's flow (/login,
//     /login/{provider}, /login/{provider}/callback), the choice of a
//     handle at a first login (/login/choose-handle), and logout;
//   - server-side sessions: an opaque 256-bit token in a HttpOnly,
//     SameSite=Lax cookie (Secure over TLS), kept by a session.Store
//     hashed, with an absolute lifetime and an optional idle timeout;
//   - CSRF tokens (oidc.CSRFToken) bound to the session, or to a random
//     cookie for visitors without one, on every state-changing form;
//   - the account page (/account): factors and their evidence, linking SSH
//     and OpenPGP keys by the identity package's challenges, linking more
//     OpenID accounts, unlinking, sessions, and deleting the account;
//   - handing completed logins to the identity service, which records
//     them (oidc.login and oidc.email-verified, with the provider's JWK;
//     identity/verify re-checks them), and consent logins (consent.go):
//     each change a session makes is approved by a fresh login at its
//     provider, scope openid, whose nonce commits to the change's
//     statement;
//   - the owner's download of their private artifacts (the verified
//     emails and ID tokens the public log only commits to),
//     /account/artifacts;
//   - "corroborated" emails: a user ID email of a linked key that a
//     provider of the same identity verified, computed when shown.
//
// It does not own the identity rules and statements (package identity),
// storage (identity/postgres implements the interfaces of Deps), the
// OpenID Connect protocol (package oidc), OpenPGP and SSH parsing (pgp,
// ssh), the HKP endpoints (hkp: the key page links to /pks/lookup, and this
// package never imports hkp), or the JSON API (web/api).
//
// Pages are templ components (*.templ, compiled to *_templ.go with `go
// tool templ generate`); every value they show is escaped by templ.
package web
