// Package verify checks identity evidence with the OpenPGP, SSH and
// OpenID Connect code that package identity does not import.
//
// It has two jobs. Verifier is the identity.Verifier of a running server:
// it checks a signed statement against a stored key (SSHSIG, OpenPGP
// cleartext or detached signatures), re-checks a completed login's ID
// token, and reads the links a stored OpenPGP key carries (its
// authentication subkeys, its user IDs' addresses) at the one instant the
// write that records them names. Record and LogVerifier re-verify the
// records of the public log offline, as `kith verify-log`, the API and the
// pages do: the hash chain, every signature against the key material a
// record carries, every statement against the record's fields, and what a
// record stands on earlier in the log (provider keys by their JWK
// thumbprints, SSH CA keys, the proofs a certificate needed), each at the
// record's own time, never the verifier's clock.
//
// A record that keeps what names a person as private artifacts (see
// identity/artifact.go) is checked as far as its public bytes go (an auth
// subkey's binding by the key's public part, a challenge's signature);
// what needs an artifact it does not hold is reported as withheld
// (ErrWithheld), or erased (ErrErased) when the server says it erased it,
// never as verified. The artifacts, revealed (identity.Evidence.Reveal),
// complete the check.
//
// What it does not own: the records and their encoding (identity), the
// log's tree and checkpoints (identity/tlog), fetching the log
// (web/api/client).
package verify
