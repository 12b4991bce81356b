// Package pgtest gives tests a real PostgreSQL database: each test package
// runs one throwaway cluster (started as the embedded default is), and each
// test gets a fresh, migrated database on it. With KITH_TEST_DATABASE_URL
// set, it uses that server instead and starts nothing.
//
// A package opts in with
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// When no server can be had, tests that ask for a database skip, except
// with CI=true, where they fail.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/embedded"
	"github.com/kith-keyserver/kith/identity/testkit"
)

// EnvURL names the variable that points tests at an existing server. Main
// sets it for the test binary (and the programs tests start) to the
// throwaway cluster's admin database.
const EnvURL = "KITH_TEST_DATABASE_URL"

// envUnavailable carries why no cluster could be started, from Main to the
// tests of the same process.
const envUnavailable = "KITH_TEST_DATABASE_UNAVAILABLE"

// Main starts the package's throwaway cluster unless EnvURL is set, runs
// the tests, stops the cluster and removes it. It returns the exit code.
func Main(m *testing.M) int {
	if os.Getenv(EnvURL) != "" {
		return m.Run()
	}
	parent, err := os.MkdirTemp("", "kith-pg-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		return 1
	}
	defer os.RemoveAll(parent)
	// The server may run as another user (when tests run as root): let it
	// reach its directory.
	if err := os.Chmod(parent, 0o711); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cluster, err := embedded.Start(ctx, embedded.Options{
		Dir:      filepath.Join(parent, "pg"),
		Database: "postgres",
		Settings: map[string]string{
			"fsync":              "off",
			"synchronous_commit": "off",
			"full_page_writes":   "off",
			"max_connections":    "300",
			"shared_buffers":     "128MB",
		},
	})
	cancel()
	if err != nil {
		os.Setenv(envUnavailable, err.Error())
		return m.Run()
	}
	os.Setenv(EnvURL, cluster.URL())
	code := m.Run()
	if err := cluster.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest: stop cluster:", err)
	}
	return code
}

// Unavailable skips t (or fails it with CI=true) when no server can be had.
func Unavailable(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvURL) != "" {
		return
	}
	why := os.Getenv(envUnavailable)
	if why == "" {
		why = "no test database: call pgtest.Main from TestMain, or set " + EnvURL
	}
	testkit.Missing(t, "PostgreSQL not available: %s", why)
}

// NewDatabase creates an empty database for t, dropped when t ends, and
// returns its connection string. with are clauses of CREATE DATABASE
// (e.g. "TEMPLATE template0", "LC_CTYPE 'C.UTF-8'").
func NewDatabase(t testing.TB, with ...string) string {
	t.Helper()
	Unavailable(t)
	admin := os.Getenv(EnvURL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", EnvURL, err)
	}
	defer conn.Close(context.Background())
	var b [6]byte
	rand.Read(b[:])
	name := "kith_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, strings.Join(append([]string{"CREATE DATABASE", name}, with...), " ")); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
		}
	})
	url, err := withDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", EnvURL, err)
	}
	return url
}

// withDatabase returns the connection string conn with its database
// replaced by name; conn is a URL or a key/value string.
func withDatabase(conn, name string) (string, error) {
	if strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://") {
		u, err := url.Parse(conn)
		if err != nil {
			return "", err
		}
		u.Path = "/" + name
		q := u.Query()
		q.Del("dbname")
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	// In a key/value string a later setting wins.
	return conn + " dbname=" + name, nil
}

// NewStore returns a store on a fresh, migrated database, closed when t
// ends.
func NewStore(t testing.TB) *postgres.Store {
	t.Helper()
	url := NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatalf("pgtest: open store: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}
