// certificates.go: the store's reads for SSH certificates: the records of
// certificates still within their validity, and whether a CA key is on
// record.

package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/kith-keyserver/kith/identity"
)

// LiveCertificates returns the ssh.certificate records, with every byte,
// whose validity ends after now (see identity.Store).
func (s *Store) LiveCertificates(ctx context.Context, now time.Time) ([]identity.Evidence, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+fullColumns+` FROM evidence e `+factorJoins+`
		WHERE e.method = 'ssh.certificate' AND e.expires_at > $1 ORDER BY e.seq`, now)
	if err != nil {
		return nil, fmt.Errorf("postgres: live certificates: %w", err)
	}
	recs, err := scanRecords(rows, true)
	if err != nil {
		return nil, fmt.Errorf("postgres: live certificates: %w", err)
	}
	return recs, nil
}

// KeyRecorded reports whether a record with method m holds exactly key as
// its signer key (see identity.Tx).
func (t *tx) KeyRecorded(ctx context.Context, m identity.Method, key []byte) (bool, error) {
	var ok bool
	err := t.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM evidence WHERE method = $1 AND signer_key = $2)`,
		string(m), key).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("postgres: %s record: %w", m, err)
	}
	return ok, nil
}

// NextSeq returns the Seq the transaction's next Append gives its record.
func (t *tx) NextSeq(ctx context.Context) (int64, error) { return t.headSeq + 1, nil }
