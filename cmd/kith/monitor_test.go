package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/web/api"
)

// checkpointCovers polls the server's checkpoint until it covers every
// record of its log, as a monitor run after one checkpoint interval sees.
func checkpointCovers(t *testing.T, base string) {
	t.Helper()
	count := func() (int64, int64) {
		resp, err := http.Get(base + "/api/v1/log?after=0&limit=1000")
		if err != nil {
			return 0, -1
		}
		defer resp.Body.Close()
		var page api.LogPage
		if json.NewDecoder(resp.Body).Decode(&page) != nil {
			return 0, -1
		}
		_, cp := curl(t, base+"/log/checkpoint")
		lines := strings.Split(cp, "\n")
		if len(lines) < 2 {
			return int64(len(page.Records)), -1
		}
		size, _ := strconv.ParseInt(lines[1], 10, 64)
		return int64(len(page.Records)), size
	}
	var recs, size int64
	if !testkit.PollEvery(30*time.Second, 50*time.Millisecond, func() bool {
		recs, size = count()
		return recs > 0 && size == recs
	}) {
		t.Fatalf("the checkpoint covers %d of %d records after 30 s", size, recs)
	}
}

// TestMonitorReportsWhatTouchesAHandle: `kith monitor alice`, run like
// cron against a real server, reports on its next run (once a checkpoint
// covers them) a key someone else links with alice's address in its user
// ID and a certificate issued for alice, and nothing it reported before;
// JSON lines say the same; a log rewritten behind the server's back makes
// it exit 1 and keeps its state.
func TestMonitorReportsWhatTouchesAHandle(t *testing.T) {
	requirePostgresBinaries(t)
	testkit.Tool(t, "gpg")
	db := pgtest.NewDatabase(t)
	s := startServe(t, tempDir(t), nil, "--database-url", db, "--ssh-ca-enabled")
	s.waitHealth(t, 200, 60*time.Second)
	base := "http://" + s.addr
	alice, bob := newIDUser(t, base), newIDUser(t, base)
	key := newSSHKeyPair(t, filepath.Join(alice.home, ".ssh"), "id_ed25519")
	must := func(u *idUser, args ...string) string {
		t.Helper()
		out, errOut, code := u.kith(args...)
		if code != 0 {
			t.Fatalf("kith %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	must(alice, "id", "claim", "alice", "--ssh-key", key.path)
	afpr := alice.gpg.NewKey("Alice <alice@example.org>", "sign")
	must(alice, "id", "add", "alice", "--pgp", afpr, "--by-ssh-key", key.path)
	checkpointCovers(t, base)

	state := filepath.Join(t.TempDir(), "monitor.state")
	monitor := func(extra ...string) (string, string, int) {
		return alice.kith(append([]string{"monitor", "--server", base, "--state", state}, extra...)...)
	}
	out, errOut, code := monitor("alice")
	if code != 0 || !strings.Contains(out, "link ssh.challenge (claim) handle alice") || !strings.Contains(errOut, "trusting the log key") {
		t.Fatalf("first run: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code = monitor("alice"); code != 0 || out != "" {
		t.Fatalf("a run with nothing new: exit %d\n%s%s", code, out, errOut)
	}

	// Bob links a key whose user ID has alice's address; alice gets a
	// certificate.
	bfpr := bob.gpg.NewKey("Not Alice <alice@example.org>", "sign")
	must(bob, "id", "claim", "bob", "--pgp", bfpr)
	must(alice, "ssh-cert", "alice", "--ssh-key", key.path, "--agent=false")
	checkpointCovers(t, base)
	before, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code = monitor("--json", "alice")
	if code != 0 {
		t.Fatalf("second run: exit %d\n%s%s", code, out, errOut)
	}
	var sawBob, sawCert bool
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev struct{ Event, Method, Handle, From, Term, Why string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		if ev.Term != "alice" {
			t.Errorf("event for term %q: %s", ev.Term, line)
		}
		if ev.Event == "link" && ev.From == "pgp "+bfpr && strings.Contains(ev.Why, "carries alice@example.org") {
			sawBob = true
		}
		if ev.Event == "certificate" && ev.Method == "ssh.certificate" && ev.Handle == "alice" {
			sawCert = true
		}
		if strings.Contains(line, `"ssh.challenge"`) && strings.Contains(line, `"claim"`) {
			t.Errorf("reported again: %s", line)
		}
	}
	if !sawBob || !sawCert {
		t.Fatalf("bob's key seen %v, the certificate seen %v:\n%s", sawBob, sawCert, out)
	}

	// The same run again, by address and by fingerprint, from the state
	// before: the text lines name the same records.
	if err := os.WriteFile(state, before, 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = monitor("alice@example.org", bfpr)
	if code != 0 || !strings.Contains(out, "from pgp "+bfpr) || strings.Contains(out, "ssh.certificate") {
		t.Fatalf("by address: exit %d\n%s%s", code, out, errOut)
	}

	// A record rewritten in the database and the tree signed anew over
	// it: not consistent with the state; exit 1, state kept.
	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, q := range []string{"UPDATE evidence SET label = 'rewritten', hash = sha256(hash) WHERE seq = 1",
		"DELETE FROM tlog_hashes", "UPDATE tlog_head SET size = 0, checkpoint = NULL"} {
		if _, err := conn.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	checkpointCovers(t, base)
	kept, _ := os.ReadFile(state)
	out, errOut, code = monitor("alice")
	if code != 1 || !strings.Contains(errOut, "not consistent") {
		t.Fatalf("a rewritten log: exit %d\n%s%s", code, out, errOut)
	}
	if after, _ := os.ReadFile(state); string(after) != string(kept) {
		t.Fatal("a failed run changed the state")
	}
}
