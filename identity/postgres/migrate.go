package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/pgp"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLock is the advisory lock key that serialises migrations when
// several nodes start at once ("kith" in ASCII).
const migrationLock = 0x6b697468

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order. File names
// are NNNN_description.sql.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("postgres: read migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("postgres: migration %s: name must start with a version number", e.Name())
		}
		body, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("postgres: read migration %s: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("postgres: migration %s: expected version %d", m.name, i+1)
		}
	}
	return ms, nil
}

// LatestVersion is the schema version this binary's migrations reach.
func LatestVersion() int {
	ms, err := migrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// Migrate applies every pending migration in one transaction, under an
// advisory lock so that nodes starting together do not race, and returns
// the schema version reached. A database newer than this binary is an
// error: an old node must not write to a schema it does not know. Then
// it builds the indexes a bulk load deferred and died without building
// (DeferIndexes).
func (s *Store) Migrate(ctx context.Context) (int, error) {
	ms, err := migrations()
	if err != nil {
		return 0, err
	}
	version := 0
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&version); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if version > len(ms) {
			return fmt.Errorf("database schema version %d is newer than this binary's %d: upgrade Kith", version, len(ms))
		}
		for _, m := range ms[version:] {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("apply %s: %w", m.name, err)
			}
			if step := dataStep(m.name); step != nil {
				if err := step(ctx, tx); err != nil {
					return fmt.Errorf("apply %s: %w", m.name, err)
				}
			}
			if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
				return fmt.Errorf("record %s: %w", m.name, err)
			}
			version = m.version
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: migrate: %w", err)
	}
	if err := s.healDeferredIndexes(ctx); err != nil {
		return version, fmt.Errorf("postgres: migrate: %w", err)
	}
	return version, nil
}

// dataStep returns the Go step that completes the migration named name,
// nil when its SQL is all of it: a rule the SQL cannot state (one that
// lives in Go, once) is applied to the stored rows this way.
func dataStep(name string) func(context.Context, pgx.Tx) error {
	if strings.HasSuffix(name, "_user_id_addresses.sql") {
		return rereadUserIDAddresses
	}
	return nil
}

// rereadUserIDAddresses sets every stored user ID's email to what
// pgp.UserIDAddress reads from it today. That reading never finds an
// address the earlier one (the last <...>) did not, so only rows with an
// address can change: those of ambiguous user IDs lose theirs, and with
// it every lookup by that address (HKP, VKS, WKD, verification).
func rereadUserIDAddresses(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, "SELECT key_ref, position, uid, email FROM user_ids WHERE email <> ''")
	if err != nil {
		return fmt.Errorf("read user IDs: %w", err)
	}
	var b pgx.Batch
	for rows.Next() {
		var (
			key        int64
			pos        int32
			uid, email string
		)
		if err := rows.Scan(&key, &pos, &uid, &email); err != nil {
			rows.Close()
			return fmt.Errorf("read user IDs: %w", err)
		}
		// The stored uid is the packet's text made valid UTF-8
		// (cleanText), which changes no character the parser reads.
		if now := cleanText(pgp.UserIDAddress(uid)); now != email {
			b.Queue("UPDATE user_ids SET email = $3 WHERE key_ref = $1 AND position = $2", key, pos, now)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read user IDs: %w", err)
	}
	if b.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("update user IDs' addresses: %w", err)
	}
	return nil
}

// SchemaVersion returns the schema version recorded in the database.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.pool.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("postgres: schema version: %w", err)
	}
	return v, nil
}
