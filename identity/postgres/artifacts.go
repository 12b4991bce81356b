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

// saveArtifacts stores the private artifacts of the appended record e.
func (t *tx) saveArtifacts(ctx context.Context, e *identity.Evidence) error {
	for _, a := range e.Artifacts {
		if _, err := t.tx.Exec(ctx, `INSERT INTO evidence_artifacts (seq, kind, salt, value) VALUES ($1, $2, $3, $4)`,
			e.Seq, string(a.Kind), a.Salt, nonNil(a.Value)); err != nil {
			return fmt.Errorf("postgres: append evidence %d: artifact %s: %w", e.Seq, a.Kind, err)
		}
	}
	return nil
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
	var out []identity.RecordArtifacts
	var seq int64
	var kind string
	var a identity.Artifact
	_, err = pgx.ForEachRow(rows, []any{&seq, &kind, &a.Salt, &a.Value}, func() error {
		a.Kind = identity.ArtifactKind(kind)
		if n := len(out); n == 0 || out[n-1].Seq != seq {
			out = append(out, identity.RecordArtifacts{Seq: seq})
		}
		out[len(out)-1].Artifacts = append(out[len(out)-1].Artifacts, identity.Artifact{
			Kind: a.Kind, Salt: append([]byte(nil), a.Salt...), Value: append([]byte(nil), a.Value...)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: artifacts of %s: %w", h, err)
	}
	return out, nil
}
