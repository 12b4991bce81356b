// store.go: what the identity operations need of a store. Package
// identity/postgres implements it; tests may use any other.

package identity

import (
	"context"
	"time"
)

// IdentityReader reads identities and evidence.
type IdentityReader interface {
	// IdentityRecords returns the identity with handle h and the records
	// Assess needs: every record naming h and every record that an
	// OpenPGP key named there carries itself. The records' Statement,
	// Signature and SignerKey are left out (read them with Log). It
	// returns ErrNotFound when no identity has the handle.
	IdentityRecords(ctx context.Context, h Handle) (Identity, []Evidence, error)
	// FactorHandles returns the handles of the identities whose records
	// name f, directly or through a record that a key named there
	// carries (an auth subkey's SSH key).
	FactorHandles(ctx context.Context, f Factor) ([]Handle, error)
	// KeyRecords returns the records that the OpenPGP key f carries
	// itself (Handle empty, From f), with their revocations, artifacts
	// left out.
	KeyRecords(ctx context.Context, f Factor) ([]Evidence, error)
}

// LogReader pages through the evidence log.
type LogReader interface {
	// Log returns up to limit records with Seq > after, in log order,
	// with every byte (statements, signatures, signer keys, hashes) of
	// their public form (Evidence.Public): no private artifact.
	Log(ctx context.Context, after int64, limit int) ([]Evidence, error)
}

// Tx is one transaction of identity writes. The store holds the log's
// append lock for the whole transaction, so reads in it see every record
// before the ones it appends and no other writer can interleave.
type Tx interface {
	IdentityReader
	// CreateIdentity creates the identity; ErrHandleTaken if the handle
	// exists.
	CreateIdentity(ctx context.Context, h Handle, created time.Time) (Identity, error)
	// ConsumeChallenge marks the challenge with nonce answered and returns
	// it as issued. ErrNotFound if there is none, ErrNonceUsed if it was
	// answered before, ErrChallengeExpired if it expired before now.
	ConsumeChallenge(ctx context.Context, nonce []byte, now time.Time) (*Challenge, error)
	// KeySets returns the JWKs of the provider with issuer that the
	// log's oidc.jwks records hold, as recorded.
	KeySets(ctx context.Context, issuer string) ([][]byte, error)
	// KeyRecorded reports whether the log holds a record with method m
	// whose SignerKey is exactly key (an ssh.ca-key record of a CA key).
	KeyRecorded(ctx context.Context, m Method, key []byte) (bool, error)
	// NextSeq returns the Seq the next Append in this transaction gives
	// its record.
	NextSeq(ctx context.Context) (int64, error)
	// Append seals e after the log's last record (Evidence.Seal) and
	// stores it. Every node's caches learn of it when the transaction
	// commits.
	Append(ctx context.Context, e *Evidence) error
	// ConsumeEmailToken marks the mailed link with the token hash used
	// and returns it as issued: ErrNotFound if there is none,
	// ErrNonceUsed if it was used before, ErrChallengeExpired if it
	// expired before now.
	ConsumeEmailToken(ctx context.Context, hash []byte, now time.Time) (*EmailToken, error)
	// EraseArtifacts deletes the private artifacts (Evidence.Artifacts)
	// of every record naming h, and the addresses of its committed email
	// factors, and returns how many records lost them. The records and
	// their commitments stay.
	EraseArtifacts(ctx context.Context, h Handle) (int, error)
	// EraseKeyArtifacts deletes what the records about the OpenPGP key
	// (those it carries itself, its email records and their revocations:
	// From the key, no identity) hold of a person: every artifact of
	// theirs, or, with userID, only their whole-key artifacts (which hold
	// every user ID) and, when email is not empty, every artifact of those
	// linking that address. An identity's records signed by the key (From
	// the key: a claim, an add, a revocation) lose their whole-key
	// artifacts too, and keep the rest. Committed addresses it erases stop
	// being named by the records, and the key's pending mail links for
	// them go. It returns how many records lost artifacts; the records and
	// their commitments stay.
	EraseKeyArtifacts(ctx context.Context, key Factor, userID bool, email string) (int, error)
}

// Store is the identity store.
type Store interface {
	IdentityReader
	LogReader
	// IdentityArtifacts returns the private artifacts of the records
	// naming h, in log order: what the identity's owner may read.
	IdentityArtifacts(ctx context.Context, h Handle) ([]RecordArtifacts, error)
	// KeyArtifacts returns the private artifacts of the records about the
	// OpenPGP key (those it carries itself, its email records and their
	// revocations), in log order: what the key's holder may read.
	KeyArtifacts(ctx context.Context, key Factor) ([]RecordArtifacts, error)
	// LinkedKeys returns the OpenPGP key factors that an identity's
	// records name: among those whose values are in among, or all of
	// them when among is nil.
	LinkedKeys(ctx context.Context, among []string) ([]Factor, error)
	// SaveChallenge stores an issued challenge, to be answered once.
	SaveChallenge(ctx context.Context, c *Challenge) error
	// HostsUnder returns, sorted, up to limit handles of host identities
	// whose name is domain or a name below it (host:domain,
	// host:*.domain), through an index rather than a scan.
	HostsUnder(ctx context.Context, domain string, limit int) ([]Handle, error)
	// Update runs fn in one transaction holding the log's append lock:
	// everything fn writes is committed when it returns nil, and nothing
	// when it returns an error.
	Update(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
	// SaveEmailToken stores an issued mailed link and counts it as a
	// mail to its Recipient, unless a link for the same action, key and
	// address was issued after limits.Since (ErrRateLimited) or the
	// Recipient had limits.PerRecipient mails after limits.RecipientSince
	// (ErrRecipientCapped): then it stores nothing. The check and the
	// save are one step for every user of the store.
	SaveEmailToken(ctx context.Context, t *EmailToken, limits EmailLimits) error
	// DeleteEmailToken forgets the link with the token hash and its
	// count as a mail (its mail could not be sent).
	DeleteEmailToken(ctx context.Context, hash []byte) error
	// EmailToken returns the mailed link with the token hash without
	// using it up, with the errors of Tx.ConsumeEmailToken (ErrNotFound,
	// ErrNonceUsed, ErrChallengeExpired at now).
	EmailToken(ctx context.Context, hash []byte, now time.Time) (*EmailToken, error)
	// LiveCertificates returns the ssh.certificate records, with every
	// byte, whose Expires is after now, in log order.
	LiveCertificates(ctx context.Context, now time.Time) ([]Evidence, error)
	// AccountSalt returns the salt of the OpenID Connect account with
	// issuer and subject, storing fresh as it if it has none, or known
	// true when the store knows the account by its subject already (a
	// factor recorded before accounts were pseudonymous). The salt is
	// erased with the identity whose records name the account
	// (Tx.EraseArtifacts).
	AccountSalt(ctx context.Context, issuer, subject string, fresh []byte) (salt []byte, known bool, err error)
	// PendingEmails returns which of emails have a verify link for the
	// key that is neither used nor expired at now.
	PendingEmails(ctx context.Context, key Factor, emails []string, now time.Time) ([]string, error)
}

// Verifier checks signatures and reads keys; it is how this package
// reaches the OpenPGP and SSH code without importing it.
type Verifier interface {
	// VerifySSH checks that sig, an armored SSHSIG, signs statement in
	// Kith's namespace ("kith") by the SSH key with wire-form blob. It
	// returns an *Error with code bad_signature, wrong_namespace or
	// wrong_key when it does not.
	VerifySSH(ctx context.Context, blob, statement, sig []byte) error
	// VerifyPGP checks that sig, a cleartext-signed copy of statement or
	// a detached signature of it (armored or binary), was made by the
	// stored OpenPGP key with the fingerprint (upper-case hex), its
	// primary key or a signing subkey. It returns the key (binary
	// transferable public key) it verified against, or an *Error with
	// code unknown_key, bad_signature or wrong_key.
	VerifyPGP(ctx context.Context, fingerprint string, statement, sig []byte) (key []byte, err error)
	// VerifyPGPPrimary is VerifyPGP that accepts only a signature made by
	// the primary key itself, not by a subkey (code wrong_key).
	VerifyPGPPrimary(ctx context.Context, fingerprint string, statement, sig []byte) (key []byte, err error)
	// PGPKeyLinks returns the stored OpenPGP key with the fingerprint and
	// the links it carries itself at the instant at: its authentication
	// subkeys valid then as SSH factors (pgp.auth-subkey) and the emails
	// of its self-signed user IDs valid then (pgp.uid-selfsig). A write
	// passes the one reading of its clock it stamps its records with, so
	// that a record never states a link that had expired at its own time.
	// ErrNotFound if the key is not stored.
	PGPKeyLinks(ctx context.Context, fingerprint string, at time.Time) (key []byte, links []KeyLink, err error)
	// JWKThumbprint returns the RFC 7638 thumbprint of a provider's
	// public signing JWK: one provider key has one thumbprint, whatever
	// JSON it is written in.
	JWKThumbprint(jwk []byte) (string, error)
	// PublicPGPKey returns what a record shows publicly of the OpenPGP key
	// (binary transferable public key) it carries: the key without its
	// user IDs and user attributes.
	PublicPGPKey(key []byte) ([]byte, error)
	// VerifyLogin re-checks a completed OpenID Connect login: its ID
	// token must verify with its SigningKey, be issued by the account's
	// issuer to its ClientID, be about the account's subject, and, when
	// Email is set, assert that email as verified, and, when Nonce is
	// set, carry that nonce. It returns an *Error with code bad_signature
	// when it does not.
	VerifyLogin(ctx context.Context, l Login) error
}

// KeyLink is a link an OpenPGP key carries itself.
type KeyLink struct {
	// Method is MethodPGPAuthSubkey, MethodPGPAuthSubkeySigned or
	// MethodPGPUIDSelfSig.
	Method Method
	// To is the SSH key or email.
	To Factor
	// Label is the comment of an SSH key's served line (what gpg
	// --export-ssh-key writes).
	Label string
	// Statement is the subkey or user ID packet and Signature the binding
	// or self-certification packet that links it, both framed.
	Statement, Signature []byte
	// Expires is when the link stops holding (zero: never).
	Expires time.Time
}
