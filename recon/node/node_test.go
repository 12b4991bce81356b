package node_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/keys/inprocess"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
	"github.com/kith-keyserver/kith/recon"
	"github.com/kith-keyserver/kith/recon/node"
)

// testKey is a fresh key as a peer serves it.
func testKey(t *testing.T, seed int64) []byte {
	t.Helper()
	b, err := keygen.PublicEd25519("Peer Key", "peer@example.org", time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC), seed)
	if err != nil {
		t.Fatal(err)
	}
	k, err := pgp.ParseKey(b)
	if err != nil {
		t.Fatal(err)
	}
	applied, _, err := pgp.DefaultPolicy().Apply(k)
	if err != nil {
		t.Fatal(err)
	}
	return applied.Bytes()
}

// TestStoreFetchedRemembersOnlyFinalRefusals: a fetched key is stored
// through the upload path; one that brings nothing new, or that is
// blocked, is refused and remembered for every node; one the upload
// policy refuses is refused but not remembered (its key may be proven
// later).
func TestStoreFetchedRemembersOnlyFinalRefusals(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	st := inprocess.New(inprocess.Options{})
	store := node.StoreFetched(st, keys.NewService(st, keys.Options{}), log)
	remembered := func(b []byte) bool {
		k, err := pgp.ParseKey(b)
		if err != nil {
			t.Fatal(err)
		}
		r, err := st.RefusedDigests(ctx, [][16]byte{k.Digest()})
		if err != nil {
			t.Fatal(err)
		}
		return r[k.Digest()]
	}

	fresh := testKey(t, 1)
	if err := store(ctx, fresh); err != nil {
		t.Fatalf("a new key: %v", err)
	}
	if err := store(ctx, fresh); !errors.Is(err, recon.ErrUnchanged) || !remembered(fresh) {
		t.Errorf("the same key again: %v, remembered %v", err, remembered(fresh))
	}

	blocked := testKey(t, 2)
	k, _ := pgp.ParseKey(blocked)
	if _, err := st.AddBlock(ctx, identity.Block{Fingerprint: k.Fingerprint()}); err != nil {
		t.Fatal(err)
	}
	if err := store(ctx, blocked); !errors.Is(err, recon.ErrRejected) || !remembered(blocked) {
		t.Errorf("a blocked key: %v, remembered %v", err, remembered(blocked))
	}

	mirror := node.StoreFetched(st, keys.NewService(st, keys.Options{Uploads: keys.UploadsOff}), log)
	other := testKey(t, 3)
	if err := mirror(ctx, other); !errors.Is(err, recon.ErrRejected) || remembered(other) {
		t.Errorf("a key the upload policy refuses: %v, remembered %v", err, remembered(other))
	}

	if err := store(ctx, []byte("not a key")); !errors.Is(err, recon.ErrRejected) {
		t.Errorf("unreadable bytes: %v", err)
	}
}

// TestStoreFetchedKeyChangedByPolicyIsNoRefusal: a key the key policy
// changes (here it drops a user ID without a self-signature) is stored,
// remembered so that it is not fetched again, and logged once, at info
// level, as what it is: not as a refused key.
func TestStoreFetchedKeyChangedByPolicyIsNoRefusal(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st := inprocess.New(inprocess.Options{})
	store := node.StoreFetched(st, keys.NewService(st, keys.Options{Policy: pgp.DefaultPolicy()}), log)

	uid := []byte("Stray <stray@example.org>")
	peerForm := append(append(testKey(t, 6), 0xc0|13, byte(len(uid))), uid...) // an unbound user ID
	k, err := pgp.ParseKey(peerForm)
	if err != nil {
		t.Fatal(err)
	}
	err = store(ctx, peerForm)
	if !errors.Is(err, recon.ErrChangedByPolicy) || errors.Is(err, recon.ErrRejected) || errors.Is(err, recon.ErrUnchanged) {
		t.Fatalf("a key the policy changes: %v, want ErrChangedByPolicy alone", err)
	}
	stored, _, err := st.FindKeys(ctx, keys.Query{Fingerprint: k.Fingerprint()})
	if err != nil || len(stored) != 1 || stored[0].Digest == k.Digest() {
		t.Fatalf("stored %d keys (%v), want the key in the policy's form", len(stored), err)
	}
	if r, err := st.RefusedDigests(ctx, [][16]byte{k.Digest()}); err != nil || !r[k.Digest()] {
		t.Fatalf("the peer's digest is not remembered (%v): it would be fetched every round", err)
	}
	// The same key again (another peer, a restarted fetch): merged without
	// change, and not logged at info level twice.
	if err := store(ctx, peerForm); !errors.Is(err, recon.ErrChangedByPolicy) || !errors.Is(err, recon.ErrUnchanged) {
		t.Fatalf("the same key again: %v, want ErrChangedByPolicy and ErrUnchanged", err)
	}
	out := logs.String()
	if strings.Contains(out, "refused") {
		t.Errorf("a key stored changed by the policy is logged as refused:\n%s", out)
	}
	var info, debug int
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "changed by the key policy") {
			continue
		}
		switch {
		case strings.Contains(line, "level=INFO") && strings.Contains(line, "unbound"):
			info++
		case strings.Contains(line, "level=DEBUG"):
			debug++
		}
	}
	if info != 1 || debug != 1 {
		t.Errorf("%d info and %d debug lines, want one of each (the first naming what was dropped):\n%s", info, debug, out)
	}
}

// TestFollowStoreKeepsTheTreeCurrent: the tree holds the store's digests
// when FollowStore returns, and follows the changes made after.
func TestFollowStoreKeepsTheTreeCurrent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := inprocess.New(inprocess.Options{})
	before, _ := pgp.ParseKey(testKey(t, 4))
	if _, err := st.AddKey(ctx, before); err != nil {
		t.Fatal(err)
	}
	tree, err := node.FollowStore(ctx, st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if !tree.Has(before.Digest()) || tree.Len() != 1 {
		t.Fatalf("the tree holds %d digests", tree.Len())
	}
	after, _ := pgp.ParseKey(testKey(t, 5))
	if _, err := st.AddKey(ctx, after); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddBlock(ctx, identity.Block{Fingerprint: before.Fingerprint()}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !tree.Has(after.Digest()) || tree.Has(before.Digest()) {
		if time.Now().After(deadline) {
			t.Fatalf("the tree did not follow: has the new key %v, the removed one %v", tree.Has(after.Digest()), tree.Has(before.Digest()))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
