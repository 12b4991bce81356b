package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/pgp"
)

func findByFingerprint(t *testing.T, s interface {
	FindKeys(context.Context, keys.Query) ([]keys.Stored, bool, error)
}, fp []byte) []keys.Stored {
	t.Helper()
	keys, _, err := s.FindKeys(context.Background(), keys.Query{Fingerprint: fp, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func TestBlockedKeyIsRemovedAndRefusedEverAfter(t *testing.T) {
	s := pgtest.NewStore(t)
	ctx := context.Background()
	k := entityKey(t, newEntity(t, "Mallory <mallory@example.org>"))
	fp := k.Fingerprint()
	if _, err := s.AddKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	var removed []keys.DigestChange
	ready := make(chan struct{})
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	notes := make(chan keys.DigestChange, 4)
	go s.WatchKeyChanges(lctx, ready, func(c keys.DigestChange) { notes <- c })
	<-ready

	out, err := s.AddBlock(ctx, identity.Block{Fingerprint: fp, Reason: "abuse report 42", Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if out != "the key was removed from the store" {
		t.Fatalf("AddBlock: %q", out)
	}
	if got := findByFingerprint(t, s, fp); len(got) != 0 {
		t.Fatalf("blocked key still found: %d keys", len(got))
	}
	select {
	case c := <-notes:
		removed = append(removed, c)
	case <-time.After(30 * time.Second):
		t.Fatal("no key-change notification for the removal")
	}
	if removed[0].Old != k.Digest() || removed[0].New != ([16]byte{}) {
		t.Fatalf("removal notified as %x -> %x, want %x -> zero", removed[0].Old, removed[0].New, k.Digest())
	}
	// Uploading it again stores nothing.
	if c, err := s.AddKey(ctx, k); err != nil || c.Change != keys.Blocked {
		t.Fatalf("upload of a blocked key: %v, %v; want blocked", c, err)
	}
	if got := findByFingerprint(t, s, fp); len(got) != 0 {
		t.Fatal("a blocked key came back by upload")
	}
	if _, err := s.AddBlock(ctx, identity.Block{Fingerprint: fp, Reason: "again", Actor: "bob"}); !errors.Is(err, identity.ErrAlreadyBlocked) {
		t.Fatalf("second block: %v, want ErrAlreadyBlocked", err)
	}
	bl, err := s.Blocks(ctx)
	if err != nil || len(bl) != 1 || bl[0].Actor != "alice" || bl[0].Reason != "abuse report 42" || bl[0].Created.IsZero() {
		t.Fatalf("Blocks: %+v, %v", bl, err)
	}
	if err := s.RemoveBlock(ctx, fp, nil, "carol", "appeal granted"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveBlock(ctx, fp, nil, "carol", "twice"); !errors.Is(err, identity.ErrNotBlocked) {
		t.Fatalf("second unblock: %v, want ErrNotBlocked", err)
	}
	if c, err := s.AddKey(ctx, k); err != nil || c.Change != keys.Inserted {
		t.Fatalf("upload after unblock: %v, %v; want inserted", c, err)
	}
	acts, err := s.OperatorActions(ctx, fp)
	if err != nil || len(acts) != 2 || acts[0].Action != "block" || acts[1].Action != "unblock" ||
		acts[1].Actor != "carol" || acts[1].Reason != "appeal granted" {
		t.Fatalf("operator actions: %+v, %v", acts, err)
	}
}

func TestTombstoneAcceptsOnlyRevocations(t *testing.T) {
	s := pgtest.NewStore(t)
	ctx := context.Background()
	e := newEntity(t, "Owner <owner@example.org>", "Other <other@example.org>")
	full := entityKey(t, e)
	fp := full.Fingerprint()
	if _, err := s.AddKey(ctx, full); err != nil {
		t.Fatal(err)
	}
	out, err := s.AddBlock(ctx, identity.Block{Fingerprint: fp, KeepRevocations: true, Origin: identity.BlockByOwner,
		Reason: "deleted by its owner", Actor: "the key itself"})
	if err != nil || out != "the key was reduced to its primary key and revocations" {
		t.Fatalf("AddBlock: %q, %v", out, err)
	}
	got := findByFingerprint(t, s, fp)
	if len(got) != 1 || len(got[0].UserIDs) != 0 {
		t.Fatalf("tombstone: %d keys, user IDs %+v", len(got), got)
	}
	tomb := got[0].Digest
	if keys, _, _ := s.FindKeys(ctx, keys.Query{Email: "owner@example.org", Limit: 10}); len(keys) != 0 {
		t.Fatal("the tombstone is still found by its old email")
	}
	// The full key again: reduced, nothing stored.
	if c, err := s.AddKey(ctx, full); err != nil || c.Change != keys.Reduced {
		t.Fatalf("full key onto a tombstone: %v, %v; want reduced", c, err)
	}
	if got := findByFingerprint(t, s, fp); got[0].Digest != tomb || len(got[0].UserIDs) != 0 {
		t.Fatal("the full key merged into the tombstone")
	}
	// A revocation merges.
	if err := e.RevokeKey(packet.KeyCompromised, "lost", &packet.Config{Time: func() time.Time { return time.Unix(1700000100, 0) }}); err != nil {
		t.Fatal(err)
	}
	revoked := entityKey(t, e)
	if c, err := s.AddKey(ctx, revoked); err != nil || c.Change != keys.Reduced {
		t.Fatalf("revoked key onto a tombstone: %v, %v; want reduced", c, err)
	}
	got = findByFingerprint(t, s, fp)
	if !got[0].Revoked || len(got[0].UserIDs) != 0 || got[0].Digest == tomb {
		t.Fatalf("after the revocation: revoked %v, user IDs %d", got[0].Revoked, len(got[0].UserIDs))
	}
	k, err := pgp.ParseKey(got[0].Packets)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(k.Packets()); n != 2 {
		t.Fatalf("tombstone with revocation has %d packets, want 2", n)
	}
	// The tombstone itself, uploaded again, is unchanged (not reduced).
	if c, err := s.AddKey(ctx, k); err != nil || c.Change != keys.Unchanged {
		t.Fatalf("the tombstone again: %v, %v; want unchanged", c, err)
	}
}

func TestBlockedUserIDIsCleanedAndNeverMergesBack(t *testing.T) {
	s := pgtest.NewStore(t)
	ctx := context.Background()
	k := entityKey(t, newEntity(t, "Keep <keep@example.org>", "Poison <poison@example.org>"))
	fp := k.Fingerprint()
	if _, err := s.AddKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	h := pgp.PacketHash([]byte("Poison <poison@example.org>"))
	out, err := s.AddBlock(ctx, identity.Block{Fingerprint: fp, PacketHash: h[:], Reason: "personal data", Actor: "op"})
	if err != nil || out != "the key is stored without the blocked packet" {
		t.Fatalf("AddBlock: %q, %v", out, err)
	}
	got := findByFingerprint(t, s, fp)
	if len(got) != 1 || len(got[0].UserIDs) != 1 || got[0].UserIDs[0].Email != "keep@example.org" {
		t.Fatalf("cleaned key: %+v", got)
	}
	if c, err := s.AddKey(ctx, k); err != nil || c.Change != keys.Reduced {
		t.Fatalf("the poisoned key again: %v, %v; want reduced", c, err)
	}
	if keys, _, _ := s.FindKeys(ctx, keys.Query{Email: "poison@example.org", Limit: 10}); len(keys) != 0 {
		t.Fatal("the blocked user ID came back")
	}
}

func TestRefusedDigestsAreRememberedUntilUnblocked(t *testing.T) {
	s := pgtest.NewStore(t)
	ctx := context.Background()
	fp := []byte("01234567890123456789")
	d, other := [16]byte{1, 2, 3}, [16]byte{4, 5, 6}
	if _, err := s.AddBlock(ctx, identity.Block{Fingerprint: fp, Reason: "spam", Actor: "op"}); err != nil {
		t.Fatal(err)
	}
	if err := s.RefuseDigest(ctx, d, fp, "blocked"); err != nil {
		t.Fatal(err)
	}
	if err := s.RefuseDigest(ctx, d, fp, "blocked"); err != nil {
		t.Fatal("refusing twice:", err)
	}
	got, err := s.RefusedDigests(ctx, [][16]byte{d, other})
	if err != nil || !got[d] || got[other] {
		t.Fatalf("RefusedDigests: %v, %v", got, err)
	}
	if err := s.RemoveBlock(ctx, fp, nil, "op", "mistake"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.RefusedDigests(ctx, [][16]byte{d}); err != nil || got[d] {
		t.Fatalf("after unblock: %v, %v; want the digest forgotten", got, err)
	}
}

// TestKeysLeaveNoUserIDsOrSubkeysBehind: user_ids and subkeys rows carry
// no foreign key (migration 0013), so the writers remove them with their
// key: after a block removes a key, no row names a key that is not
// stored, and the other key's rows are exactly its own.
func TestKeysLeaveNoUserIDsOrSubkeysBehind(t *testing.T) {
	_, s, db := openWithConn(t)
	ctx := context.Background()
	count := func(q string) int {
		t.Helper()
		var n int
		if err := db.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	mallory := entityKey(t, newEntity(t, "Mallory <mallory@example.org>", "M <m@example.org>"))
	alice := entityKey(t, newEntity(t, "Alice <alice@example.org>", "Alice <alice@example.net>"))
	for _, k := range []*pgp.Key{mallory, alice} {
		if _, err := s.AddKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if n, m := count("SELECT count(*) FROM user_ids"), count("SELECT count(*) FROM subkeys"); n != 4 || m != 2 {
		t.Fatalf("stored %d user IDs and %d subkeys, want 4 and 2", n, m)
	}
	if _, err := s.AddBlock(ctx, identity.Block{Fingerprint: mallory.Fingerprint(), Reason: "abuse", Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"user_ids", "subkeys"} {
		if n := count("SELECT count(*) FROM " + table + " c WHERE NOT EXISTS (SELECT 1 FROM keys k WHERE k.id = c.key_ref)"); n != 0 {
			t.Errorf("%d %s rows name a key that is not stored", n, table)
		}
	}
	if n, m := count("SELECT count(*) FROM user_ids"), count("SELECT count(*) FROM subkeys"); n != 2 || m != 1 {
		t.Fatalf("after the block: %d user IDs and %d subkeys, want Alice's 2 and 1", n, m)
	}
}
