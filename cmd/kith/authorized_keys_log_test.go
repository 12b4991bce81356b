package main

import (
	"context"
	"encoding/base64"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity/tlog"
)

// keyBlobOf is the base64 of an SSH key's wire form.
func keyBlobOf(blob []byte) string { return base64.StdEncoding.EncodeToString(blob) }

// keyBlob is the base64 blob of an authorized_keys line.
func keyBlob(pub string) string { return strings.Fields(pub)[1] }

// TestAuthorizedKeysWithLogKeyPrintsOnlyKeysInTheLog: with --log-key a
// key is printed only when the records proving it are in a signed
// checkpoint consistent with the last one seen; a key proven after the
// checkpoint waits for the next; an edited proof, a rewritten log and a
// log signed by another key print nothing of what they touch.
func TestAuthorizedKeysWithLogKeyPrintsOnlyKeysInTheLog(t *testing.T) {
	requireTool(t, "ssh-keygen")
	a := newAPIServer(t)
	dir := t.TempDir()
	k1, k2, k3 := newSSHKeyPair(t, dir, "one"), newSSHKeyPair(t, dir, "two"), newSSHKeyPair(t, dir, "three")
	a.claim("alice", k1)
	a.add("alice", k2, k1, false)
	a.integrate()
	key := a.tlog.Key().VerifierKey()
	cache := filepath.Join(dir, "cache")
	ak := func(logKey string) (string, string, error) {
		return runAK(t, nil, "--server", a.srv.URL, "--cache-dir", cache, "--log-key", logKey, "alice")
	}

	out, stderr, err := ak(key)
	if err != nil || !strings.Contains(out, keyBlob(k1.pub)) || !strings.Contains(out, keyBlob(k2.pub)) {
		t.Fatalf("keys in the log: %v\n%s%s", err, out, stderr)
	}

	// Proven, but not yet in a checkpoint: not printed until it is.
	a.add("alice", k3, k1, false)
	out, stderr, err = ak(key)
	if err != nil || strings.Contains(out, keyBlob(k3.pub)) || !strings.Contains(out, keyBlob(k1.pub)) {
		t.Fatalf("a key proven after the checkpoint: %v\n%s%s", err, out, stderr)
	}
	if !strings.Contains(stderr, "not in the checkpoint") {
		t.Errorf("no reason given for the missing key:\n%s", stderr)
	}
	a.integrate()
	if out, _, err = ak(key); err != nil || !strings.Contains(out, keyBlob(k3.pub)) {
		t.Fatalf("the key after the next checkpoint: %v\n%s", err, out)
	}

	// Another key's checkpoint: nothing.
	otherKey, err := tlog.NewKey(a.tlog.Key().Name(), make([]byte, tlog.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	other := otherKey.VerifierKey()
	if out, _, err := ak(other); !errors.Is(err, errNoKeys) || out != "" {
		t.Fatalf("a checkpoint by another key: %v %q", err, out)
	}

	// k2's proof edited in the database, the chain recomputed: its
	// record is not the log's entry, so k2 is not printed; k1 still is.
	recs, err := a.store.Log(context.Background(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var seq int64
	for _, e := range recs {
		if e.From.Data != nil && strings.Contains(k2.pub, keyBlobOf(e.From.Data)) {
			seq = e.Seq
		}
	}
	if seq == 0 {
		t.Fatal("no record signed by k2")
	}
	for i := seq - 1; i < int64(len(recs)); i++ {
		if i == seq-1 {
			recs[i].Label = "edited"
		}
		recs[i].Seal(recs[i-1].Seq, recs[i-1].Hash)
		a.exec("UPDATE evidence SET label = $1, prev_hash = $2, hash = $3 WHERE seq = $4", recs[i].Label, recs[i].PrevHash, recs[i].Hash, recs[i].Seq)
	}
	last := recs[len(recs)-1]
	a.exec("UPDATE evidence_head SET seq = $1, hash = $2", last.Seq, last.Hash)
	out, stderr, err = ak(key)
	if err != nil || strings.Contains(out, keyBlob(k2.pub)) || !strings.Contains(out, keyBlob(k1.pub)) {
		t.Fatalf("an edited proof: %v\n%s%s", err, out, stderr)
	}

	// The operator rebuilds the tree over the edited log: the checkpoint
	// is not consistent with the one this host saw; nothing is printed.
	a.rebuildTree()
	out, stderr, err = ak(key)
	if !errors.Is(err, errNoKeys) || out != "" || !strings.Contains(stderr, "not consistent") {
		t.Fatalf("a rewritten log: %v %q\n%s", err, out, stderr)
	}
}
