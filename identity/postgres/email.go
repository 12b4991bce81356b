// email.go: mailed-link tokens (hashed) and the email.verified lookups
// that key discovery (VKS, WKD, HKP by email) serves from.

package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity"
)

// SaveEmailToken stores an issued mailed link and counts its mail to the
// recipient, unless one for the same action, key and address was issued
// after limits.Since (identity.ErrRateLimited) or the recipient had
// limits.PerRecipient mails after limits.RecipientSince
// (identity.ErrRecipientCapped). It drops links that expired more than
// a day ago and mails past the cap's window, so both tables stay
// bounded. A per-address advisory lock makes the checks and the inserts
// one step across nodes.
func (s *Store) SaveEmailToken(ctx context.Context, t *identity.EmailToken, limits identity.EmailLimits) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "kith-email "+t.Email.Value); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM email_tokens WHERE expires_at < $1::timestamptz - interval '1 day'", t.Created); err != nil {
			return err
		}
		// Rows another node is pruning at the same time are its to drop.
		if _, err := tx.Exec(ctx, `DELETE FROM email_sends WHERE token_hash IN (
				SELECT token_hash FROM email_sends WHERE sent_at <= $1 FOR UPDATE SKIP LOCKED)`, limits.RecipientSince); err != nil {
			return err
		}
		var recent bool
		var sent int
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM email_tokens
				WHERE email = $1 AND fingerprint = $2 AND action = $3 AND created_at > $4),
			(SELECT count(*) FROM email_sends WHERE recipient = $5 AND sent_at > $6)`,
			t.Email.Value, t.Key.Value, string(t.Action), limits.Since, t.Recipient, limits.RecipientSince).Scan(&recent, &sent); err != nil {
			return err
		}
		if recent {
			return identity.ErrRateLimited
		}
		if limits.PerRecipient > 0 && sent >= limits.PerRecipient {
			return identity.ErrRecipientCapped
		}
		if _, err := tx.Exec(ctx, `INSERT INTO email_tokens (token_hash, action, fingerprint, email, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, t.Hash, string(t.Action), t.Key.Value, t.Email.Value, t.Created, t.Expires); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO email_sends (token_hash, recipient, sent_at) VALUES ($1, $2, $3)", t.Hash, t.Recipient, t.Created)
		return err
	})
	if errors.Is(err, identity.ErrRateLimited) || errors.Is(err, identity.ErrRecipientCapped) {
		return err
	}
	if err != nil {
		return fmt.Errorf("postgres: save email token: %w", err)
	}
	return nil
}

// DeleteEmailToken forgets the link with the token hash and its mail.
func (s *Store) DeleteEmailToken(ctx context.Context, hash []byte) error {
	if _, err := s.pool.Exec(ctx, `WITH sent AS (DELETE FROM email_sends WHERE token_hash = $1)
		DELETE FROM email_tokens WHERE token_hash = $1`, hash); err != nil {
		return fmt.Errorf("postgres: delete email token: %w", err)
	}
	return nil
}

// PendingEmails returns which of emails have an unused, unexpired verify
// link for key.
func (s *Store) PendingEmails(ctx context.Context, key identity.Factor, emails []string, now time.Time) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT email FROM email_tokens
		WHERE email = ANY($1) AND fingerprint = $2 AND action = 'verify' AND used_at IS NULL AND expires_at >= $3
		ORDER BY email`, emails, key.Value, now)
	if err != nil {
		return nil, fmt.Errorf("postgres: pending emails: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: pending emails: %w", err)
	}
	return out, nil
}

// EmailToken returns a mailed link without using it (see identity.Store).
func (s *Store) EmailToken(ctx context.Context, hash []byte, now time.Time) (*identity.EmailToken, error) {
	et, err := readEmailToken(ctx, s.pool, hash, now, "")
	if err != nil {
		return nil, fmt.Errorf("postgres: email token: %w", err)
	}
	return et, nil
}

// readEmailToken reads the link with the token hash, refusing a used or
// expired one; lock is appended to the query ("FOR UPDATE" or "").
func readEmailToken(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, hash []byte, now time.Time, lock string) (*identity.EmailToken, error) {
	et := &identity.EmailToken{Hash: hash}
	var action, fp, email string
	var used *time.Time
	err := q.QueryRow(ctx, `SELECT action, fingerprint, email, created_at, expires_at, used_at
		FROM email_tokens WHERE token_hash = $1 `+lock, hash).
		Scan(&action, &fp, &email, &et.Created, &et.Expires, &used)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, identity.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if used != nil {
		return nil, identity.ErrNonceUsed
	}
	if now.After(et.Expires) {
		return nil, identity.ErrChallengeExpired
	}
	et.Action = identity.EmailAction(action)
	et.Key = identity.Factor{Kind: identity.KindPGP, Value: fp}
	et.Email = identity.EmailFactor(email)
	return et, nil
}

// ConsumeEmailToken marks a mailed link used (see identity.Tx).
func (t *tx) ConsumeEmailToken(ctx context.Context, hash []byte, now time.Time) (*identity.EmailToken, error) {
	et, err := readEmailToken(ctx, t.tx, hash, now, "FOR UPDATE")
	if err != nil {
		if errors.Is(err, identity.ErrNotFound) || errors.Is(err, identity.ErrNonceUsed) || errors.Is(err, identity.ErrChallengeExpired) {
			return nil, err
		}
		return nil, fmt.Errorf("postgres: consume email token: %w", err)
	}
	if _, err := t.tx.Exec(ctx, "UPDATE email_tokens SET used_at = $2 WHERE token_hash = $1", hash, now); err != nil {
		return nil, fmt.Errorf("postgres: consume email token: %w", err)
	}
	return et, nil
}

// latestEmailRecords selects, per key and address, the purpose of the
// latest email.verified record (” verified, 'revoke' withdrawn), for the
// records the condition picks; only pairs whose key still carries a
// valid user ID with the address count.
const latestEmailRecords = `SELECT ff.value, tf.value FROM (
		SELECT DISTINCT ON (e.from_factor, e.to_factor) e.from_factor, e.to_factor, e.purpose
		FROM evidence e
		WHERE e.method = 'email.verified' AND e.identity_id IS NULL AND %s
		ORDER BY e.from_factor, e.to_factor, e.seq DESC
	) v
	JOIN factors ff ON ff.id = v.from_factor
	JOIN factors tf ON tf.id = v.to_factor
	WHERE v.purpose = '' AND EXISTS (
		SELECT 1 FROM keys k JOIN user_ids u ON u.key_ref = k.id
		WHERE k.fingerprint = decode(ff.value, 'hex') AND u.email = tf.value AND NOT u.revoked
		AND (u.expires_at IS NULL OR u.expires_at > now()))
	ORDER BY ff.value, tf.value`

// VerifiedKeys returns the OpenPGP key factors for which the address is
// verified by mail (and not withdrawn) and which still carry it.
func (s *Store) VerifiedKeys(ctx context.Context, email string) ([]identity.Factor, error) {
	pairs, err := s.verifiedPairs(ctx, "e.to_factor = (SELECT id FROM factors WHERE kind = 'email' AND value = $1)", identity.EmailFactor(email).Value)
	if err != nil {
		return nil, fmt.Errorf("postgres: verified keys of %s: %w", email, err)
	}
	out := make([]identity.Factor, len(pairs))
	for i, p := range pairs {
		out[i] = identity.Factor{Kind: identity.KindPGP, Value: p[0]}
	}
	return out, nil
}

// VerifiedEmails returns the addresses verified by mail (and not
// withdrawn) for the OpenPGP key with fingerprint fp (upper-case hex)
// that it still carries.
func (s *Store) VerifiedEmails(ctx context.Context, fp string) ([]string, error) {
	pairs, err := s.verifiedPairs(ctx, "e.from_factor = (SELECT id FROM factors WHERE kind = 'pgp' AND value = $1)", fp)
	if err != nil {
		return nil, fmt.Errorf("postgres: verified emails of %s: %w", fp, err)
	}
	out := make([]string, len(pairs))
	for i, p := range pairs {
		out[i] = p[1]
	}
	return out, nil
}

func (s *Store) verifiedPairs(ctx context.Context, cond string, arg string) ([][2]string, error) {
	rows, err := s.pool.Query(ctx, fmt.Sprintf(latestEmailRecords, cond), arg)
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for rows.Next() {
		var p [2]string
		if err := rows.Scan(&p[0], &p[1]); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, p)
	}
	rows.Close()
	return out, rows.Err()
}
