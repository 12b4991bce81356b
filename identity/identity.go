// identity.go: the identity itself and the errors the identity operations
// refuse with.

package identity

import (
	"errors"
	"fmt"
	"time"
)

// Identity is a person (or a role) known by a unique handle. Its factors
// and their standing are not fields: they follow from the evidence (see
// Assess).
type Identity struct {
	// ID is the store's key for the identity.
	ID      int64
	Handle  Handle
	Created time.Time
}

// Code is a stable, machine-readable reason for a refusal, the "code" of
// the API's JSON errors. Codes are never renamed.
type Code string

// The refusal codes.
const (
	CodeBadRequest       Code = "bad_request"       // malformed input
	CodeBadHandle        Code = "bad_handle"        // not handle syntax
	CodeReservedHandle   Code = "reserved_handle"   // a name kept for the server
	CodeHandleTaken      Code = "handle_taken"      // another identity has the handle
	CodeUnknownIdentity  Code = "unknown_identity"  // no identity with that handle
	CodeBadFactor        Code = "bad_factor"        // not an SSH key line or PGP fingerprint
	CodeUnknownKey       Code = "unknown_key"       // no stored OpenPGP key with that fingerprint
	CodeBadStatement     Code = "bad_statement"     // not a statement this server issued
	CodeStatementChanged Code = "statement_changed" // differs from the issued statement
	CodeWrongServer      Code = "wrong_server"      // issued by another server
	CodeWrongPurpose     Code = "wrong_purpose"     // issued for another operation
	CodeUnknownNonce     Code = "unknown_nonce"     // no such challenge
	CodeNonceUsed        Code = "nonce_used"        // already answered
	CodeExpired          Code = "challenge_expired" // answered too late
	CodeBadSignature     Code = "bad_signature"     // does not verify
	CodeWrongNamespace   Code = "wrong_namespace"   // SSHSIG for another namespace than "kith"
	CodeWrongKey         Code = "wrong_key"         // verifies, but by another key
	CodeFactorLinked     Code = "factor_linked"     // linked to another identity
	CodeAlreadyLinked    Code = "already_linked"    // already proven for this identity
	CodeNotProven        Code = "not_proven"        // the authorising factor is not proven here
	CodeNotAuthorized    Code = "not_authorized"    // no proven factor authorised the new one
	CodeNotLinked        Code = "not_linked"        // nothing to revoke
	CodeAlreadyRevoked   Code = "already_revoked"   // the link was revoked before: nothing to do
	CodeUnsupported      Code = "unsupported"       // a factor kind this operation cannot take
	CodeUploadRefused    Code = "upload_refused"    // the server's upload policy refuses the key
	CodeHostNotAllowed   Code = "host_not_allowed"  // the operator's host list does not name the host
)

// Error is a refusal: the operation wrote nothing, and Code says why.
type Error struct {
	Code Code
	// Msg explains the refusal to the person who asked; it names no
	// secrets.
	Msg string
	// Err is the underlying cause, if any.
	Err error
}

// Error returns the message.
func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Refuse returns an *Error with the code and a formatted message.
func Refuse(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// RefuseErr returns an *Error with the code, a message and a cause.
func RefuseErr(code Code, err error, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...), Err: err}
}

// CodeOf returns the code of the first *Error in err's chain, or "" when
// err is not a refusal (an internal failure).
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Errors the store returns; the service turns them into refusals.
var (
	// ErrNotFound: no such identity, factor or challenge.
	ErrNotFound = errors.New("not found")
	// ErrHandleTaken: an identity with the handle exists.
	ErrHandleTaken = errors.New("handle taken")
	// ErrNonceUsed: the challenge was answered before.
	ErrNonceUsed = errors.New("challenge already answered")
	// ErrChallengeExpired: the challenge expired.
	ErrChallengeExpired = errors.New("challenge expired")
)
