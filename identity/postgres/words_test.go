package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/keys/bulk"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// keyWordsDrift counts the rows by which key_words differs from the words
// the stored user IDs hold (rows missing plus rows left over).
const keyWordsDrift = `WITH want AS (SELECT DISTINCT w.word, u.key_ref FROM user_ids u, unnest(tsvector_to_array(u.words)) AS w(word))
	SELECT (SELECT count(*) FROM (SELECT word, key_ref FROM want EXCEPT SELECT word, key_ref FROM key_words) m),
		(SELECT count(*) FROM (SELECT word, key_ref FROM key_words EXCEPT SELECT word, key_ref FROM want) l),
		(SELECT count(*) FROM key_words)`

// uidWordsDrift counts the user_ids rows whose words are not what
// migration 0001's expression makes of their text, which PostgreSQL
// generated before writers wrote them (migration 0022).
const uidWordsDrift = `SELECT count(*) FROM user_ids
	WHERE words IS DISTINCT FROM to_tsvector('simple', regexp_replace(lower(uid), '[^[:alnum:]]+', ' ', 'g'))`

// checkKeyWords fails t unless every stored user ID's words are the ones
// the expression makes of its text, key_words holds exactly those words,
// and it has at least min rows.
func checkKeyWords(t *testing.T, db *pgx.Conn, when string, min int) {
	t.Helper()
	var drift, missing, left, n int
	if err := db.QueryRow(context.Background(), uidWordsDrift).Scan(&drift); err != nil {
		t.Fatal(err)
	}
	if drift != 0 {
		t.Fatalf("%s: %d user IDs hold other words than their text's", when, drift)
	}
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
	_, s, db := openWithConn(t)
	ctx := context.Background()

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
	// A bulk batch copies words keys.Lexemes makes in Go: user IDs whose
	// case and classes of characters other locales than C treat otherwise,
	// and words repeated within a user ID and across a key's user IDs.
	large = append(large,
		entityKey(t, newEntity(t, "José Müller-Lüdenscheidt <jose.mueller@example.org>", "\u212aelvin KELVIN İstanbul Iİı <k@example.org>")),
		entityKey(t, newEntity(t, "日本語 テスト <nihon@example.jp>", "abc123def 1e5 3.14 foo-bar_baz <abc@example.jp>")),
		entityKey(t, newEntity(t, "Ünïcödé\u00a0nbsp\ttab Alice ALICE alice <alice@alice.example>", "Alice <alice@example.org>")))
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

// oldByWords is the search by words before key_words (migration 0019),
// kept as the reference the search must agree with: the GIN index asked
// for every word at once, then the keys in id order, at most $2.
const oldByWords = `SELECT k.fingerprint FROM keys k WHERE k.id IN (SELECT DISTINCT key_ref FROM user_ids
			WHERE words @@ plainto_tsquery('simple', regexp_replace(lower($1), '[^[:alnum:]]+', ' ', 'g')))
	ORDER BY k.id LIMIT $2`

// generatedKeys makes n keys with user IDs "Generated User N
// <userN@example.net>", every fifth with a second, "Generated User N (alt
// 1) <userN.alt@example.net>": four words every key has and one or two
// rare ones, as in issue 38's measurement.
func generatedKeys(t *testing.T, n int) [][]byte {
	t.Helper()
	base := time.Date(2016, 1, 1, 0, 0, 0, 0, time.UTC)
	out := make([][]byte, n)
	for i := range n {
		created := base.Add(time.Duration(i) * time.Minute)
		e, err := keygen.NewEd25519(fmt.Sprintf("Generated User %d", i), fmt.Sprintf("user%d@example.net", i), created, int64(i)+1)
		if err != nil {
			t.Fatal(err)
		}
		if i%5 == 0 {
			at := func() time.Time { return created.Add(time.Second) }
			if err := e.AddUserId(fmt.Sprintf("Generated User %d", i), "alt 1", fmt.Sprintf("user%d.alt@example.net", i), &packet.Config{Time: at}); err != nil {
				t.Fatal(err)
			}
		}
		var b bytes.Buffer
		if err := keygen.Serialize(&b, e); err != nil {
			t.Fatal(err)
		}
		out[i] = b.Bytes()
	}
	return out
}

// TestSearchByWordsAnswersAsTheWholeQueryDid: on the Debian keyrings and
// on generated keys, every search by words finds the keys, in the order
// and with the truncation, that the GIN query over every word found
// before key_words: searches mixing common and rare words, single words,
// words that match nothing, stop-word-like and one-letter words, mixed
// case, non-ASCII letters (which PostgreSQL's C locale does not count as
// letters) and numbers; both searches that start from a rare word and
// searches whose words are all common (the GIN path).
func TestSearchByWordsAnswersAsTheWholeQueryDid(t *testing.T) {
	rings, _ := filepath.Glob("/usr/share/keyrings/debian-*.gpg")
	if !slices.Contains(rings, testkit.DebianKeyring) {
		testkit.Missing(t, "%s missing", testkit.DebianKeyring)
	}
	_, s, db := openWithConn(t)
	ctx := context.Background()

	gen := filepath.Join(t.TempDir(), "generated.pgp")
	if err := os.WriteFile(gen, bytes.Join(generatedKeys(t, 300), nil), 0o644); err != nil {
		t.Fatal(err)
	}
	typical, err := keygen.TypicalKeys(200, 5)
	if err != nil {
		t.Fatal(err)
	}
	typ := filepath.Join(t.TempDir(), "typical.pgp")
	if err := os.WriteFile(typ, bytes.Join(typical, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := bulk.Load(ctx, keys.NewService(s, keys.Options{}), 2, append(rings, gen, typ), nil)
	if err != nil {
		t.Fatal(err)
	}
	checkKeyWords(t, db, "the load", 1000)
	t.Logf("stored %d keys", sum.Changes[keys.Inserted])

	// The searches: hand-picked ones, then some made from stored user
	// IDs, with their words mixed with the commonest words and with words
	// of other user IDs, in random case.
	searches := []string{
		"debian", "org", "debian org", "DEBIAN.ORG", "gmail com", "debian gmail", "the", "and", "of", "a", "de", "van der",
		"zzqqxxnothing", "debian zzqqxxnothing", "Müller", "müller", "MÜLLER", "josé", "JOSÉ", "ñ", "日本", "Ωmega", "straße",
		"İstanbul", "ǅemal", "ﬁnn", "é", "1", "0", "2048", "42 debian", "generated", "generated user", "Generated User 17",
		"generated user 17 alt", "generated 1 alt", "user17", "user17 alt", "example net", "example net user250", "alt 1",
		"generated user 299 net example", "generated user 300",
	}
	rows, err := db.Query(ctx, "SELECT uid FROM user_ids ORDER BY key_ref, position")
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			t.Fatal(err)
		}
		uids = append(uids, u)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(38, 1))
	randomCase := func(w string) string {
		var b strings.Builder
		for _, r := range w {
			if rnd.IntN(2) == 0 {
				r = []rune(strings.ToUpper(string(r)))[0]
			}
			b.WriteRune(r)
		}
		return b.String()
	}
	pick := func(ws []string, n int) []string {
		out := slices.Clone(ws)
		rnd.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		return out[:min(n, len(out))]
	}
	for range 80 {
		ws := keys.SearchWords(uids[rnd.IntN(len(uids))])
		other := keys.SearchWords(uids[rnd.IntN(len(uids))])
		if len(ws) == 0 || len(other) == 0 {
			continue
		}
		for _, q := range [][]string{
			ws,
			pick(ws, 2),
			pick(ws, 1),
			append(pick(ws, 1), "debian", "org"),
			append(pick(ws, 1), "example", "generated", "user"),
			append(pick(ws, 2), pick(other, 1)...),
		} {
			q = q[:min(len(q), keys.MaxSearchWords)]
			for i := range q {
				q[i] = randomCase(q[i])
			}
			searches = append(searches, strings.Join(q, " "))
		}
	}

	// How many keys the rarest word of a search has (capped): the search
	// starts from it below 100 keys (found by counts that stop at 8 when
	// it has fewer than 8), else it takes the GIN index.
	rarest := func(text string) int {
		var n *int
		err := db.QueryRow(ctx, `SELECT min((SELECT count(*) FROM (SELECT 1 FROM key_words x WHERE x.word = r.word LIMIT 100) c))
			FROM unnest(tsvector_to_array(to_tsvector('simple', regexp_replace(lower($1), '[^[:alnum:]]+', ' ', 'g')))) AS r(word)`, text).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n == nil {
			return -1
		}
		return *n
	}
	// Each search is run in three states of what the store knows of its
	// words' counts: nothing (every word guessed rare, so common ones are
	// found not to be and learned), PostgreSQL's statistics, and those
	// with what the searches before taught it.
	var few, rare, common, none, found, truncated int
	for _, search := range searches {
		q, err := keys.ParseSearch(search)
		if err != nil || len(q.Words) == 0 {
			t.Fatalf("%q is not a search by words: %v", search, err)
		}
		switch n := rarest(strings.Join(q.Words, " ")); {
		case n < 0:
			none++
		case n < 8:
			few++
		case n < 100:
			rare++
		default:
			common++
		}
	}
	postgres.ForgetWordCounts(s)
	compareSearches(t, s, db, searches, "knowing no word's count")
	if _, err := db.Exec(ctx, "ANALYZE key_words"); err != nil {
		t.Fatal(err)
	}
	postgres.ReadWordCounts(s)
	compareSearches(t, s, db, searches, "knowing PostgreSQL's counts")
	found, truncated = compareSearches(t, s, db, searches, "knowing the counts and the words found common")
	guess, missed, counted := postgres.WordSearchStarts(s)
	t.Logf("%d searches: %d from a word of under 8 keys, %d from one of under 100, %d of common words only, %d of no word; %d found keys, %d truncated",
		len(searches), few, rare, common, none, found, truncated)
	t.Logf("the store started %d searches from the word it guessed rarest, %d from a guess that was not rare, and counted the words of %d", guess, missed, counted)
	if few < 50 || rare < 20 || common < 20 || found < 100 || found == len(searches) || truncated < 20 {
		t.Errorf("the searches do not cover both paths, matches and misses, and truncation")
	}
	if guess < int64(few) || missed == 0 || counted < int64(common) {
		t.Errorf("the store's searches did not start every way")
	}
}

// TestSearchByWordsInALocaleOtherThanC: a database whose locale counts
// accented letters as letters (C.UTF-8) splits user IDs into other words
// than keys.Lexemes does, so the store leaves every search by words to
// PostgreSQL there, and answers as the whole query does: "josé" finds
// José and not Jos.
func TestSearchByWordsInALocaleOtherThanC(t *testing.T) {
	_, s, db := openWithConn(t, "TEMPLATE template0", "LC_CTYPE 'C.UTF-8'", "LC_COLLATE 'C.UTF-8'")
	ctx := context.Background()
	for _, uid := range []string{"José Müller <jose@example.org>", "Jos Q <jos@example.org>", "\u212aelvin <kelvin@example.org>"} {
		if _, err := s.AddKey(ctx, entityKey(t, newEntity(t, uid))); err != nil {
			t.Fatal(err)
		}
	}
	// A bulk batch here makes its words in SQL, not in Go.
	g := keygen.New(4)
	var large []*pgp.Key
	for i := range 70 {
		large = append(large, typicalKey(t, g, i))
	}
	large = append(large, entityKey(t, newEntity(t, "Ünïcödé Straße <strasse@example.org>", "\u212aelvin İstanbul <k@example.org>")))
	if _, err := s.AddKeys(ctx, large); err != nil {
		t.Fatal(err)
	}
	checkKeyWords(t, db, "a bulk batch in C.UTF-8", 70)
	searches := []string{"josé", "jos", "müller", "m ller", "jos example", "kelvin", "\u212aelvin", "example org", "straße", "istanbul"}
	found, _ := compareSearches(t, s, db, searches, "in C.UTF-8")
	guess, missed, counted := postgres.WordSearchStarts(s)
	if guess != 0 || missed != 0 || counted == 0 || found < 4 {
		t.Errorf("%d searches found keys; started %d from a guess, %d from a guess that was not rare, %d counted; want all counted", found, guess, missed, counted)
	}
}

// compareSearches runs every search on s, with a limit of 100 and of 3,
// and fails t unless each finds the keys, in the order and with the
// truncation, that oldByWords finds. It returns how many searches found
// keys and how many answers were cut.
func compareSearches(t *testing.T, s *postgres.Store, db *pgx.Conn, searches []string, when string) (found, truncated int) {
	t.Helper()
	ctx := context.Background()
	for _, search := range searches {
		q, err := keys.ParseSearch(search)
		if err != nil {
			t.Fatalf("%q is not a search by words: %v", search, err)
		}
		text := strings.Join(q.Words, " ")
		for _, limit := range []int{100, 3} {
			q.Limit = limit
			got, more, err := s.FindKeys(ctx, q)
			if err != nil {
				t.Fatalf("%q: %v", search, err)
			}
			var want [][]byte
			rows, err := db.Query(ctx, oldByWords, text, limit+1)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var fp []byte
				if err := rows.Scan(&fp); err != nil {
					t.Fatal(err)
				}
				want = append(want, fp)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			wantMore := len(want) > limit
			if wantMore {
				want = want[:limit]
			}
			var fps [][]byte
			for _, k := range got {
				fps = append(fps, k.Fingerprint)
			}
			if !slices.EqualFunc(fps, want, bytes.Equal) || more != wantMore {
				t.Errorf("%s: %q (limit %d): %d keys (more %v), want %d (more %v)", when, search, limit, len(fps), more, len(want), wantMore)
			}
			if limit == 100 && len(want) > 0 {
				found++
			}
			if more {
				truncated++
			}
		}
		// The form op=get asks in: packets, no user IDs, a bound on the
		// answer's size, which the keys found decide.
		get := keys.Query{Words: q.Words, Limit: 100, NoUserIDs: true}
		got, _, err := s.FindKeys(ctx, get)
		if err != nil {
			t.Fatalf("%s: %q as op=get asks: %v", when, search, err)
		}
		for _, k := range got {
			if len(k.Packets) != k.Size || k.Size == 0 || k.UserIDs != nil {
				t.Errorf("%s: %q as op=get asks: %d bytes of packets, size %d, %d user IDs", when, search, len(k.Packets), k.Size, len(k.UserIDs))
			}
		}
		get.MaxBytes = 1
		if _, _, err := s.FindKeys(ctx, get); errors.Is(err, keys.ErrAnswerTooLarge) != (len(got) > 0) {
			t.Errorf("%s: %q with a bound of 1 byte: %v (%d keys found)", when, search, err, len(got))
		}
	}
	return found, truncated
}

// Lexemes are the store's: for user IDs and searches with accents, other
// scripts, case that folds into ASCII (the Kelvin sign, a dotted capital
// I), addresses and words at PostgreSQL's length limit, Lexemes gives the
// very lexemes of the tsvector the store's search matches (user_ids.words,
// migration 0001).
func TestLexemesAreTheStoresLexemes(t *testing.T) {
	_, _, conn := openWithConn(t)
	ctx := context.Background()
	for _, s := range []string{
		"Generated User 29330 <user29330.0@example.net>",
		"José Müller-Lüdenscheidt <jose.mueller@example.org>",
		"josé", "Josè Q", "ÅSA Öberg", "İstanbul Iİı", "\u212aelvin KELVIN",
		"日本語 テスト <nihon@example.jp>", "abc123def 1e5 3.14 foo-bar_baz",
		"Ünïcödé\u00a0nbsp\ttab", "UPPER lower MiXeD", "", "!!!",
		strings.Repeat("a", 2046) + " b", strings.Repeat("a", 2047) + " b", "c " + strings.Repeat("D", 3000),
		"a b a c a", strings.Repeat("x y ", 300) + "z", strings.Repeat("w ", 17000) + "last v", manyWords(17000),
	} {
		var want []string
		if err := conn.QueryRow(ctx, `SELECT coalesce(array_agg(w ORDER BY w), '{}') FROM unnest(tsvector_to_array(
			to_tsvector('simple', regexp_replace(lower($1), '[^[:alnum:]]+', ' ', 'g')))) AS w`, s).Scan(&want); err != nil {
			t.Fatal(err)
		}
		// The whole tsvector a bulk load copies, positions too, is the one
		// the expression makes.
		if _, err := conn.Exec(ctx, "CREATE TEMP TABLE IF NOT EXISTS copied (uid text, words tsvector); TRUNCATE copied"); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"copied"}, []string{"uid", "words"}, pgx.CopyFromRows([][]any{{s, postgres.TsvectorOf(s)}})); err != nil {
			t.Fatalf("%.40q: copy its tsvector: %v", s, err)
		}
		var same bool
		if err := conn.QueryRow(ctx, `SELECT words = to_tsvector('simple', regexp_replace(lower(uid), '[^[:alnum:]]+', ' ', 'g')) FROM copied`).Scan(&same); err != nil {
			t.Fatal(err)
		}
		if !same {
			t.Errorf("%.40q: the copied tsvector differs from the store's", s)
		}
		got := map[string]bool{}
		for _, l := range keys.Lexemes(s) {
			got[l] = true
		}
		var sorted []string
		for l := range got {
			sorted = append(sorted, l)
		}
		slices.Sort(sorted)
		if !slices.Equal(sorted, want) {
			t.Errorf("%q: lexemes %q, the store's %q", s, sorted, want)
		}
	}
}

// manyWords is n distinct words, past the positions a tsvector keeps.
func manyWords(n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = fmt.Sprintf("w%d", i%(n-5)) // the last five repeat
	}
	return strings.Join(ws, " ")
}
