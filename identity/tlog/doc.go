// Package tlog is Kith's transparency log: an RFC 6962 Merkle tree over
// the evidence records, served in the C2SP tlog-tiles layout under /log/,
// with C2SP tlog-checkpoint checkpoints signed as C2SP signed notes by the
// server's Ed25519 log key.
//
// The evidence log itself (package identity) stays the record of what was
// appended; this package only integrates appended records into the tree,
// after they commit, and signs a checkpoint over them. Entry i of the tree
// (from 0) is record Seq i+1, and its entry bytes are the record's Hash:
// the SHA-256 of its canonical encoding (identity.Evidence.CanonicalBytes).
// A record's full bytes come from /api/v1/log; anyone holding them
// recomputes the hash, and the tree proves the hash is in the one log
// everyone sees.
//
// What it does not own: the records (identity), SQL (identity/postgres
// implements Storage) and re-verifying records (identity/verify).
package tlog
