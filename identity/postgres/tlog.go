// tlog.go: the transparency log's storage (tlog.Storage): the tree's
// stored hashes, its latest signed checkpoint, and the evidence records'
// hashes as its entries.

package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/kith-keyserver/kith/identity/tlog"
)

var _ tlog.Storage = (*Store)(nil)

// treeReader reads the tree through a pool or a transaction.
type treeReader struct{ q querier }

// UpdateTree runs fn in one transaction holding tlog_head's row lock (see
// tlog.Storage).
func (s *Store) UpdateTree(ctx context.Context, fn func(ctx context.Context, tx tlog.TreeTx) error) error {
	return s.inTx(ctx, func(ptx pgx.Tx) error {
		if _, err := ptx.Exec(ctx, "SELECT 1 FROM tlog_head FOR UPDATE"); err != nil {
			return fmt.Errorf("postgres: lock tree: %w", err)
		}
		return fn(ctx, &treeTx{treeReader{ptx}, ptx})
	})
}

// Checkpoint returns the latest signed checkpoint and its tree size.
func (s *Store) Checkpoint(ctx context.Context) (int64, []byte, error) {
	return treeReader{s.pool}.Checkpoint(ctx)
}

// ReadHashes returns the tree's stored hashes at indexes.
func (s *Store) ReadHashes(ctx context.Context, indexes []int64) ([]xtlog.Hash, error) {
	return treeReader{s.pool}.ReadHashes(ctx, indexes)
}

// RecordHashes returns the hashes of the records after seq after.
func (s *Store) RecordHashes(ctx context.Context, after int64, limit int) ([][]byte, error) {
	return treeReader{s.pool}.RecordHashes(ctx, after, limit)
}

func (r treeReader) Checkpoint(ctx context.Context) (int64, []byte, error) {
	var size int64
	var signed []byte
	if err := r.q.QueryRow(ctx, "SELECT size, checkpoint FROM tlog_head").Scan(&size, &signed); err != nil {
		return 0, nil, fmt.Errorf("postgres: checkpoint: %w", err)
	}
	return size, signed, nil
}

func (r treeReader) ReadHashes(ctx context.Context, indexes []int64) ([]xtlog.Hash, error) {
	rows, err := r.q.Query(ctx, "SELECT idx, hash FROM tlog_hashes WHERE idx = ANY($1)", indexes)
	if err != nil {
		return nil, fmt.Errorf("postgres: read tree hashes: %w", err)
	}
	defer rows.Close()
	got := make(map[int64]xtlog.Hash, len(indexes))
	for rows.Next() {
		var idx int64
		var h []byte
		if err := rows.Scan(&idx, &h); err != nil {
			return nil, fmt.Errorf("postgres: read tree hashes: %w", err)
		}
		got[idx] = xtlog.Hash(h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: read tree hashes: %w", err)
	}
	out := make([]xtlog.Hash, len(indexes))
	for i, idx := range indexes {
		h, ok := got[idx]
		if !ok {
			return nil, fmt.Errorf("postgres: tree hash %d is not stored", idx)
		}
		out[i] = h
	}
	return out, nil
}

func (r treeReader) RecordHashes(ctx context.Context, after int64, limit int) ([][]byte, error) {
	rows, err := r.q.Query(ctx, "SELECT hash FROM evidence WHERE seq > $1 ORDER BY seq LIMIT $2", after, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: record hashes: %w", err)
	}
	hashes, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("postgres: record hashes: %w", err)
	}
	return hashes, nil
}

// treeTx is one transaction of tree writes.
type treeTx struct {
	treeReader
	tx pgx.Tx
}

func (t *treeTx) WriteHashes(ctx context.Context, start int64, hashes []xtlog.Hash) error {
	rows := make([][]any, len(hashes))
	for i, h := range hashes {
		rows[i] = []any{start + int64(i), h[:]}
	}
	if _, err := t.tx.CopyFrom(ctx, pgx.Identifier{"tlog_hashes"}, []string{"idx", "hash"}, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("postgres: write tree hashes from %d: %w", start, err)
	}
	return nil
}

func (t *treeTx) SetCheckpoint(ctx context.Context, size int64, signed []byte) error {
	if _, err := t.tx.Exec(ctx, "UPDATE tlog_head SET size = $1, checkpoint = $2, signed_at = now()", size, signed); err != nil {
		return fmt.Errorf("postgres: set checkpoint %d: %w", size, err)
	}
	return nil
}
