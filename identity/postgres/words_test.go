package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// keyWordsDrift counts the rows by which key_words differs from the words
// the stored user IDs hold (rows missing plus rows left over).
const keyWordsDrift = `WITH want AS (SELECT DISTINCT w.word, u.key_ref FROM user_ids u, unnest(tsvector_to_array(u.words)) AS w(word))
	SELECT (SELECT count(*) FROM (SELECT word, key_ref FROM want EXCEPT SELECT word, key_ref FROM key_words) m),
		(SELECT count(*) FROM (SELECT word, key_ref FROM key_words EXCEPT SELECT word, key_ref FROM want) l),
		(SELECT count(*) FROM key_words)`

// checkKeyWords fails t unless key_words holds exactly the words of the
// stored user IDs, and at least min rows.
func checkKeyWords(t *testing.T, db *pgx.Conn, when string, min int) {
	t.Helper()
	var missing, left, n int
	if err := db.QueryRow(context.Background(), keyWordsDrift).Scan(&missing, &left, &n); err != nil {
		t.Fatal(err)
	}
	if missing != 0 || left != 0 || n < min {
		t.Fatalf("%s: key_words misses %d rows and has %d too many (%d in all, want at least %d)", when, missing, left, n, min)
	}
}

// TestEveryWriterKeepsKeyWords: the words of stored user IDs are written
// and removed with them by every writer: a single upload, a small batch,
// a large batch (COPY), a merge that adds a user ID, a block that takes
// one out, a block that removes a key; and the migration builds them for
// keys stored before it.
func TestEveryWriterKeepsKeyWords(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)

	full := entityKey(t, newEntity(t, "Alice Liddell <alice@example.org>", "Alice Wonderland <alice@rabbit.example>"))
	if _, err := s.AddKey(ctx, withOnlyUserIDs(t, full, 0)); err != nil {
		t.Fatal(err)
	}
	checkKeyWords(t, db, "one upload", 4)
	if _, err := s.AddKey(ctx, full); err != nil {
		t.Fatal(err)
	}
	checkKeyWords(t, db, "a merge adding a user ID", 6)

	g := keygen.New(3)
	var small, large []*pgp.Key
	for i := range 10 {
		small = append(small, typicalKey(t, g, i))
	}
	for i := range 100 { // over smallBatch: COPY
		large = append(large, typicalKey(t, g, 10+i))
	}
	for name, batch := range map[string][]*pgp.Key{"a small batch": small, "a large batch": large} {
		if _, err := s.AddKeys(ctx, batch); err != nil {
			t.Fatal(err)
		}
		checkKeyWords(t, db, name, 6+len(batch))
	}

	h := pgp.PacketHash([]byte("Alice Wonderland <alice@rabbit.example>"))
	if _, err := s.AddBlock(ctx, identity.Block{Fingerprint: full.Fingerprint(), PacketHash: h[:], Reason: "personal data", Actor: "op"}); err != nil {
		t.Fatal(err)
	}
	checkKeyWords(t, db, "a block of a user ID", 100)
	var n int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM key_words WHERE word IN ('wonderland', 'rabbit')").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the blocked user ID's own words: %d rows, %v; want none", n, err)
	}
	if _, err := s.AddBlock(ctx, identity.Block{Fingerprint: full.Fingerprint(), Reason: "abuse", Actor: "op"}); err != nil {
		t.Fatal(err)
	}
	checkKeyWords(t, db, "a block of the key", 100)
	if err := db.QueryRow(ctx, "SELECT count(*) FROM key_words WHERE word = 'liddell'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the removed key's words: %d rows, %v; want none", n, err)
	}

	// The migration, run again over the stored keys, builds the same rows.
	if _, err := db.Exec(ctx, "DELETE FROM key_words WHERE key_ref IN (SELECT key_ref FROM key_words LIMIT 50)"); err != nil {
		t.Fatal(err)
	}
	var version int
	if err := db.QueryRow(ctx, "SELECT version FROM schema_migrations WHERE name LIKE '%_key_words.sql'").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "DELETE FROM schema_migrations WHERE version >= $1", version); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	checkKeyWords(t, db, fmt.Sprintf("migration %d", version), 100)
}
