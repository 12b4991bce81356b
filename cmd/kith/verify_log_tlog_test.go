package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/testkit"
)

// logWithState builds a server whose log holds five records signed in a
// checkpoint, and a state file verify-log filled from it.
func logWithState(t *testing.T) (*apiServer, string) {
	t.Helper()
	testkit.Tool(t, "ssh-keygen")
	a := newAPIServer(t)
	dir := t.TempDir()
	k1, k2, k3 := newSSHKeyPair(t, dir, "one"), newSSHKeyPair(t, dir, "two"), newSSHKeyPair(t, dir, "three")
	a.claim("alice", k1)
	a.add("alice", k2, k1, false)
	a.add("alice", k3, k1, true)
	a.revoke("alice", k2, k1)
	if n := a.integrate(); n != 5 {
		t.Fatalf("tree of %d records, want 5", n)
	}
	state := filepath.Join(dir, "log-state.json")
	out, stderr, err := kithCmd("verify-log", "--server", a.srv.URL, "--state", state)
	if err != nil || !strings.Contains(out, "ok: 5 records verified") {
		t.Fatalf("verify-log on a good log: %v\n%s%s", err, out, stderr)
	}
	// The state holds; a second run passes and trusts nothing anew.
	out, _, err = kithCmd("verify-log", "--server", a.srv.URL, "--state", state)
	if err != nil || strings.Contains(out, "trusting") {
		t.Fatalf("second verify-log: %v\n%s", err, out)
	}
	return a, state
}

// expectCaught runs verify-log against the state and wants it to fail
// saying want.
func expectCaught(t *testing.T, a *apiServer, state, want string) {
	t.Helper()
	before, _ := os.ReadFile(state)
	out, stderr, err := kithCmd("verify-log", "--server", a.srv.URL, "--state", state)
	if !errors.Is(err, errLogInvalid) {
		t.Fatalf("verify-log passed a tampered log: %v\n%s%s", err, out, stderr)
	}
	if !strings.Contains(out+err.Error(), want) {
		t.Fatalf("verify-log did not say %q:\n%s%v", want, out, err)
	}
	if after, _ := os.ReadFile(state); !bytes.Equal(before, after) {
		t.Fatal("a failed verify-log changed its state")
	}
}

func (a *apiServer) exec(sql string, args ...any) {
	a.t.Helper()
	conn, err := pgx.Connect(context.Background(), a.dbURL)
	if err != nil {
		a.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		a.t.Fatal(err)
	}
}

// rebuildTree has the operator throw the tree away and sign it anew over
// the records as they now are, with the same key.
func (a *apiServer) rebuildTree() {
	a.t.Helper()
	a.exec("DELETE FROM tlog_hashes")
	a.exec("UPDATE tlog_head SET size = 0, checkpoint = NULL")
	a.integrate()
}

// TestVerifyLogCatchesARewrittenRecord: a record edited in the database,
// with the hash chain recomputed after it so that the chain holds, is
// not the log the checkpoint signed; re-signing the edited log is not
// consistent with the checkpoint verified before.
func TestVerifyLogCatchesARewrittenRecord(t *testing.T) {
	a, state := logWithState(t)
	recs, err := a.store.Log(context.Background(), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	recs[2].Label = "rewritten"
	for i := 2; i < len(recs); i++ {
		recs[i].Seal(recs[i-1].Seq, recs[i-1].Hash)
		a.exec("UPDATE evidence SET label = $1, prev_hash = $2, hash = $3 WHERE seq = $4", recs[i].Label, recs[i].PrevHash, recs[i].Hash, recs[i].Seq)
	}
	last := recs[len(recs)-1]
	a.exec("UPDATE evidence_head SET seq = $1, hash = $2", last.Seq, last.Hash)
	// Without the tree, the edited chain would pass.
	expectCaught(t, a, state, "records 1 to 5 are not the log the checkpoint signs")

	a.rebuildTree()
	expectCaught(t, a, state, "not consistent with the checkpoint of 5 records verified before")
}

// TestVerifyLogCatchesADroppedLastRecord: the last record deleted is
// missing from the signed log; re-signed without it, the log shrank.
func TestVerifyLogCatchesADroppedLastRecord(t *testing.T) {
	a, state := logWithState(t)
	recs, err := a.store.Log(context.Background(), 3, 1)
	if err != nil || len(recs) != 1 {
		t.Fatal(err)
	}
	a.exec("DELETE FROM evidence WHERE seq = 5")
	a.exec("UPDATE evidence_head SET seq = 4, hash = $1", recs[0].Hash)
	expectCaught(t, a, state, "the checkpoint covers 5 records, the server gave 4")

	a.rebuildTree()
	expectCaught(t, a, state, "the log shrank")
}

// TestVerifyLogCatchesANewLogKey: the log re-signed with another key
// does not verify against the key the state remembers, nor against the
// key given by flag.
func TestVerifyLogCatchesANewLogKey(t *testing.T) {
	a, state := logWithState(t)
	oldKey := a.tlog.Key().VerifierKey()
	a.exec("UPDATE secrets SET value = $1 WHERE name = $2", bytes.Repeat([]byte{7}, 32), logKeySecret)
	a.reopenLog()
	a.integrate()
	if a.tlog.Key().VerifierKey() == oldKey {
		t.Fatal("the log key did not change")
	}
	expectCaught(t, a, state, "does not verify with the log key")
	if _, _, err := kithCmd("verify-log", "--server", a.srv.URL, "--log-key", oldKey); !errors.Is(err, errLogInvalid) {
		t.Fatalf("verify-log --log-key OLD on a re-signed log: %v", err)
	}
	if _, _, err := kithCmd("verify-log", "--server", a.srv.URL, "--log-key", a.tlog.Key().VerifierKey(), "--state", state); err == nil {
		t.Fatal("verify-log took a --log-key other than the one its state remembers")
	}
}

// TestVerifyLogFailsUnknownMethods: a record of a method verify-log has
// no check for fails; it is not a warning.
func TestVerifyLogFailsUnknownMethods(t *testing.T) {
	a := newAPIServer(t)
	err := a.store.Update(context.Background(), func(ctx context.Context, tx identity.Tx) error {
		return tx.Append(ctx, &identity.Evidence{Method: "made.up", From: identity.EmailFactor("a@example.org")})
	})
	if err != nil {
		t.Fatal(err)
	}
	a.integrate()
	out, _, err := kithCmd("verify-log", "--server", a.srv.URL)
	if !errors.Is(err, errLogInvalid) || !strings.Contains(out, `record 1: FAIL: not verifiable offline: no check for method "made.up"`) {
		t.Fatalf("verify-log on an unknown method: %v\n%s", err, out)
	}
}
