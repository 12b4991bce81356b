// identities.go: identities, factors and challenges, the identity.Store
// implementation around the evidence log (evidence.go).

package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kith-keyserver/kith/identity"
)

// The store implements the identity store.
var _ identity.Store = (*Store)(nil)

// querier is what reads need: the pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// reader runs the identity reads on a querier.
type reader struct{ q querier }

// IdentityRecords returns the identity with handle h and the records that
// assessing it needs (see identity.IdentityReader), without artifacts.
func (s *Store) IdentityRecords(ctx context.Context, h identity.Handle) (identity.Identity, []identity.Evidence, error) {
	return reader{s.pool}.IdentityRecords(ctx, h)
}

// FactorHandles returns the handles of the identities whose records name f
// (see identity.IdentityReader).
func (s *Store) FactorHandles(ctx context.Context, f identity.Factor) ([]identity.Handle, error) {
	return reader{s.pool}.FactorHandles(ctx, f)
}

// HostsUnder returns, sorted, up to limit handles of host identities
// named domain or below it (see identity.Store). The index on the
// reversed handle turns "ends with .domain" into a range.
func (s *Store) HostsUnder(ctx context.Context, domain string, limit int) ([]identity.Handle, error) {
	rev := reverseASCII(domain)
	rows, err := s.pool.Query(ctx, `SELECT handle FROM identities
		WHERE handle LIKE 'host:%' AND reverse(handle) COLLATE "C" >= $1 AND reverse(handle) COLLATE "C" < $2
			AND (handle = 'host:' || $3 OR right(handle, $4) = '.' || $3)
		ORDER BY handle LIMIT $5`, rev, rev+"\x7f", domain, len(domain)+1, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: hosts under %q: %w", domain, err)
	}
	hs, err := pgx.CollectRows(rows, pgx.RowTo[identity.Handle])
	if err != nil {
		return nil, fmt.Errorf("postgres: hosts under %q: %w", domain, err)
	}
	return hs, nil
}

// reverseASCII reverses an ASCII string (host names are ASCII).
func reverseASCII(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// KeyRecords returns the records the OpenPGP key f carries itself, with
// their revocations, without artifacts.
func (s *Store) KeyRecords(ctx context.Context, f identity.Factor) ([]identity.Evidence, error) {
	return reader{s.pool}.KeyRecords(ctx, f)
}

// IdentityRecords reads an identity and its records in one indexed query
// (a row per record, or one row with no record for an identity without
// any).
func (r reader) IdentityRecords(ctx context.Context, h identity.Handle) (identity.Identity, []identity.Evidence, error) {
	rows, err := r.q.Query(ctx, `WITH i AS (
			SELECT id, handle, created_at FROM identities WHERE handle = $1
		), mine AS (
			SELECT * FROM evidence WHERE identity_id = (SELECT id FROM i)
		), named AS (
			SELECT from_factor AS f FROM mine UNION SELECT to_factor FROM mine WHERE to_factor IS NOT NULL
		), e AS (
			SELECT * FROM mine
			UNION ALL
			SELECT * FROM evidence WHERE identity_id IS NULL AND from_factor IN (SELECT f FROM named)
		), recs AS (
			SELECT `+lightColumns+` FROM e `+factorJoins+`
		)
		SELECT i.id, i.created_at, recs.* FROM i LEFT JOIN recs ON true ORDER BY recs.seq`, string(h))
	if err != nil {
		return identity.Identity{}, nil, fmt.Errorf("postgres: identity %s: %w", h, err)
	}
	id := identity.Identity{Handle: h}
	found := false
	recs, err := scanRecordsWith(rows, false, func(extra []any) []any {
		return append([]any{&id.ID, &id.Created}, extra...)
	}, func() { found = true })
	if err != nil {
		return id, nil, fmt.Errorf("postgres: identity %s: %w", h, err)
	}
	if !found {
		return id, nil, identity.ErrNotFound
	}
	return id, recs, nil
}

// FactorHandles finds identities naming f directly, or naming a key whose
// own records name f.
func (r reader) FactorHandles(ctx context.Context, f identity.Factor) ([]identity.Handle, error) {
	rows, err := r.q.Query(ctx, `WITH f AS (
			SELECT id FROM factors WHERE kind = $1 AND value = $2
		), parents AS (
			SELECT from_factor AS id FROM evidence WHERE identity_id IS NULL AND to_factor IN (SELECT id FROM f)
		), named AS (
			SELECT id FROM f UNION SELECT id FROM parents
		), ids AS (
			SELECT identity_id FROM evidence WHERE identity_id IS NOT NULL AND from_factor IN (SELECT id FROM named)
			UNION
			SELECT identity_id FROM evidence WHERE identity_id IS NOT NULL AND to_factor IN (SELECT id FROM named)
		)
		SELECT handle FROM identities WHERE id IN (SELECT identity_id FROM ids) ORDER BY handle`,
		string(f.Kind), f.Value)
	if err != nil {
		return nil, fmt.Errorf("postgres: identities of %s: %w", f, err)
	}
	hs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: identities of %s: %w", f, err)
	}
	out := make([]identity.Handle, len(hs))
	for i, h := range hs {
		out[i] = identity.Handle(h)
	}
	return out, nil
}

// KeyRecords reads the records a key carries itself.
func (r reader) KeyRecords(ctx context.Context, f identity.Factor) ([]identity.Evidence, error) {
	rows, err := r.q.Query(ctx, `SELECT `+lightColumns+` FROM evidence e `+factorJoins+`
		WHERE e.identity_id IS NULL
		AND e.from_factor = (SELECT id FROM factors WHERE kind = $1 AND value = $2)
		ORDER BY e.seq`, string(f.Kind), f.Value)
	if err != nil {
		return nil, fmt.Errorf("postgres: key records of %s: %w", f, err)
	}
	recs, err := scanRecords(rows, false)
	if err != nil {
		return nil, fmt.Errorf("postgres: key records of %s: %w", f, err)
	}
	return recs, nil
}

// SaveChallenge stores an issued challenge, and drops challenges that
// expired more than a day ago.
func (s *Store) SaveChallenge(ctx context.Context, c *identity.Challenge) error {
	_, err := s.pool.Exec(ctx, `WITH old AS (
			DELETE FROM challenges WHERE expires_at < $6::timestamptz - interval '1 day'
		)
		INSERT INTO challenges (nonce, purpose, handle, statement, issued_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6)`,
		c.Nonce, string(c.Purpose), string(c.Handle), c.Statement, c.Issued, c.Expires)
	if err != nil {
		return fmt.Errorf("postgres: save challenge: %w", err)
	}
	return nil
}

// Update runs fn in one transaction that holds the evidence log's head
// row, so that appends from every node are serialised (see identity.Store).
func (s *Store) Update(ctx context.Context, fn func(ctx context.Context, tx identity.Tx) error) error {
	return s.inTx(ctx, func(ptx pgx.Tx) error {
		t := &tx{reader: reader{ptx}, tx: ptx}
		if err := ptx.QueryRow(ctx, "SELECT seq, hash FROM evidence_head FOR UPDATE").Scan(&t.headSeq, &t.headHash); err != nil {
			return fmt.Errorf("postgres: lock evidence log: %w", err)
		}
		return fn(ctx, t)
	})
}

// tx is one identity transaction.
type tx struct {
	reader
	tx       pgx.Tx
	headSeq  int64
	headHash []byte
	notified map[string]bool
}

// CreateIdentity inserts an identity; identity.ErrHandleTaken if the
// handle exists.
func (t *tx) CreateIdentity(ctx context.Context, h identity.Handle, created time.Time) (identity.Identity, error) {
	id := identity.Identity{Handle: h, Created: identity.TruncateTime(created)}
	err := t.tx.QueryRow(ctx, `INSERT INTO identities (handle, created_at) VALUES ($1, $2)
		ON CONFLICT (handle) DO NOTHING RETURNING id`, string(h), id.Created).Scan(&id.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return id, identity.ErrHandleTaken
	}
	if err != nil {
		return id, fmt.Errorf("postgres: create identity %s: %w", h, err)
	}
	return id, nil
}

// ConsumeChallenge marks a challenge answered (see identity.Tx).
func (t *tx) ConsumeChallenge(ctx context.Context, nonce []byte, now time.Time) (*identity.Challenge, error) {
	c := &identity.Challenge{Nonce: nonce}
	var purpose, handle string
	var used *time.Time
	err := t.tx.QueryRow(ctx, `SELECT purpose, handle, statement, issued_at, expires_at, used_at
		FROM challenges WHERE nonce = $1 FOR UPDATE`, nonce).
		Scan(&purpose, &handle, &c.Statement, &c.Issued, &c.Expires, &used)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, identity.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: consume challenge: %w", err)
	}
	c.Purpose, c.Handle = identity.Purpose(purpose), identity.Handle(handle)
	if used != nil {
		return nil, identity.ErrNonceUsed
	}
	if now.After(c.Expires) {
		return nil, identity.ErrChallengeExpired
	}
	if _, err := t.tx.Exec(ctx, "UPDATE challenges SET used_at = $2 WHERE nonce = $1", nonce, now); err != nil {
		return nil, fmt.Errorf("postgres: consume challenge: %w", err)
	}
	return c, nil
}

// linkedKeysSQL selects the values of the OpenPGP factors an identity
// names, among $1 (NULL: all).
const linkedKeysSQL = `SELECT f.value FROM factors f WHERE f.kind = 'pgp'
		AND ($1::text[] IS NULL OR f.value = ANY($1)) AND EXISTS (
			SELECT 1 FROM evidence e WHERE e.identity_id IS NOT NULL AND (e.from_factor = f.id OR e.to_factor = f.id)
		) ORDER BY f.value`

// LinkedKeys returns the OpenPGP key factors an identity's records name,
// among the values in among (nil: all).
func (s *Store) LinkedKeys(ctx context.Context, among []string) ([]identity.Factor, error) {
	rows, err := s.pool.Query(ctx, linkedKeysSQL, among)
	if err != nil {
		return nil, fmt.Errorf("postgres: linked keys: %w", err)
	}
	values, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: linked keys: %w", err)
	}
	out := make([]identity.Factor, len(values))
	for i, v := range values {
		out[i] = identity.Factor{Kind: identity.KindPGP, Value: v}
	}
	return out, nil
}
