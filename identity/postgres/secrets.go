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

// StoredSecret returns the bytes kept under name by PutSecret, and false
// when there are none. Unlike Secret it creates nothing: it is for values
// a node obtains from elsewhere (an ACME account key, a certificate) and
// shares with the others through the database.
func (s *Store) StoredSecret(ctx context.Context, name string) ([]byte, bool, error) {
	var value []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM secrets WHERE name = $1`, name).Scan(&value)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("postgres: secret %s: %w", name, err)
	}
	return value, true, nil
}

// PutSecret keeps value under name for every node, replacing what was
// there.
func (s *Store) PutSecret(ctx context.Context, name string, value []byte) error {
	if value == nil {
		value = []byte{} // the column is NOT NULL; an empty value is a value
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO secrets (name, value) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, created_at = now()`, name, value); err != nil {
		return fmt.Errorf("postgres: put secret %s: %w", name, err)
	}
	return nil
}

// DeleteSecret removes what is kept under name; none is not an error.
func (s *Store) DeleteSecret(ctx context.Context, name string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM secrets WHERE name = $1`, name); err != nil {
		return fmt.Errorf("postgres: delete secret %s: %w", name, err)
	}
	return nil
}
