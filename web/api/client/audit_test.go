package client_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/web/api"
	"github.com/kith-keyserver/kith/web/api/client"
)

// audit checks every record of the server's log and returns the audit
// and its findings, rendered "seq kind reason".
func audit(t *testing.T, c *client.Client) (*client.LogAudit, []string) {
	t.Helper()
	var a client.LogAudit
	var found []string
	if err := c.Log(context.Background(), func(r api.LogRecord) {
		for _, f := range a.Check(r) {
			found = append(found, fmt.Sprintf("%d %s %s", f.Seq, []string{"failed", "erased", "unchecked"}[f.Kind], f.Reason))
		}
	}); err != nil {
		t.Fatal(err)
	}
	return &a, found
}

// TestLogAuditPassesAnHonestLogAndBuildsItsTree: every record verifies,
// and the tree the audit builds is the one the checkpoint signs.
func TestLogAuditPassesAnHonestLogAndBuildsItsTree(t *testing.T) {
	t.Parallel()
	srv, c, _ := logOf5(t)
	a, found := audit(t, c)
	if a.Failed() != 0 || len(found) != 0 || a.Revealed() != 0 {
		t.Fatalf("honest log: %d failed, findings %q", a.Failed(), found)
	}
	if n := a.Verifier().Count(); n != srv.records() {
		t.Errorf("verified %d records, the log has %d", n, srv.records())
	}
	ctx := context.Background()
	m, err := c.Monitor(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := m.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CheckTree(a.Tree(), cp); err != nil {
		t.Errorf("the audit's tree against the checkpoint: %v", err)
	}
}

// TestLogAuditFailsABrokenChain: a log with a record left out fails the
// record after the gap, and counts it as failed.
func TestLogAuditFailsABrokenChain(t *testing.T) {
	t.Parallel()
	_, c, _ := logOf5(t)
	var recs []api.LogRecord
	if err := c.Log(context.Background(), func(r api.LogRecord) { recs = append(recs, r) }); err != nil {
		t.Fatal(err)
	}
	var a client.LogAudit
	var found []client.LogFinding
	for i, r := range recs {
		if i != 1 {
			found = append(found, a.Check(r)...)
		}
	}
	if a.Failed() != 1 || len(found) == 0 || found[0].Seq != recs[2].Seq || found[0].Kind != client.Failed || !strings.HasPrefix(found[0].Reason, "chain: ") {
		t.Fatalf("record %d left out: %d failed, findings %+v", recs[1].Seq, a.Failed(), found)
	}
}

// TestLogAuditFailsAnUndecodableRecord: a record that is not evidence is
// a failure naming it, and adds nothing to the tree.
func TestLogAuditFailsAnUndecodableRecord(t *testing.T) {
	t.Parallel()
	var a client.LogAudit
	found := a.Check(api.LogRecord{Seq: 7, Commitments: []api.JSONCommitment{{Kind: "email", Hash: "not hex"}}})
	if len(found) != 1 || found[0].Seq != 7 || found[0].Kind != client.Failed || !strings.HasPrefix(found[0].Reason, "undecodable: ") {
		t.Fatalf("findings %+v", found)
	}
	if a.Failed() != 1 || a.Tree().Size() != 0 {
		t.Errorf("failed %d, tree size %d", a.Failed(), a.Tree().Size())
	}
}

func TestReadArtifacts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, err := client.ReadArtifacts(write("ok.json", `[{"seq":3,"artifacts":[{}]},{"seq":3,"artifacts":[{}]},{"seq":5,"artifacts":[]}]`))
	if err != nil || len(got[3]) != 2 || len(got[5]) != 0 {
		t.Errorf("got %v, %v", got, err)
	}
	if _, err := client.ReadArtifacts(write("bad.json", `{`)); err == nil || !strings.HasPrefix(err.Error(), "artifacts "+dir) {
		t.Errorf("malformed file: %v", err)
	}
	if _, err := client.ReadArtifacts(filepath.Join(dir, "none.json")); err == nil || !strings.HasPrefix(err.Error(), "artifacts: ") {
		t.Errorf("missing file: %v", err)
	}
}
