package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/web/api"
	"github.com/kith-keyserver/kith/web/api/client"
)

// monitor checks the server's log as kith verify-log does: every record
// fetched into a tree, the tree against the checkpoint and the state
// file's checkpoint; it saves the state when all holds.
func monitor(t *testing.T, c *client.Client, state, key string) (*client.LogMonitor, error) {
	t.Helper()
	ctx := context.Background()
	m, err := c.Monitor(ctx, state, key)
	if err != nil {
		return nil, err
	}
	cp, err := m.Checkpoint(ctx)
	if err != nil {
		return m, err
	}
	var tree tlog.MemTree
	if err := c.Log(ctx, func(r api.LogRecord) {
		e, err := r.Evidence()
		if err != nil {
			t.Fatalf("record %d: %v", r.Seq, err)
		}
		tree.Append(e.ComputeHash())
	}); err != nil {
		return m, err
	}
	if err := m.CheckTree(&tree, cp); err != nil {
		return m, err
	}
	return m, m.Save()
}

// logOf5 is a server with a log of five records in a checkpoint, and a
// state file that has seen it.
func logOf5(t *testing.T) (*server, *client.Client, string) {
	t.Helper()
	ctx := context.Background()
	srv := newServer(t)
	c := srv.client()
	u := newUser(t)
	dir := t.TempDir()
	a, b, x := u.sshKey(dir, "a"), u.sshKey(dir, "b"), u.sshKey(dir, "x")
	for _, step := range []func() error{
		func() error { _, err := c.Claim(ctx, "alice", a); return err },
		func() error { _, err := c.Add(ctx, "alice", b, a); return err },
		func() error { _, err := c.Claim(ctx, "bob", x); return err },
		func() error {
			doc, err := c.Lookup(ctx, "alice")
			if err != nil {
				return err
			}
			f, err := u.tools.Find(ctx, doc, b.ID)
			if err != nil {
				return err
			}
			_, err = c.Revoke(ctx, "alice", f, a)
			return err
		},
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.integrate(); n < 4 {
		t.Fatalf("log of %d records", n)
	}
	state := filepath.Join(t.TempDir(), "state")
	m, err := monitor(t, c, state, "")
	if err != nil {
		t.Fatal(err)
	}
	if !m.TrustedOnFirstUse || m.Key() != srv.log.Key().VerifierKey() {
		t.Fatalf("first use: trusted %v key %s", m.TrustedOnFirstUse, m.Key())
	}
	if m, err = monitor(t, c, state, ""); err != nil || m.TrustedOnFirstUse {
		t.Fatalf("second run: %v, trusted on first use again: %v", err, m.TrustedOnFirstUse)
	}
	return srv, c, state
}

// TestLogMonitorCatchesARewrittenLog: a record edited with the chain
// recomputed is not the log the checkpoint signs; the log re-signed over
// it is not consistent with the checkpoint seen before.
func TestLogMonitorCatchesARewrittenLog(t *testing.T) {
	t.Parallel()
	srv, c, state := logOf5(t)
	srv.rewriteRecord(2, "rewritten")
	if _, err := monitor(t, c, state, ""); err == nil || !strings.Contains(err.Error(), "are not the log the checkpoint signs") {
		t.Fatalf("a rewritten record: %v", err)
	}
	srv.rebuildTree()
	if _, err := monitor(t, c, state, ""); err == nil || !strings.Contains(err.Error(), "rewritten or forked") {
		t.Fatalf("a re-signed rewritten log: %v", err)
	}
}

// TestLogMonitorCatchesAShrunkLogAndANewKey: a checkpoint smaller than
// the one seen, a key other than the remembered one, and a checkpoint
// the key does not verify are ErrLogInvalid.
func TestLogMonitorCatchesAShrunkLogAndANewKey(t *testing.T) {
	t.Parallel()
	srv, c, state := logOf5(t)
	other, err := tlog.NewKey(srv.log.Key().Name(), make([]byte, tlog.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := monitor(t, c, state, other.VerifierKey()); !errors.Is(err, client.ErrLogInvalid) || !strings.Contains(err.Error(), "is not the key") {
		t.Errorf("another key than the remembered one: %v", err)
	}
	if _, err := monitor(t, c, "", other.VerifierKey()); !errors.Is(err, client.ErrLogInvalid) || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("a checkpoint by another key: %v", err)
	}
	srv.exec("DELETE FROM tlog_hashes")
	srv.exec("UPDATE tlog_head SET size = 0, checkpoint = NULL")
	srv.exec("DELETE FROM evidence WHERE seq = (SELECT max(seq) FROM evidence)")
	srv.exec("UPDATE evidence_head SET seq = e.seq, hash = e.hash FROM (SELECT seq, hash FROM evidence ORDER BY seq DESC LIMIT 1) e")
	srv.integrate()
	if _, err := monitor(t, c, state, ""); !errors.Is(err, client.ErrLogInvalid) || !strings.Contains(err.Error(), "shrank") {
		t.Errorf("a dropped last record: %v", err)
	}
}

// TestReadLogReadsConcatenatedPages: what GET /api/v1/log answered, page
// after page, reads back as the records in order.
func TestReadLogReadsConcatenatedPages(t *testing.T) {
	t.Parallel()
	var in bytes.Buffer
	for _, page := range []api.LogPage{{Records: []api.LogRecord{{Seq: 1}, {Seq: 2}}, Next: "x"}, {Records: []api.LogRecord{{Seq: 3}}}} {
		json.NewEncoder(&in).Encode(page)
	}
	var seqs []int64
	if err := client.ReadLog(&in, func(r api.LogRecord) { seqs = append(seqs, r.Seq) }); err != nil || len(seqs) != 3 || seqs[2] != 3 {
		t.Fatalf("read %v, %v", seqs, err)
	}
	if err := client.ReadLog(strings.NewReader(`{"records":[`), func(api.LogRecord) {}); err == nil {
		t.Error("a cut page read without error")
	}
}
