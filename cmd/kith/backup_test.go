package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/postgres/embedded"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
)

// pgTool returns the path of a PostgreSQL client tool of the server's
// version.
func pgTool(t *testing.T, name string) string {
	t.Helper()
	requirePostgresBinaries(t)
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	sort.Strings(found)
	if len(found) > 0 {
		return found[len(found)-1]
	}
	return testkit.Tool(t, name)
}

func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestBackupAndRestoreEmbeddedCluster runs the README's backup and restore
// commands: pg_dump against the embedded cluster's socket with its
// password file, then a restore into a new data directory. Keys,
// identities and the evidence log survive.
func TestBackupAndRestoreEmbeddedCluster(t *testing.T) {
	// Mostly waiting (initdb, restarts, backoff): run beside the others.
	t.Parallel()
	pgDump, pgRestore := pgTool(t, "pg_dump"), pgTool(t, "pg_restore")
	dirA := tempDir(t)
	s := startServe(t, dirA, nil)
	s.waitHealth(t, http.StatusOK, 60*time.Second)
	base := "http://" + s.addr

	up := newUploader(t, base, 20, 31)
	up.run(2)
	if !testkit.PollEvery(60*time.Second, 20*time.Millisecond, func() bool { return up.ok.Load() == 20 }) {
		t.Fatalf("uploads: %d of 20\n%s", up.ok.Load(), s.stderr)
	}
	up.halt()
	a := &apiServer{t: t, srv: &httptest.Server{URL: base}}
	alice := newSSHKeyPair(t, t.TempDir(), "alice")
	a.claim("alice", alice)
	_, keysBefore := getBody(t, base+"/users/alice.keys")
	if !strings.Contains(keysBefore, strings.Fields(alice.pub)[1]) {
		t.Fatalf("/users/alice.keys before the backup: %q", keysBefore)
	}
	code, logBefore := getBody(t, base+"/api/v1/log")
	if code != http.StatusOK || !strings.Contains(logBefore, "alice") {
		t.Fatalf("/api/v1/log before the backup: %d %q", code, logBefore)
	}

	// Backup, while the server runs.
	pgdirA := filepath.Join(dirA, "kith-data", "postgres")
	backup := filepath.Join(t.TempDir(), "kith.pgdump")
	cmd := exec.Command(pgDump, "-h", pgdirA, "-p", "5432", "-U", "kith", "-d", "kith", "-Fc", "-f", backup)
	cmd.Env = append(os.Environ(), "PGPASSFILE="+filepath.Join(pgdirA, embedded.PassFile))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	s.stop(t)

	// Restore into a new data directory: kith migrate makes the cluster
	// and its password, a running server holds it open for pg_restore,
	// and a restart lets the server start from the restored data.
	dirB := tempDir(t)
	bin := kithBinary(t)
	migrate := exec.Command(bin, "migrate")
	migrate.Dir = dirB
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("kith migrate: %v\n%s", err, out)
	}
	s = startServe(t, dirB, nil)
	s.waitHealth(t, http.StatusOK, 60*time.Second)
	pgdirB := filepath.Join(dirB, "kith-data", "postgres")
	// The running server's log signer may lock tlog_head while the
	// restore replaces the tables one by one; PostgreSQL then ends one of
	// the two as deadlocked. The restore is one transaction, so it is run
	// again, as the README says.
	for try := 1; ; try++ {
		cmd = exec.Command(pgRestore, "-h", pgdirB, "-p", "5432", "-U", "kith", "-d", "kith",
			"--clean", "--if-exists", "--no-owner", "--single-transaction", backup)
		cmd.Env = append(os.Environ(), "PGPASSFILE="+filepath.Join(pgdirB, embedded.PassFile))
		out, err := cmd.CombinedOutput()
		if err == nil {
			break
		}
		if try == 3 || !strings.Contains(string(out), "deadlock detected") {
			t.Fatalf("pg_restore (try %d): %v\n%s", try, err, out)
		}
		t.Logf("pg_restore try %d lost a deadlock to the running server; again", try)
	}
	s.stop(t)
	s = startServe(t, dirB, nil)
	s.waitHealth(t, http.StatusOK, 60*time.Second)
	base = "http://" + s.addr
	up.base = base
	if gone := up.missing(t); len(gone) > 0 {
		t.Fatalf("keys lost in the restore: %v", gone)
	}
	if _, got := getBody(t, base+"/users/alice.keys"); got != keysBefore {
		t.Fatalf("/users/alice.keys after the restore: %q, want %q", got, keysBefore)
	}
	if _, got := getBody(t, base+"/api/v1/log"); got != logBefore {
		t.Fatalf("evidence log after the restore:\n%s\nwant\n%s", got, logBefore)
	}
	s.stop(t)
}

// TestBackupAndRestoreExternalDatabase runs the README's commands for a
// database_url: pg_dump of the live database, pg_restore into a database
// Kith never migrated, and a kith serve on it serves the same keys,
// identities and evidence log.
func TestBackupAndRestoreExternalDatabase(t *testing.T) {
	t.Parallel()
	pgDump, pgRestore := pgTool(t, "pg_dump"), pgTool(t, "pg_restore")
	src, dst := pgtest.NewDatabase(t), pgtest.NewDatabase(t)
	s := startServe(t, tempDir(t), nil, "--database-url", src)
	s.waitHealth(t, http.StatusOK, 60*time.Second)
	base := "http://" + s.addr

	up := newUploader(t, base, 10, 47)
	up.run(2)
	if !testkit.PollEvery(60*time.Second, 20*time.Millisecond, func() bool { return up.ok.Load() == 10 }) {
		t.Fatalf("uploads: %d of 10\n%s", up.ok.Load(), s.stderr)
	}
	up.halt()
	a := &apiServer{t: t, srv: &httptest.Server{URL: base}}
	bob := newSSHKeyPair(t, t.TempDir(), "bob")
	a.claim("bob", bob)
	_, keysBefore := getBody(t, base+"/users/bob.keys")
	if !strings.Contains(keysBefore, strings.Fields(bob.pub)[1]) {
		t.Fatalf("/users/bob.keys before the backup: %q", keysBefore)
	}
	_, logBefore := getBody(t, base+"/api/v1/log")

	// Backup, while the server runs.
	backup := filepath.Join(t.TempDir(), "kith.pgdump")
	if out, err := exec.Command(pgDump, src, "-Fc", "-f", backup).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	s.stop(t)

	// Restore into an empty database: no --clean needed.
	if out, err := exec.Command(pgRestore, "-d", dst, "--no-owner", "--single-transaction", backup).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, out)
	}
	s = startServe(t, tempDir(t), nil, "--database-url", dst)
	s.waitHealth(t, http.StatusOK, 60*time.Second)
	base = "http://" + s.addr
	up.base = base
	if gone := up.missing(t); len(gone) > 0 {
		t.Fatalf("keys lost in the restore: %v", gone)
	}
	if _, got := getBody(t, base+"/users/bob.keys"); got != keysBefore {
		t.Fatalf("/users/bob.keys after the restore: %q, want %q", got, keysBefore)
	}
	if _, got := getBody(t, base+"/api/v1/log"); got != logBefore {
		t.Fatalf("evidence log after the restore:\n%s\nwant\n%s", got, logBefore)
	}
	s.stop(t)
}
