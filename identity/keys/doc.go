// Package keys is Kith's layer for OpenPGP keys, as package identity is
// for identities: the vocabulary every key frontend speaks (Query,
// Stored, Change, Stats, DigestChange, ParseSearch), the upload policy
// (UploadPolicy, MayUpload), the one Store interface the key store
// implements (identity/postgres), and the Service that owns the one
// upload path.
//
// The Store has two implementations: identity/postgres (the server's)
// and identity/keys/inprocess (in memory, for tests). Frontends take the
// parts of Store they read (Finder, Reader, Listener, ChangeLog) and the
// Service as an Uploader; the wiring (cmd/kith) subscribes their caches
// to the Service (Subscribe).
//
// It owns what a key upload does and in which order; it does not own
// OpenPGP at packet level (package pgp: parsing, the key policy, merge,
// digests), storage (identity/postgres), or the identity links a key
// carries (identity.Service.SyncKeys, which the Service calls).
package keys
