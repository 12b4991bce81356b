// Package v2 serves HKP v2, the versioned routes of the OpenPGP HTTP
// Keyserver Protocol as draft-ietf-openpgp-hkp specifies them, under
// /pks/v2/: typed lookups (by versioned fingerprint, by key ID, by
// identity), the JSON index, the authoritative lookup and submission. The
// legacy /pks/lookup and /pks/add, which gpg speaks, are package hkp's
// and unchanged.
//
// It owns the v2 routes' paths, status codes, content types and JSON, and
// their CORS: every v2 route may be read from a page of any origin, never
// with credentials (cors.go's Handle, which a route added in this package
// uses too).
//
// It does not own: the upload path, its admission, limits and budgets
// (identity/keys.Service, reached as a keys.Uploader); which addresses
// are verified (identity's evidence, reached as an
// identity.VerifiedEmailReader); the per-client limiters
// (identity/ratelimit, shared by the wiring with the other protocols);
// OpenPGP parsing and armor (pgp); the prefix log's data (given to the
// Handler as Options.PrefixLog).
package v2
