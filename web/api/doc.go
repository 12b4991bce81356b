// Package api is Kith's JSON API for identities and the plain-text lookups
// built on it:
//
//	POST /api/v1/challenges                        issue a statement to sign
//	POST /api/v1/identities                        claim a handle
//	POST /api/v1/identities/{handle}/factors       link a factor
//	POST /api/v1/identities/{handle}/revocations   unlink a factor
//	POST /api/v1/keys/deletions                    delete a key (its holder's signed delete-key statement)
//	GET  /api/v1/log?after=N&limit=M               page through the evidence log
//	GET  /api/v1/ssh/{fingerprint}                 who proved this SSH key
//	GET  /users/{handle}.keys                      proven SSH keys, authorized_keys text
//	GET  /users/{handle}.gpg                       proven OpenPGP keys, armored
//	GET  /users/{handle}.json                      the identity, its factors and evidence
//	GET  /hosts/{name}.known_hosts                 a host identity's proven host keys, known_hosts lines
//	GET  /hosts/{name}.json                        the host identity (host:NAME), its keys and evidence
//
// It owns the HTTP and JSON shapes of these, the per-node cache of lookups
// (dropped on every evidence append any node commits), the Verifier that
// checks SSHSIG and OpenPGP signatures for package identity, and the
// offline re-verification of log records (VerifyRecord, VerifyLog) that
// `kith verify-log` runs.
//
// It does not own the identity rules (package identity: statements,
// assurance, the operations), storage (identity/postgres, reached through
// identity.Store and a KeyFinder), key parsing (pgp, ssh), or the HKP
// endpoints (hkp). Refusals are JSON errors with a stable code (the
// identity.Code values) and a 4xx status; they never leave a write behind.
package api
