// Package identity is Kith's domain: identities, the factors linked to them
// (OpenPGP keys, SSH keys, OpenID accounts, email addresses), the evidence
// for each link, and the store interfaces every frontend speaks.
//
// It depends on nothing else in Kith. Types here are plain data so that the
// store (package postgres) and every frontend (hkp, recon, web) can share
// them without importing each other.
package identity
