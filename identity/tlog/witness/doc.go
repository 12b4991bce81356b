// Package witness is C2SP tlog-witness v1.0, both ends: a Handler that
// makes a node a witness (it cosigns the checkpoints of the logs its
// policy names, each only when it is consistent with the last one it
// cosigned for that origin) and a Submitter that asks a policy's
// witnesses to cosign the log's new checkpoints.
//
// A witness's guarantee: for each origin it keeps the size and root hash
// of the last checkpoint it cosigned, in the store, and cosigns a new one
// only with a Merkle consistency proof from that one; the check and the
// update are one compare-and-set, so two nodes of one witness sharing a
// database never cosign two views. A client that needs a quorum of
// independent witnesses' cosignatures cannot be shown a fork (a split
// view) unless that quorum colludes with the log.
//
// What it does not own: the cosignature format and proofs (identity/tlog),
// the policy format (identity/tlog/policy), SQL (identity/postgres).
package witness
