// Package identity is Kith's domain: identities, the factors linked to them
// (OpenPGP keys, SSH keys, OpenID accounts, email addresses), the evidence
// for each link, and the store interfaces every frontend speaks.
//
// It depends on nothing else in Kith. Types here are plain data so that the
// store (package postgres) and every frontend (hkp, recon, web) can share
// them without importing each other.
//
// The identity model (handle.go, factor.go, evidence.go, statement.go,
// assurance.go, service.go): an Identity has a unique Handle; Factors
// (pgp, ssh, oidc, email) are linked to it by Evidence records in an
// append-only log whose records are hash-chained (Evidence.CanonicalBytes,
// Seal, CheckLink). Which factors count is never stored: Assess computes it
// from the records each time. Service runs the operations every frontend
// shares (challenges, claim, add, revoke, lookups), each one store
// transaction through Store and Tx; signatures are checked through the
// Verifier interface, which a frontend implements with packages ssh and
// pgp, so that this package imports nothing else of Kith.
package identity
