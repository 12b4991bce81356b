package postgres_test

import (
	"context"
	"encoding/hex"
	"slices"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/pgp"
)

// TestChangedPrefixesFollowEveryWrite: a key is in the span of its last
// change, whoever made it (an upload that merged something, an operator's
// block that cleaned it); a write that changes nothing leaves it where it
// was; a key deleted whole is in no span.
func TestChangedPrefixesFollowEveryWrite(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	merged := newEntity(t, "Merged <merged@example.org>")
	same := entityKey(t, newEntity(t, "Same <same@example.org>"))
	cleaned := entityKey(t, newEntity(t, "Keep <keep@example.org>", "Poison <poison@example.org>"))
	deleted := entityKey(t, newEntity(t, "Deleted <deleted@example.org>"))
	all := []*pgp.Key{entityKey(t, merged), same, cleaned, deleted}
	if _, err := s.AddKeys(ctx, all); err != nil {
		t.Fatal(err)
	}
	if n, err := s.CountKeys(ctx); err != nil || n != 4 {
		t.Fatalf("CountKeys: %d, %v; want 4", n, err)
	}
	// The store as it was on a day long ago.
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "UPDATE keys SET modified_at = $1", day.Add(12*time.Hour)); err != nil {
		t.Fatal(err)
	}
	prefixes := func(from, to time.Time, digits int) []string {
		t.Helper()
		got, err := s.ChangedPrefixes(ctx, from, to, digits)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	hexOf := func(ks ...*pgp.Key) []string {
		var out []string
		for _, k := range ks {
			out = append(out, hex.EncodeToString(k.Fingerprint()))
		}
		slices.Sort(out)
		return out
	}
	if got, want := prefixes(day, day.AddDate(0, 0, 1), 40), hexOf(all...); !slices.Equal(got, want) {
		t.Fatalf("that day: %q, want %q", got, want)
	}
	if got := prefixes(day.AddDate(0, 0, 1), day.AddDate(0, 0, 2), 40); len(got) != 0 {
		t.Fatalf("the next day: %q, want none", got)
	}

	// Now: one key merges a new user ID, one comes again unchanged, one
	// loses a user ID to a block, one is blocked whole.
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA, Time: func() time.Time { return time.Unix(1700000100, 0) }}
	if err := merged.AddUserId("Merged", "", "second@example.org", cfg); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Hour)
	if _, err := s.AddKeys(ctx, []*pgp.Key{entityKey(t, merged), same}); err != nil {
		t.Fatal(err)
	}
	h := pgp.PacketHash([]byte("Poison <poison@example.org>"))
	if out, err := s.AddBlock(ctx, identity.Block{Fingerprint: cleaned.Fingerprint(), PacketHash: h[:], Reason: "personal data", Actor: "op"}); err != nil || out != identity.BlockKeyCleaned {
		t.Fatalf("block a user ID: %q, %v", out, err)
	}
	if out, err := s.AddBlock(ctx, identity.Block{Fingerprint: deleted.Fingerprint(), Reason: "owner", Actor: "op"}); err != nil || out != identity.BlockKeyRemoved {
		t.Fatalf("block a key: %q, %v", out, err)
	}
	after := time.Now().Add(time.Hour)
	if got, want := prefixes(day, day.AddDate(0, 0, 1), 40), hexOf(same); !slices.Equal(got, want) {
		t.Errorf("that day, after the writes: %q, want only the unchanged key %q", got, want)
	}
	if got, want := prefixes(before, after, 40), hexOf(entityKey(t, merged), cleaned); !slices.Equal(got, want) {
		t.Errorf("now: %q, want the merged and the cleaned key %q", got, want)
	}
	// Short prefixes: each once, sorted, lower case.
	var want []string
	for _, p := range hexOf(entityKey(t, merged), cleaned) {
		want = append(want, p[:1])
	}
	want = slices.Compact(want)
	if got := prefixes(before, after, 1); !slices.Equal(got, want) {
		t.Errorf("one digit: %q, want %q", got, want)
	}
	if _, err := s.ChangedPrefixes(ctx, before, after, 0); err == nil {
		t.Error("ChangedPrefixes with 0 digits: no error")
	}
}
