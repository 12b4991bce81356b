// sessions.go: the web frontend's login sessions (identity/session.Store), one
// row per session keyed by the SHA-256 of its token.

package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/session"
)

// The store keeps the web frontend's sessions.
var _ session.Store = (*Store)(nil)

// sessionColumns are read into a session.Session by scanSession.
const sessionColumns = `s.token_hash, coalesce(i.handle, ''), s.account, s.provider, s.login,
	s.created_at, s.last_seen_at, s.expires_at`

// CreateSession stores a new session (see session.Store). A session with
// a handle is bound to that identity, which must exist.
func (s *Store) CreateSession(ctx context.Context, ss *session.Session) error {
	if len(ss.TokenHash) != session.HashSize {
		return fmt.Errorf("postgres: create session: token hash of %d bytes", len(ss.TokenHash))
	}
	account, err := sessionAccount(ss.Account)
	if err != nil {
		return fmt.Errorf("postgres: create session: %w", err)
	}
	var handle *string
	if ss.Handle != "" {
		h := string(ss.Handle)
		handle = &h
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO sessions (token_hash, identity_id, account, provider, login, created_at, last_seen_at, expires_at)
		SELECT $1, i.id, $3, $4, $5, $6, $7, $8
		FROM (SELECT NULL::bigint AS id WHERE $2::text IS NULL
		      UNION ALL SELECT id FROM identities WHERE handle = $2) i`,
		ss.TokenHash, handle, account, ss.Provider, nonNil(ss.Login),
		ss.Created, ss.LastSeen, ss.Expires)
	if err != nil {
		return fmt.Errorf("postgres: create session: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("postgres: create session: identity %s: %w", ss.Handle, identity.ErrNotFound)
	}
	return nil
}

// Session returns the unexpired session with the token hash, or
// session.ErrNotFound.
func (s *Store) Session(ctx context.Context, tokenHash []byte, now time.Time) (*session.Session, error) {
	row := s.pool.QueryRow(ctx, `SELECT `+sessionColumns+`
		FROM sessions s LEFT JOIN identities i ON i.id = s.identity_id
		WHERE s.token_hash = $1 AND s.expires_at > $2`, tokenHash, now)
	ss, err := scanSession(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, session.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: session: %w", err)
	}
	return ss, nil
}

// keyAccountPrefix marks, in the account column, a session opened by a
// key's signature (identity.Service.LoginWithKey): "key:ssh SHA256:...".
// An OpenID Connect account is stored as its factor value, which starts
// with the issuer's https URL, so the two never meet.
const keyAccountPrefix = "key:"

// sessionAccount is the account column's form of a session's account:
// an OpenID Connect account, or an SSH or OpenPGP key.
func sessionAccount(f identity.Factor) (string, error) {
	switch f.Kind {
	case identity.KindOIDC:
		if err := f.Validate(); err != nil {
			return "", err
		}
		return f.Value, nil
	case identity.KindSSH:
		if !strings.HasPrefix(f.Value, "SHA256:") || len(f.Value) != len("SHA256:")+43 {
			return "", fmt.Errorf("account: %q is not an SSH key's SHA256 fingerprint", f.Value)
		}
		return keyAccountPrefix + string(f.Kind) + " " + f.Value, nil
	case identity.KindPGP:
		if p, err := identity.ParsePGPFingerprint(f.Value); err != nil || p.Value != f.Value {
			return "", fmt.Errorf("account: %q is not an OpenPGP fingerprint", f.Value)
		}
		return keyAccountPrefix + string(f.Kind) + " " + f.Value, nil
	}
	return "", fmt.Errorf("account %s cannot open a session", f.Kind)
}

func scanSession(row pgx.Row) (*session.Session, error) {
	ss := &session.Session{}
	var handle, account string
	if err := row.Scan(&ss.TokenHash, &handle, &account, &ss.Provider, &ss.Login,
		&ss.Created, &ss.LastSeen, &ss.Expires); err != nil {
		return nil, err
	}
	ss.Handle = identity.Handle(handle)
	ss.Account = identity.Factor{Kind: identity.KindOIDC, Value: account}
	if kv, ok := strings.CutPrefix(account, keyAccountPrefix); ok {
		kind, value, _ := strings.Cut(kv, " ")
		ss.Account = identity.Factor{Kind: identity.FactorKind(kind), Value: value}
	}
	ss.Created, ss.LastSeen, ss.Expires = ss.Created.UTC(), ss.LastSeen.UTC(), ss.Expires.UTC()
	return ss, nil
}

// TouchSession records that the session was used at seen.
func (s *Store) TouchSession(ctx context.Context, tokenHash []byte, seen time.Time) error {
	if _, err := s.pool.Exec(ctx, `UPDATE sessions SET last_seen_at = $2 WHERE token_hash = $1`, tokenHash, seen); err != nil {
		return fmt.Errorf("postgres: touch session: %w", err)
	}
	return nil
}

// BindSession makes a pending session act for the identity with handle h.
func (s *Store) BindSession(ctx context.Context, tokenHash []byte, h identity.Handle) error {
	tag, err := s.pool.Exec(ctx, `UPDATE sessions SET identity_id = i.id
		FROM identities i WHERE i.handle = $2 AND sessions.token_hash = $1`, tokenHash, string(h))
	if err != nil {
		return fmt.Errorf("postgres: bind session to %s: %w", h, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("postgres: bind session to %s: %w", h, session.ErrNotFound)
	}
	return nil
}

// DeleteSession ends one session.
func (s *Store) DeleteSession(ctx context.Context, tokenHash []byte) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE token_hash = $1`, tokenHash); err != nil {
		return fmt.Errorf("postgres: delete session: %w", err)
	}
	return nil
}

// DeleteIdentitySessions ends every session of the identity with handle h.
func (s *Store) DeleteIdentitySessions(ctx context.Context, h identity.Handle) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM sessions
		WHERE identity_id = (SELECT id FROM identities WHERE handle = $1)`, string(h))
	if err != nil {
		return 0, fmt.Errorf("postgres: delete sessions of %s: %w", h, err)
	}
	return tag.RowsAffected(), nil
}

// IdentitySessions returns the unexpired sessions of the identity with
// handle h, newest first.
func (s *Store) IdentitySessions(ctx context.Context, h identity.Handle, now time.Time) ([]session.Session, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+sessionColumns+`
		FROM sessions s JOIN identities i ON i.id = s.identity_id
		WHERE i.handle = $1 AND s.expires_at > $2
		ORDER BY s.created_at DESC, s.token_hash`, string(h), now)
	if err != nil {
		return nil, fmt.Errorf("postgres: sessions of %s: %w", h, err)
	}
	defer rows.Close()
	var out []session.Session
	for rows.Next() {
		ss, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: sessions of %s: %w", h, err)
		}
		out = append(out, *ss)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: sessions of %s: %w", h, err)
	}
	return out, nil
}

// DeleteExpiredSessions removes sessions that expired before t.
func (s *Store) DeleteExpiredSessions(ctx context.Context, t time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE expires_at < $1`, t)
	if err != nil {
		return 0, fmt.Errorf("postgres: delete expired sessions: %w", err)
	}
	return tag.RowsAffected(), nil
}
