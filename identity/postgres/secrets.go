package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Secret returns the server secret called name, creating it from size
// random bytes the first time any node asks. Every node sharing the
// database gets the same bytes.
func (s *Store) Secret(ctx context.Context, name string, size int) ([]byte, error) {
	fresh := make([]byte, size)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("postgres: secret %s: %w", name, err)
	}
	var value []byte
	var err error
	// When another node inserts the secret while this statement runs, the
	// statement's snapshot sees neither row; the next one sees theirs.
	for range 3 {
		err = s.pool.QueryRow(ctx, `WITH ins AS (
				INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING value)
			SELECT value FROM ins UNION ALL SELECT value FROM secrets WHERE name = $1 LIMIT 1`, name, fresh).Scan(&value)
		if !errors.Is(err, pgx.ErrNoRows) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: secret %s: %w", name, err)
	}
	if len(value) != size {
		return nil, fmt.Errorf("postgres: secret %s has %d bytes, want %d", name, len(value), size)
	}
	return value, nil
}
