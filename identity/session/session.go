// Package session defines the server-side login sessions of Kith's web
// frontend: the record a store keeps for each (Session), the store
// interface the web package uses (Store), and the tokens that name a
// session in a browser cookie (NewToken, Hash).
//
// A session's token is 32 random bytes, base64url-encoded, and lives only
// in the browser's cookie; the store keeps its SHA-256 (Hash), so that a
// copy of the database opens no session. Sessions are rows in the shared
// database, so any Kith node can serve a session's next request.
//
// The package holds types only, beside the rest of the domain in
// identity: identity/postgres implements Store, and package web issues,
// checks and ends sessions.
package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/kith-keyserver/kith/identity"
)

// TokenSize is the size of a session token: 256 bits.
const TokenSize = 32

// HashSize is the size of a token hash (SHA-256).
const HashSize = sha256.Size

// ErrNotFound means there is no session with that token hash (it never
// existed, was ended, or expired).
var ErrNotFound = errors.New("no such session")

// Session is one login session.
type Session struct {
	// TokenHash is the SHA-256 of the cookie token (see Hash); the token
	// itself is never stored.
	TokenHash []byte
	// Handle is the identity the session acts for; empty while a first
	// login has not chosen a handle yet (a pending session, which can do
	// nothing but choose one).
	Handle identity.Handle
	// Account is the OpenID Connect account (an identity.KindOIDC factor)
	// whose login opened the session. The session acts for Handle only
	// while Account is proven for that identity: the web package ends it
	// at its first request after the account is unlinked or the identity
	// deleted.
	Account identity.Factor
	// Provider is the configured name of the account's provider.
	Provider string
	// Login is what the web package keeps of the login that opened the
	// session (its ID token, the provider's key that verified it, and the
	// claims the evidence needs), in the web package's own encoding. It is
	// deleted with the session.
	Login []byte
	// Created is when the session was opened, LastSeen when it was last
	// used (updated at most once a minute), and Expires when it ends.
	Created  time.Time
	LastSeen time.Time
	Expires  time.Time
}

// Store keeps sessions. Implementations must be safe for concurrent use.
type Store interface {
	// CreateSession stores a new session.
	CreateSession(ctx context.Context, s *Session) error
	// Session returns the session with the token hash that has not
	// expired at now, or ErrNotFound.
	Session(ctx context.Context, tokenHash []byte, now time.Time) (*Session, error)
	// TouchSession sets the session's LastSeen.
	TouchSession(ctx context.Context, tokenHash []byte, seen time.Time) error
	// BindSession makes a pending session act for the identity with the
	// handle; ErrNotFound when there is no such session or identity.
	BindSession(ctx context.Context, tokenHash []byte, h identity.Handle) error
	// DeleteSession ends one session; ending a session that does not
	// exist is not an error.
	DeleteSession(ctx context.Context, tokenHash []byte) error
	// DeleteIdentitySessions ends every session of the identity and
	// returns how many there were.
	DeleteIdentitySessions(ctx context.Context, h identity.Handle) (int64, error)
	// IdentitySessions returns the identity's unexpired sessions at now,
	// newest first.
	IdentitySessions(ctx context.Context, h identity.Handle, now time.Time) ([]Session, error)
	// DeleteExpiredSessions removes the sessions that expired before t and
	// returns how many.
	DeleteExpiredSessions(ctx context.Context, t time.Time) (int64, error)
}

// NewToken returns a fresh session token (TokenSize random bytes,
// base64url without padding) and its hash.
func NewToken() (token string, hash []byte, err error) {
	b := make([]byte, TokenSize)
	if _, err := rand.Read(b); err != nil {
		return "", nil, fmt.Errorf("session: new token: %w", err)
	}
	token = base64.RawURLEncoding.EncodeToString(b)
	return token, Hash(token), nil
}

// Hash returns the SHA-256 of a token, the key its session is stored
// under.
func Hash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// WellFormed reports whether s looks like a token NewToken made, so that
// junk cookies are refused without a database query.
func WellFormed(token string) bool {
	if len(token) != base64.RawURLEncoding.EncodedLen(TokenSize) {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(token)
	return err == nil
}
