package postgres_test

import (
	"context"
	"os"
	"testing"

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
