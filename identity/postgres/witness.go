// witness.go: Kith as a witness (witness.Store): the last checkpoint
// cosigned per log origin, checked and replaced under the row's lock.

package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/kith-keyserver/kith/identity/tlog/witness"
)

var _ witness.Store = (*Store)(nil)

// UpdateCosigned calls fn with the last checkpoint cosigned for origin,
// holding its row's lock (a new origin's row is made first, so that two
// first checkpoints are serialised too), and stores what fn returns.
func (s *Store) UpdateCosigned(ctx context.Context, origin string, fn func(last witness.Cosigned) (witness.Cosigned, error)) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		// Size 0 with an empty checkpoint stands for "never cosigned".
		if _, err := tx.Exec(ctx, `INSERT INTO witness_logs (origin, size, root, checkpoint) VALUES ($1, 0, $2, '')
			ON CONFLICT (origin) DO NOTHING`, origin, witness.EmptyRoot[:]); err != nil {
			return fmt.Errorf("postgres: witness %s: %w", origin, err)
		}
		last, err := lastCosigned(ctx, tx, origin, " FOR UPDATE")
		if err != nil {
			return err
		}
		next, err := fn(last)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE witness_logs SET size = $2, root = $3, checkpoint = $4, cosigned_at = now() WHERE origin = $1`,
			origin, next.Size, next.Root[:], next.Checkpoint); err != nil {
			return fmt.Errorf("postgres: witness %s: store size %d: %w", origin, next.Size, err)
		}
		return nil
	})
}

// LastCosigned returns the last checkpoint cosigned for origin.
func (s *Store) LastCosigned(ctx context.Context, origin string) (witness.Cosigned, error) {
	return lastCosigned(ctx, s.pool, origin, "")
}

func lastCosigned(ctx context.Context, q querier, origin, lock string) (witness.Cosigned, error) {
	var c witness.Cosigned
	var root, cp []byte
	err := q.QueryRow(ctx, `SELECT size, root, checkpoint FROM witness_logs WHERE origin = $1`+lock, origin).Scan(&c.Size, &root, &cp)
	if errors.Is(err, pgx.ErrNoRows) {
		return witness.Cosigned{Root: witness.EmptyRoot}, nil
	}
	if err != nil {
		return c, fmt.Errorf("postgres: witness %s: %w", origin, err)
	}
	c.Root = xtlog.Hash(root)
	if len(cp) > 0 {
		c.Checkpoint = cp
	}
	return c, nil
}
