package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/keys/bulk"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// keyTableIndexes lists the indexes and constraints of the key tables as
// the catalog defines them, sorted.
const keyTableIndexes = `
	SELECT 'index ' || indexdef FROM pg_indexes
	WHERE schemaname = current_schema() AND tablename IN ('keys', 'subkeys', 'user_ids', 'key_words')
	UNION ALL
	SELECT format('constraint %s %s %s', conrelid::regclass, conname, pg_get_constraintdef(oid)) FROM pg_constraint
	WHERE conrelid IN ('keys'::regclass, 'subkeys'::regclass, 'user_ids'::regclass, 'key_words'::regclass)
	ORDER BY 1`

func indexSet(t *testing.T, db *pgx.Conn) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), keyTableIndexes)
	if err != nil {
		t.Fatal(err)
	}
	set, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// deferLockHeld reports whether a session holds the lock of a load that
// defers the indexes ("kidx").
func deferLockHeld(t *testing.T, db *pgx.Conn) bool {
	t.Helper()
	var held bool
	if err := db.QueryRow(context.Background(), `SELECT EXISTS (SELECT FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objid = x'6b696478'::int AND objsubid = 1)`).Scan(&held); err != nil {
		t.Fatal(err)
	}
	return held
}

func deferredCount(t *testing.T, db *pgx.Conn) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), "SELECT count(*) FROM deferred_indexes").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// deferTestFile writes generated and typical keys (with subkeys and
// several user IDs) to one file, more than a batch that goes through COPY.
func deferTestFile(t *testing.T) string {
	t.Helper()
	typical, err := keygen.TypicalKeys(300, 11)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "keys.pgp")
	if err := os.WriteFile(f, bytes.Join(append(generatedKeys(t, 200), typical...), nil), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// openWithConn opens a store on a new database and a connection of the
// test's own to it.
func openWithConn(t *testing.T, with ...string) (string, *postgres.Store, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	url := pgtest.NewDatabase(t, with...)
	s, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(ctx) })
	return url, s, db
}

// keySearches are searches by 64- and 32-bit key IDs of primary keys and
// subkeys, by email and by words, made from what db stores.
func keySearches(t *testing.T, db *pgx.Conn) []keys.Query {
	t.Helper()
	ctx := context.Background()
	var qs []keys.Query
	rows, err := db.Query(ctx, `(SELECT long_id, short_id FROM keys ORDER BY id LIMIT 15)
		UNION ALL (SELECT long_id, short_id FROM subkeys ORDER BY key_ref DESC LIMIT 15)`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var long int64
		var short int32
		if err := rows.Scan(&long, &short); err != nil {
			t.Fatal(err)
		}
		qs = append(qs, keys.Query{KeyID: uint64(long)}, keys.Query{ShortKeyID: uint32(short), HasShortKeyID: true})
	}
	rows, err = db.Query(ctx, `SELECT email, (tsvector_to_array(words))[1:3] FROM user_ids
		WHERE email <> '' ORDER BY key_ref DESC, position LIMIT 20`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var email string
		var words []string
		if err := rows.Scan(&email, &words); err != nil {
			t.Fatal(err)
		}
		qs = append(qs, keys.Query{Email: email}, keys.Query{Words: words})
	}
	if len(qs) < 60 {
		t.Fatalf("only %d searches from the stored keys", len(qs))
	}
	return append(qs, keys.Query{Words: []string{"generated", "user", "17"}}, keys.Query{Words: []string{"example", "net"}, Limit: 5})
}

// answers runs the searches on s and returns each one's fingerprints,
// sorted.
func answers(t *testing.T, s *postgres.Store, qs []keys.Query) []string {
	t.Helper()
	out := make([]string, len(qs))
	for i, q := range qs {
		found, more, err := s.FindKeys(context.Background(), q)
		if err != nil {
			t.Fatalf("search %+v: %v", q, err)
		}
		fps := make([]string, len(found))
		for j, k := range found {
			fps[j] = fmt.Sprintf("%X", k.Fingerprint)
		}
		slices.Sort(fps)
		out[i] = fmt.Sprintf("%v more=%v", fps, more)
		if len(found) == 0 {
			t.Fatalf("search %+v found nothing", q)
		}
	}
	return out
}

// TestDeferredIndexLoadEndsAsANormalLoad: the same keys loaded into an
// empty store with its indexes deferred, and into another without,
// leave the same indexes and constraints, no recorded index, analysed
// tables and a vacuumed key_words; and every search answers the same on
// both, while the indexes are deferred as well as after.
func TestDeferredIndexLoadEndsAsANormalLoad(t *testing.T) {
	ctx := context.Background()
	file := deferTestFile(t)
	_, normal, ndb := openWithConn(t)
	if _, err := bulk.Load(ctx, keys.NewService(normal, keys.Options{}), 2, []string{file}, nil); err != nil {
		t.Fatal(err)
	}
	want := indexSet(t, ndb)
	qs := keySearches(t, ndb)
	wantAnswers := answers(t, normal, qs)

	url, s, db := openWithConn(t)
	if got := indexSet(t, db); !slices.Equal(got, want) {
		t.Fatalf("a new store's indexes:\n%s\nafter a load:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	d, err := s.DeferIndexes(ctx)
	if err != nil || d == nil {
		t.Fatalf("DeferIndexes on an empty store: %v, %v", d, err)
	}
	if n := deferredCount(t, db); n != 10 {
		t.Errorf("%d indexes recorded as deferred, want 10 (9 secondary indexes and key_words' primary key)", n)
	}
	during := indexSet(t, db)
	// Each deferred index, and key_words' primary key constraint.
	if len(during) != len(want)-11 {
		t.Errorf("while deferred, %d indexes and constraints, want %d:\n%s", len(during), len(want)-11, strings.Join(during, "\n"))
	}
	for _, u := range []string{"keys_fingerprint_key", "keys_digest_key", "keys_pkey", "subkeys_pkey", "user_ids_pkey"} {
		if !slices.ContainsFunc(during, func(s string) bool { return strings.Contains(s, u) }) {
			t.Errorf("%s was deferred: the load's writes need it", u)
		}
	}
	if _, err := bulk.Load(ctx, keys.NewService(s, keys.Options{}), 2, []string{file}, nil); err != nil {
		t.Fatal(err)
	}
	// A server on the same store meanwhile answers the same, slower.
	other, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if n := deferredCount(t, db); n != 10 {
		t.Fatalf("opening the store during the load built its deferred indexes: %d left recorded", n)
	}
	if got := answers(t, other, qs); !slices.Equal(got, wantAnswers) {
		t.Errorf("searches while the indexes are deferred:\n%v\nwant\n%v", got, wantAnswers)
	}

	if err := d.Build(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Build(ctx); err != nil {
		t.Fatalf("Build again: %v", err)
	}
	if got := indexSet(t, db); !slices.Equal(got, want) {
		t.Errorf("after a deferred-index load:\n%s\nwant, as after a normal load:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := deferredCount(t, db); n != 0 {
		t.Errorf("%d indexes still recorded as deferred", n)
	}
	checkKeyWords(t, db, "a deferred-index load", 1000)
	// That the vacuum marks key_words' pages all visible depends on what
	// else runs (an autovacuum's analysis begun during the load holds the
	// horizon back): that it ran is what is certain.
	var analysed, vacuumed int
	if err := db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE analyze_count > 0),
		max(vacuum_count) FILTER (WHERE relname = 'key_words')
		FROM pg_stat_user_tables WHERE relid IN ('user_ids'::regclass, 'key_words'::regclass)`).
		Scan(&analysed, &vacuumed); err != nil {
		t.Fatal(err)
	}
	if analysed != 2 || vacuumed == 0 {
		t.Errorf("%d of user_ids and key_words analysed, key_words vacuumed %d times; want 2 and once", analysed, vacuumed)
	}
	if got := answers(t, s, qs); !slices.Equal(got, wantAnswers) {
		t.Errorf("searches after a deferred-index load:\n%v\nwant\n%v", got, wantAnswers)
	}
}

// TestDeferIndexesOnlyIntoAnEmptyStore: a store holding a key keeps its
// indexes, and so does an empty store whose indexes another load defers
// already.
func TestDeferIndexesOnlyIntoAnEmptyStore(t *testing.T) {
	ctx := context.Background()
	url, s, db := openWithConn(t)
	before := indexSet(t, db)

	first, err := s.DeferIndexes(ctx)
	if err != nil || first == nil {
		t.Fatalf("DeferIndexes on an empty store: %v, %v", first, err)
	}
	if !deferLockHeld(t, db) {
		t.Fatal("no session holds the lock of a load that defers the indexes")
	}
	other, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if second, err := other.DeferIndexes(ctx); err != nil || second != nil {
		t.Fatalf("a second load's DeferIndexes while the first defers: %v, %v; want nil, nil", second, err)
	}
	if err := first.Build(ctx); err != nil {
		t.Fatal(err)
	}

	if _, err := s.AddKey(ctx, typicalKey(t, keygen.New(5), 1)); err != nil {
		t.Fatal(err)
	}
	if d, err := other.DeferIndexes(ctx); err != nil || d != nil {
		t.Fatalf("DeferIndexes on a store holding a key: %v, %v; want nil, nil", d, err)
	}
	if got := indexSet(t, db); !slices.Equal(got, before) {
		t.Errorf("indexes after the loads:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(before, "\n"))
	}
	if n := deferredCount(t, db); n != 0 {
		t.Errorf("%d indexes recorded as deferred, want none", n)
	}
}

// TestOpenBuildsTheIndexesOfAKilledLoad: a load killed while its indexes
// are deferred (its connections gone, as with SIGKILL) leaves them
// recorded; the next open of the store builds them, and not before the
// load is gone.
func TestOpenBuildsTheIndexesOfAKilledLoad(t *testing.T) {
	ctx := context.Background()
	url, s, db := openWithConn(t)
	want := indexSet(t, db)
	d, err := s.DeferIndexes(ctx)
	if err != nil || d == nil {
		t.Fatalf("DeferIndexes: %v, %v", d, err)
	}
	g := keygen.New(9)
	var batch []*pgp.Key
	for i := range 100 {
		batch = append(batch, typicalKey(t, g, i))
	}
	if _, err := s.AddKeys(ctx, batch); err != nil {
		t.Fatal(err)
	}

	// The load's connections die with its process.
	if _, err := db.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	// Its lock goes with its connection.
	if !testkit.PollEvery(time.Minute, 10*time.Millisecond, func() bool { return !deferLockHeld(t, db) }) {
		t.Fatal("the killed load's lock is still held after a minute")
	}
	if n := deferredCount(t, db); n != 10 {
		t.Fatalf("%d indexes recorded after the load died, want 10", n)
	}

	healed, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer healed.Close()
	if got := indexSet(t, db); !slices.Equal(got, want) {
		t.Errorf("after the next open:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := deferredCount(t, db); n != 0 {
		t.Errorf("%d indexes still recorded", n)
	}
	checkKeyWords(t, db, "the healed store", 100)
	found, _, err := healed.FindKeys(ctx, keys.Query{KeyID: batch[7].Describe().KeyID})
	if err != nil || len(found) != 1 {
		t.Errorf("search by key ID in the healed store: %d keys, %v", len(found), err)
	}
}

// TestMergeDuringADeferredLoadBuildsTheIndexesFirst: a batch of the load
// that merges with a stored key (whose words it deletes, and whose
// certifications' issuers it may look up, through the deferred indexes)
// builds them first, and stores the merge as a normal load does.
func TestMergeDuringADeferredLoadBuildsTheIndexesFirst(t *testing.T) {
	ctx := context.Background()
	_, s, db := openWithConn(t)
	want := indexSet(t, db)
	d, err := s.DeferIndexes(ctx)
	if err != nil || d == nil {
		t.Fatalf("DeferIndexes: %v, %v", d, err)
	}
	full := entityKey(t, newEntity(t, "Alice Liddell <alice@example.org>", "Alice Wonderland <alice@rabbit.example>"))
	g := keygen.New(4)
	batch := []*pgp.Key{withOnlyUserIDs(t, full, 1)}
	for i := range 100 {
		batch = append(batch, typicalKey(t, g, i))
	}
	if _, err := s.AddKeys(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if n := deferredCount(t, db); n != 10 {
		t.Fatalf("%d indexes recorded after a batch of new keys, want 10", n)
	}
	ws, err := s.AddKeys(ctx, []*pgp.Key{full, batch[5]})
	if err != nil {
		t.Fatal(err)
	}
	if ws[0].Change != keys.Updated || ws[1].Change != keys.Unchanged {
		t.Errorf("the merge's outcomes: %v, %v; want updated, unchanged", ws[0].Change, ws[1].Change)
	}
	if n := deferredCount(t, db); n != 0 {
		t.Errorf("%d indexes still recorded after the merge", n)
	}
	if got := indexSet(t, db); !slices.Equal(got, want) {
		t.Errorf("after the merge:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	checkKeyWords(t, db, "the merge", 100)
	if err := d.Build(ctx); err != nil {
		t.Fatalf("Build after the merge built them: %v", err)
	}
	found, _, err := s.FindKeys(ctx, keys.Query{Words: []string{"liddell"}})
	if err != nil || len(found) != 1 {
		t.Errorf("search by a word the merge added: %d keys, %v", len(found), err)
	}
}
