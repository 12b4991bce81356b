// artifacts.go: the records' private artifacts (identity.Artifact), in
// evidence_artifacts beside the log, and the commitments the records
// keep in their place.

package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity"
)

// encodeCommitments encodes a record's commitments for the commitments
// column: each as its kind and its hash, both as a 4-byte big-endian
// length and the bytes.
func encodeCommitments(cs []identity.Commitment) []byte {
	b := []byte{}
	for _, c := range cs {
		for _, s := range [][]byte{[]byte(c.Kind), c.Hash} {
			b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
			b = append(b, s...)
		}
	}
	return b
}

// decodeCommitments reads what encodeCommitments wrote.
func decodeCommitments(b []byte) ([]identity.Commitment, error) {
	var out []identity.Commitment
	next := func() ([]byte, error) {
		if len(b) < 4 || uint64(len(b)-4) < uint64(binary.BigEndian.Uint32(b)) {
			return nil, errors.New("truncated commitments")
		}
		n := binary.BigEndian.Uint32(b)
		s := b[4 : 4+n]
		b = b[4+n:]
		return s, nil
	}
	for len(b) > 0 {
		k, err := next()
		if err != nil {
			return nil, err
		}
		h, err := next()
		if err != nil {
			return nil, err
		}
		out = append(out, identity.Commitment{Kind: identity.ArtifactKind(k), Hash: append([]byte(nil), h...)})
	}
	return out, nil
}

// queueArtifacts queues the statement that stores the private artifacts
// of the appended record e, if it has any.
func queueArtifacts(b *pgx.Batch, e *identity.Evidence) {
	if len(e.Artifacts) == 0 {
		return
	}
	kinds := make([]string, len(e.Artifacts))
	salts := make([][]byte, len(e.Artifacts))
	values := make([][]byte, len(e.Artifacts))
	for i, a := range e.Artifacts {
		kinds[i], salts[i], values[i] = string(a.Kind), a.Salt, nonNil(a.Value)
	}
	b.Queue(`INSERT INTO evidence_artifacts (seq, kind, salt, value)
		SELECT $1, k, s, v FROM unnest($2::text[], $3::bytea[], $4::bytea[]) AS a(k, s, v)`,
		e.Seq, kinds, salts, values)
}

// AccountSalt returns the salt of the OpenID Connect account, storing
// fresh if it has none, or known when a factor names the account by its
// subject (see identity.Store).
func (s *Store) AccountSalt(ctx context.Context, issuer, subject string, fresh []byte) ([]byte, bool, error) {
	var known bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM factors WHERE kind = $1 AND value = $2)`,
		string(identity.KindOIDC), identity.OIDCFactor(issuer, subject).Value).Scan(&known); err != nil {
		return nil, false, fmt.Errorf("postgres: account salt: %w", err)
	}
	if known {
		return nil, true, nil
	}
	account := identity.PseudonymousOIDCFactor(issuer, fresh, subject).Value
	var salt []byte
	err := s.pool.QueryRow(ctx, `WITH ins AS (
			INSERT INTO oidc_subjects (issuer, subject, salt, account) VALUES ($1, $2, $3, $4)
			ON CONFLICT (issuer, subject) DO NOTHING RETURNING salt
		)
		SELECT salt FROM ins UNION ALL SELECT salt FROM oidc_subjects WHERE issuer = $1 AND subject = $2 LIMIT 1`,
		issuer, subject, fresh, account).Scan(&salt)
	if err != nil {
		return nil, false, fmt.Errorf("postgres: account salt: %w", err)
	}
	return salt, false, nil
}

// EraseKeyArtifacts deletes what the records an OpenPGP key carries (and
// the email records and server revocations about it) hold of a person
// (see identity.Tx): every artifact of those records, or, with userID,
// their whole-key artifacts and every artifact of those linking email;
// an identity's records signed by the key lose their whole-key artifacts.
// The records' erased addresses are unlinked from them, their factors
// deleted when no other record names them, and the key's pending mail
// links for the addresses dropped.
func (t *tx) EraseKeyArtifacts(ctx context.Context, key identity.Factor, userID bool, email string) (int, error) {
	all := !userID
	var n int
	// An identity's record signed by the key (a claim, an add, a
	// revocation) loses only its whole key: its other artifacts are the
	// identity's.
	err := t.tx.QueryRow(ctx, `WITH recs AS (
			SELECT e.seq, e.identity_id IS NULL AS carried,
				coalesce($3 <> '' AND tf.kind = 'email' AND tf.value = $3, false) AS addressed
			FROM evidence e JOIN factors ff ON ff.id = e.from_factor LEFT JOIN factors tf ON tf.id = e.to_factor
			WHERE ff.kind = $1 AND ff.value = $2 AND e.commitments <> ''::bytea
		), gone AS (
			DELETE FROM evidence_artifacts a USING recs r
			WHERE a.seq = r.seq AND (a.kind = $4 OR r.carried AND ($5 OR r.addressed))
			RETURNING a.seq
		)
		SELECT count(DISTINCT seq) FROM gone`,
		string(identity.KindPGP), key.Value, email, string(identity.ArtifactPGPKey), all).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("postgres: erase artifacts of key %s: %w", key.Value, err)
	}
	if _, err := t.tx.Exec(ctx, `WITH unlinked AS (
			UPDATE evidence e SET to_factor = NULL FROM factors ff, factors tf
			WHERE ff.id = e.from_factor AND tf.id = e.to_factor AND ff.kind = $1 AND ff.value = $2
				AND e.identity_id IS NULL AND e.commitments <> ''::bytea
				AND tf.kind = 'email' AND ($4 OR $3 <> '' AND tf.value = $3)
			RETURNING tf.id
		)
		DELETE FROM factors f WHERE f.id IN (SELECT id FROM unlinked)
			AND NOT EXISTS (SELECT 1 FROM evidence x WHERE x.from_factor = f.id
				OR (x.to_factor = f.id AND x.seq NOT IN (SELECT e.seq FROM evidence e JOIN factors ff ON ff.id = e.from_factor
					WHERE ff.kind = $1 AND ff.value = $2 AND e.identity_id IS NULL AND e.commitments <> ''::bytea)))`,
		string(identity.KindPGP), key.Value, email, all); err != nil {
		return 0, fmt.Errorf("postgres: erase artifacts of key %s: %w", key.Value, err)
	}
	if _, err := t.tx.Exec(ctx, `DELETE FROM email_tokens WHERE fingerprint = $1 AND ($3 OR $2 <> '' AND email = $2)`,
		key.Value, email, all); err != nil {
		return 0, fmt.Errorf("postgres: erase mail links of key %s: %w", key.Value, err)
	}
	return n, nil
}

// KeyArtifacts returns the private artifacts of the records the OpenPGP
// key carries, and of the email records about it, in log order (see
// identity.Store).
func (s *Store) KeyArtifacts(ctx context.Context, key identity.Factor) ([]identity.RecordArtifacts, error) {
	rows, err := s.pool.Query(ctx, `SELECT a.seq, a.kind, a.salt, a.value FROM evidence_artifacts a
		JOIN evidence e ON e.seq = a.seq JOIN factors ff ON ff.id = e.from_factor
		WHERE ff.kind = $1 AND ff.value = $2 AND e.identity_id IS NULL ORDER BY a.seq, a.kind`,
		string(identity.KindPGP), key.Value)
	if err != nil {
		return nil, fmt.Errorf("postgres: artifacts of key %s: %w", key.Value, err)
	}
	out, err := scanArtifacts(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: artifacts of key %s: %w", key.Value, err)
	}
	return out, nil
}

// EraseArtifacts deletes the private artifacts of every record naming h
// and unlinks those records' committed email factors (see identity.Tx).
func (t *tx) EraseArtifacts(ctx context.Context, h identity.Handle) (int, error) {
	var n int
	err := t.tx.QueryRow(ctx, `WITH gone AS (
			DELETE FROM evidence_artifacts a USING evidence e
			WHERE a.seq = e.seq AND e.handle = $1 AND e.handle <> ''
			RETURNING a.seq
		)
		SELECT count(DISTINCT seq) FROM gone`, string(h)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("postgres: erase artifacts of %s: %w", h, err)
	}
	// The salts of the identity's pseudonymous accounts go: a later login
	// by the same account is a new pseudonym, unlinkable to this one.
	if _, err := t.tx.Exec(ctx, `DELETE FROM oidc_subjects o USING evidence e, factors f
		WHERE e.handle = $1 AND e.handle <> '' AND (f.id = e.from_factor OR f.id = e.to_factor)
			AND f.kind = $2 AND o.account = f.value`, string(h), string(identity.KindOIDC)); err != nil {
		return 0, fmt.Errorf("postgres: erase account salts of %s: %w", h, err)
	}
	// A committed email's address lives only in its factor: the record
	// stops naming it (its hash covers the commitment, not the address),
	// and the factor goes when no other record names it.
	if _, err := t.tx.Exec(ctx, `WITH unlinked AS (
			UPDATE evidence e SET to_factor = NULL FROM evidence old
			WHERE old.seq = e.seq AND e.handle = $1 AND e.handle <> '' AND e.method = $2 AND e.commitments <> ''::bytea
				AND e.to_factor IS NOT NULL
			RETURNING old.to_factor AS id
		)
		DELETE FROM factors f USING unlinked u WHERE f.id = u.id
			AND NOT EXISTS (SELECT 1 FROM evidence x WHERE (x.from_factor = f.id OR x.to_factor = f.id)
				AND x.seq NOT IN (SELECT seq FROM evidence WHERE handle = $1 AND method = $2 AND commitments <> ''::bytea))`,
		string(h), string(identity.MethodOIDCEmailVerified)); err != nil {
		return 0, fmt.Errorf("postgres: erase artifacts of %s: %w", h, err)
	}
	return n, nil
}

// IdentityArtifacts returns the private artifacts of the records naming
// h, in log order (see identity.Store).
func (s *Store) IdentityArtifacts(ctx context.Context, h identity.Handle) ([]identity.RecordArtifacts, error) {
	rows, err := s.pool.Query(ctx, `SELECT a.seq, a.kind, a.salt, a.value FROM evidence_artifacts a
		JOIN evidence e ON e.seq = a.seq WHERE e.handle = $1 AND e.handle <> '' ORDER BY a.seq, a.kind`, string(h))
	if err != nil {
		return nil, fmt.Errorf("postgres: artifacts of %s: %w", h, err)
	}
	out, err := scanArtifacts(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: artifacts of %s: %w", h, err)
	}
	return out, nil
}

// scanArtifacts reads rows of seq, kind, salt and value, ordered by seq,
// into one RecordArtifacts per record.
func scanArtifacts(rows pgx.Rows) ([]identity.RecordArtifacts, error) {
	var out []identity.RecordArtifacts
	var seq int64
	var kind string
	var salt, value []byte
	_, err := pgx.ForEachRow(rows, []any{&seq, &kind, &salt, &value}, func() error {
		if n := len(out); n == 0 || out[n-1].Seq != seq {
			out = append(out, identity.RecordArtifacts{Seq: seq})
		}
		out[len(out)-1].Artifacts = append(out[len(out)-1].Artifacts, identity.Artifact{
			Kind: identity.ArtifactKind(kind), Salt: append([]byte(nil), salt...), Value: append([]byte(nil), value...)})
		return nil
	})
	return out, err
}
