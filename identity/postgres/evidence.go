// evidence.go: the evidence log in the store: appends under the head
// row's lock, hash-chained; paging through it; and the notification every
// append sends so that every node's caches learn of it.

package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity"
)

// EvidenceChannel is the NOTIFY channel of evidence appends. Each payload
// is the handle of the identity a committed record names, or "*" when a
// record may concern any identity (a link a key carries itself).
const EvidenceChannel = "kith_evidence"

// lightColumns are the record columns the assurance rules need; the
// artifact columns follow in fullColumns.
const lightColumns = `e.seq, e.method, e.purpose, e.handle, ff.kind, ff.value, ff.data,
	coalesce(tf.kind, ''), coalesce(tf.value, ''), coalesce(tf.data, ''::bytea), e.label,
	e.created_at, e.expires_at, coalesce(e.revokes, 0), e.prev_hash, e.hash`

const fullColumns = lightColumns + `, e.statement, e.signature, e.signer_key, e.consent, e.commitments`

const factorJoins = `JOIN factors ff ON ff.id = e.from_factor LEFT JOIN factors tf ON tf.id = e.to_factor`

// scanRecords reads records selected with lightColumns, or fullColumns
// when full.
func scanRecords(rows pgx.Rows, full bool) ([]identity.Evidence, error) {
	return scanRecordsWith(rows, full, nil, nil)
}

// scanRecordsWith is scanRecords for rows with leading columns: prefix
// returns the scan destinations with those first, and row is called for
// every row. A row whose record columns are NULL (a LEFT JOIN that found
// no record) yields no record.
func scanRecordsWith(rows pgx.Rows, full bool, prefix func([]any) []any, row func()) ([]identity.Evidence, error) {
	defer rows.Close()
	var out []identity.Evidence
	for rows.Next() {
		var e identity.Evidence
		var seq, revokes *int64
		var method, purpose, handle, fk, fv, tk, tv, label *string
		var created, expires *time.Time
		var commitments []byte
		dst := []any{&seq, &method, &purpose, &handle, &fk, &fv, &e.From.Data,
			&tk, &tv, &e.To.Data, &label, &created, &expires, &revokes, &e.PrevHash, &e.Hash}
		if full {
			dst = append(dst, &e.Statement, &e.Signature, &e.SignerKey, &e.Consent, &commitments)
		}
		if prefix != nil {
			dst = prefix(dst)
		}
		if err := rows.Scan(dst...); err != nil {
			return nil, err
		}
		if row != nil {
			row()
		}
		if seq == nil {
			continue
		}
		e.Seq, e.Revokes, e.Label = *seq, *revokes, *label
		e.Method, e.Purpose, e.Handle = identity.Method(*method), identity.Purpose(*purpose), identity.Handle(*handle)
		e.From.Kind, e.From.Value = identity.FactorKind(*fk), *fv
		e.To.Kind, e.To.Value = identity.FactorKind(*tk), *tv
		if len(e.To.Data) == 0 {
			e.To.Data = nil
		}
		if len(e.From.Data) == 0 {
			e.From.Data = nil
		}
		if len(e.Consent) == 0 {
			e.Consent = nil
		}
		if len(commitments) > 0 {
			var err error
			if e.Commitments, err = decodeCommitments(commitments); err != nil {
				return nil, fmt.Errorf("record %d: %w", e.Seq, err)
			}
		}
		e.Created = created.UTC()
		if expires != nil {
			e.Expires = expires.UTC()
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// Log returns up to limit records after seq after, with every byte of
// their public form: no private artifact (see identity.Evidence.Public).
func (s *Store) Log(ctx context.Context, after int64, limit int) ([]identity.Evidence, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+fullColumns+`,
			CASE WHEN e.commitments <> ''::bytea THEN (SELECT count(*) FROM evidence_artifacts a WHERE a.seq = e.seq) ELSE 0 END
		FROM evidence e `+factorJoins+`
		WHERE e.seq > $1 ORDER BY e.seq LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: evidence log: %w", err)
	}
	var kept []int64
	var n int64
	recs, err := scanRecordsWith(rows, true, func(dst []any) []any { return append(dst, &n) }, func() { kept = append(kept, n) })
	if err != nil {
		return nil, fmt.Errorf("postgres: evidence log: %w", err)
	}
	for i := range recs {
		// Erased: the store holds fewer artifacts than the record
		// commits to (all of a deleted identity's or key's; a blocked
		// user ID's, and the whole key, of a key's records).
		recs[i].Erased = kept[i] < int64(len(recs[i].Commitments))
		recs[i] = recs[i].Public()
	}
	return recs, nil
}

// factorID returns the id of factor f, inserting it if it is new, and the
// data stored with it (which a record's hash covers).
func (t *tx) factorID(ctx context.Context, f identity.Factor) (int64, []byte, error) {
	var id int64
	var data []byte
	err := t.tx.QueryRow(ctx, `WITH ins AS (
			INSERT INTO factors (kind, value, data) VALUES ($1, $2, $3)
			ON CONFLICT (kind, value) DO NOTHING RETURNING id, data
		)
		SELECT id, data FROM ins UNION ALL SELECT id, data FROM factors WHERE kind = $1 AND value = $2
		LIMIT 1`, string(f.Kind), f.Value, nonNil(f.Data)).Scan(&id, &data)
	if err != nil {
		return 0, nil, fmt.Errorf("factor %s: %w", f, err)
	}
	if len(data) == 0 {
		data = nil
	}
	return id, data, nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// KeySets returns the JWKs of the oidc.jwks records of the provider with
// issuer (see identity.Tx).
func (t *tx) KeySets(ctx context.Context, issuer string) ([][]byte, error) {
	rows, err := t.tx.Query(ctx, `SELECT e.signer_key FROM evidence e JOIN factors ff ON ff.id = e.from_factor
		WHERE ff.kind = $1 AND ff.value = $2 AND e.method = $3 ORDER BY e.seq`,
		string(identity.KindOIDCProvider), issuer, string(identity.MethodOIDCKeySet))
	if err != nil {
		return nil, fmt.Errorf("postgres: key sets of %s: %w", issuer, err)
	}
	jwks, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("postgres: key sets of %s: %w", issuer, err)
	}
	return jwks, nil
}

// Append seals e after the log's head and stores it (see identity.Tx).
// The factor data the record is hashed with is the data stored for its
// factors, so that the hash re-computes from what the log serves.
func (t *tx) Append(ctx context.Context, e *identity.Evidence) error {
	fromID, fromData, err := t.factorID(ctx, e.From)
	if err != nil {
		return fmt.Errorf("postgres: append evidence: %w", err)
	}
	e.From.Data = fromData
	var toID *int64
	if !e.To.IsZero() {
		id, data, err := t.factorID(ctx, e.To)
		if err != nil {
			return fmt.Errorf("postgres: append evidence: %w", err)
		}
		toID, e.To.Data = &id, data
	}
	var identityID *int64
	if e.Handle != "" {
		var id int64
		if err := t.tx.QueryRow(ctx, "SELECT id FROM identities WHERE handle = $1", string(e.Handle)).Scan(&id); err != nil {
			return fmt.Errorf("postgres: append evidence: identity %s: %w", e.Handle, err)
		}
		identityID = &id
	}
	var revokes *int64
	if e.Revokes != 0 {
		revokes = &e.Revokes
	}
	e.Seal(t.headSeq, t.headHash)
	// The row holds the public form: a committed statement, signature or
	// ID token is stored as an artifact, not in the row. (A committed
	// address stays in its factor, which the row references and the log
	// does not serve.)
	pub := e.Public()
	// The row, its artifacts, the head and the notification go to the
	// server as one batch: one round trip, whatever the record commits to.
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO evidence (seq, method, purpose, identity_id, handle, from_factor, to_factor,
			label, statement, signature, signer_key, created_at, expires_at, revokes, prev_hash, hash, consent, commitments)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`,
		e.Seq, string(e.Method), string(e.Purpose), identityID, string(e.Handle), fromID, toID,
		e.Label, nonNil(pub.Statement), nonNil(pub.Signature), nonNil(pub.SignerKey), e.Created, nullTime(e.Expires),
		revokes, e.PrevHash, e.Hash, nonNil(e.Consent), encodeCommitments(e.Commitments))
	queueArtifacts(b, e)
	b.Queue("UPDATE evidence_head SET seq = $1, hash = $2", e.Seq, e.Hash)
	payload := string(e.Handle)
	if payload == "" {
		payload = "*"
	}
	if !t.notified[payload] {
		b.Queue("SELECT pg_notify($1, $2)", EvidenceChannel, payload)
	}
	if err := t.tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("postgres: append evidence %d: %w", e.Seq, err)
	}
	t.headSeq, t.headHash = e.Seq, e.Hash
	if t.notified == nil {
		t.notified = map[string]bool{}
	}
	t.notified[payload] = true
	return nil
}

// WatchEvidence calls fn, from one goroutine, with the payload of every
// evidence append any node commits (a handle, or "*" for any identity),
// until ctx ends or the connection fails; then it returns the error. It
// closes ready (if not nil) once it listens. Appends committed while
// nobody listens are not replayed: a cache should be dropped after an
// error.
func (s *Store) WatchEvidence(ctx context.Context, ready chan<- struct{}, fn func(handle string)) error {
	return s.listen(ctx, EvidenceChannel, ready, fn)
}
