package postgres_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func TestOpenAppliesEveryMigration(t *testing.T) {
	s := pgtest.NewStore(t)
	ctx := context.Background()
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v != postgres.LatestVersion() || v < 1 {
		t.Fatalf("schema version %d, want %d", v, postgres.LatestVersion())
	}
}

func TestMigrateTwiceChangesNothing(t *testing.T) {
	s := pgtest.NewStore(t)
	ctx := context.Background()
	v1, err := s.Migrate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := s.Migrate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v1 != v2 || v1 != postgres.LatestVersion() {
		t.Fatalf("versions %d then %d, want %d", v1, v2, postgres.LatestVersion())
	}
}

func TestConcurrentMigrationsAgree(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			s, err := postgres.Open(ctx, url, postgres.Options{})
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("concurrent open: %v", err)
		}
	}
}

func TestOpenRefusesUnreachableServer(t *testing.T) {
	_, err := postgres.Open(context.Background(), "host=/nonexistent-kith-socket-dir port=5 user=kith dbname=kith connect_timeout=2", postgres.Options{})
	if err == nil {
		t.Fatal("Open succeeded against a server that does not exist")
	}
}

// TestMigrationRereadsStoredAddresses: a database written under the
// earlier reading of user IDs (the last <...>) holds an ambiguous user
// ID's address; the migration to the one reading (pgp.UserIDAddress)
// takes it away, so no lookup by either address finds the key, and
// leaves every plain user ID's address alone.
func TestMigrationRereadsStoredAddresses(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k := entityKey(t, newEntity(t, "CEO <ceo@example.org>", "Alice <alice@example.org>"))
	if _, err := s.AddKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The row as the earlier reading wrote it, and the schema before the
	// migration.
	if _, err := conn.Exec(ctx, `UPDATE user_ids SET uid = 'CEO <ceo@example.org> <mallory@example.org>', email = 'mallory@example.org' WHERE email = 'ceo@example.org'`); err != nil {
		t.Fatal(err)
	}
	var last int
	if err := conn.QueryRow(ctx, `SELECT version FROM schema_migrations WHERE name LIKE '%_user_id_addresses.sql'`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `DELETE FROM schema_migrations WHERE version >= $1`, last); err != nil {
		t.Fatal(err)
	}
	find := func(email string) int {
		ks, _, err := s.FindKeys(ctx, keys.Query{Email: email, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		return len(ks)
	}
	if find("mallory@example.org") != 1 {
		t.Fatal("the simulated old row is not found by its old address")
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for email, want := range map[string]int{"mallory@example.org": 0, "ceo@example.org": 0, "alice@example.org": 1} {
		if got := find(email); got != want {
			t.Errorf("keys found by %s after the migration: %d, want %d", email, got, want)
		}
	}
}
