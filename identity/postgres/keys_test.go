package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// applied parses binary key packets and runs the default policy.
func applied(t testing.TB, b []byte) *pgp.Key {
	t.Helper()
	k, err := pgp.ParseKey(b)
	if err != nil {
		t.Fatal(err)
	}
	k, _, err = pgp.DefaultPolicy().Apply(k)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func typicalKey(t testing.TB, g *keygen.Generator, i int) *pgp.Key {
	t.Helper()
	b, err := g.Key(i)
	if err != nil {
		t.Fatal(err)
	}
	return applied(t, b)
}

// newEntity makes a fresh Ed25519 key with the given "Name <email>" user
// IDs.
func newEntity(t testing.TB, uids ...string) *openpgp.Entity {
	t.Helper()
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA, Time: func() time.Time { return time.Unix(1700000000, 0) }}
	split := func(uid string) (string, string) {
		name, email, _ := strings.Cut(uid, " <")
		return name, strings.TrimSuffix(email, ">")
	}
	name, email := split(uids[0])
	e, err := openpgp.NewEntity(name, "", email, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range uids[1:] {
		name, email := split(u)
		if err := e.AddUserId(name, "", email, cfg); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func entityKey(t testing.TB, e *openpgp.Entity) *pgp.Key {
	t.Helper()
	var buf bytes.Buffer
	if err := e.Serialize(&buf); err != nil {
		t.Fatal(err)
	}
	return applied(t, buf.Bytes())
}

// withOnlyUserIDs keeps the primary key, its direct signatures, the user
// IDs numbered in keep (0-based) and every subkey.
func withOnlyUserIDs(t testing.TB, k *pgp.Key, keep ...int) *pgp.Key {
	t.Helper()
	want := map[int]bool{}
	for _, i := range keep {
		want[i] = true
	}
	var out []pgp.Packet
	uid := -1
	inUID := false
	for _, p := range k.Packets() {
		switch p.Tag {
		case pgp.TagUserID, pgp.TagUserAttribute:
			uid++
			inUID = true
		case pgp.TagPublicSubkey:
			inUID = false
		}
		if inUID && !want[uid] {
			continue
		}
		out = append(out, p)
	}
	nk, _, err := pgp.DefaultPolicy().Apply(pgp.NewKey(out))
	if err != nil {
		t.Fatal(err)
	}
	return nk
}

func TestAddKeyInsertsOnceAndFindsItEveryWay(t *testing.T) {
	s := pgtest.NewStore(t)
	ctx := context.Background()
	k := typicalKey(t, keygen.New(1), 0)
	d := k.Describe()

	for i, want := range []keys.Change{keys.Inserted, keys.Unchanged} {
		got, err := s.AddKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if got.Change != want {
			t.Fatalf("upload %d: %v, want %v", i+1, got.Change, want)
		}
		// No identity names the key: the store says so with the write,
		// and the keys Service refreshes no links for it.
		if got.Change == keys.Inserted && !got.Unlinked {
			t.Errorf("upload %d: a key no identity names is not marked unlinked", i+1)
		}
	}

	queries := map[string]keys.Query{
		"fingerprint":  {Fingerprint: d.Fingerprint},
		"64-bit ID":    {KeyID: d.KeyID},
		"32-bit ID":    {ShortKeyID: d.KeyID32(), HasShortKeyID: true},
		"email":        {Email: d.UserIDs[0].Email},
		"upper email":  {Email: upper(d.UserIDs[0].Email)},
		"words":        {Words: firstWords(d.UserIDs[0].Text)},
		"subkey FP":    {Fingerprint: d.Subkeys[0].Fingerprint},
		"subkey ID":    {KeyID: d.Subkeys[0].KeyID},
		"subkey 32bit": {ShortKeyID: d.Subkeys[0].KeyID32(), HasShortKeyID: true},
		"primary IDs":  {PrimaryKeyIDs: []uint64{d.KeyID ^ 1, d.KeyID}},
	}
	for name, q := range queries {
		t.Run(name, func(t *testing.T) {
			q.Limit = 10
			keys, more, err := s.FindKeys(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if more || len(keys) != 1 {
				t.Fatalf("got %d keys (more=%v), want 1", len(keys), more)
			}
			got := keys[0]
			if !bytes.Equal(got.Fingerprint, d.Fingerprint) || !bytes.Equal(got.Packets, k.Bytes()) || got.Digest != k.Digest() {
				t.Fatal("stored key differs from the uploaded one")
			}
			if len(got.UserIDs) != len(d.UserIDs) || got.UserIDs[0].Text != d.UserIDs[0].Text {
				t.Fatalf("user IDs %+v, want %d like %q", got.UserIDs, len(d.UserIDs), d.UserIDs[0].Text)
			}
		})
	}

	byDigest, err := s.KeysByDigest(ctx, [][16]byte{k.Digest(), {1, 2, 3}})
	if err != nil || len(byDigest) != 1 {
		t.Fatalf("KeysByDigest: %d keys, %v", len(byDigest), err)
	}
	// One digest takes a statement of its own.
	for _, c := range []struct {
		digest [16]byte
		want   int
	}{{k.Digest(), 1}, {[16]byte{1, 2, 3}, 0}} {
		got, err := s.KeysByDigest(ctx, [][16]byte{c.digest})
		if err != nil || len(got) != c.want || c.want == 1 && !bytes.Equal(got[0].Fingerprint, k.Fingerprint()) {
			t.Fatalf("KeysByDigest of %x: %d keys, %v", c.digest, len(got), err)
		}
	}
	if sub, _, err := s.FindKeys(ctx, keys.Query{PrimaryKeyIDs: []uint64{d.Subkeys[0].KeyID}}); err != nil || len(sub) != 0 {
		t.Fatalf("a subkey's ID as a primary key ID: %d keys, %v", len(sub), err)
	}
	none, more, err := s.FindKeys(ctx, keys.Query{Email: "nobody@example.invalid"})
	if err != nil || len(none) != 0 || more {
		t.Fatalf("unknown email: %d keys, %v", len(none), err)
	}
}

func upper(s string) string { return string(bytes.ToUpper([]byte(s))) }

func firstWords(uid string) []string {
	f := bytes.Fields([]byte(uid))
	if len(f) > 2 {
		f = f[:2]
	}
	var out []string
	for _, w := range f {
		out = append(out, string(bytes.Trim(w, "<>()")))
	}
	return out
}

func TestAddKeyMergesNewUserID(t *testing.T) {
	s := pgtest.NewStore(t)
	ctx := context.Background()
	full := entityKey(t, newEntity(t, "Alice <alice@example.org>", "Alice Work <alice@work.example>"))
	first := withOnlyUserIDs(t, full, 0)
	if got, err := s.AddKey(ctx, first); err != nil || got.Change != keys.Inserted {
		t.Fatalf("first upload: %v %v", got, err)
	}
	if got, err := s.AddKey(ctx, withOnlyUserIDs(t, full, 1)); err != nil || got.Change != keys.Updated {
		t.Fatalf("second upload: %v %v", got, err)
	}
	keys, _, err := s.FindKeys(ctx, keys.Query{Email: "alice@work.example"})
	if err != nil || len(keys) != 1 {
		t.Fatalf("find merged key: %d %v", len(keys), err)
	}
	if len(keys[0].UserIDs) != 2 || keys[0].Digest != full.Digest() {
		t.Fatalf("merged key has %d user IDs and digest %x, want 2 and %x", len(keys[0].UserIDs), keys[0].Digest, full.Digest())
	}
	if !keys[0].Modified.After(keys[0].FirstSeen) && !keys[0].Modified.Equal(keys[0].FirstSeen) {
		t.Error("modification time before first sight")
	}
}

// TestConcurrentUploadsKeepEveryUserID: N clients each add a different new
// user ID to one key at once; the result holds all N.
func TestConcurrentUploadsKeepEveryUserID(t *testing.T) {
	const n = 12
	s := pgtest.NewStore(t)
	ctx := context.Background()
	uids := []string{"Base <base@example.org>"}
	for i := range n {
		uids = append(uids, fmt.Sprintf("Client %d <client%d@example.org>", i, i))
	}
	full := entityKey(t, newEntity(t, uids...))
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		part := withOnlyUserIDs(t, full, 0, i+1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.AddKey(ctx, part)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	keys, _, err := s.FindKeys(ctx, keys.Query{Fingerprint: full.Fingerprint()})
	if err != nil || len(keys) != 1 {
		t.Fatalf("find: %d %v", len(keys), err)
	}
	if got := len(keys[0].UserIDs); got != n+1 {
		t.Fatalf("stored key has %d user IDs, want %d", got, n+1)
	}
	if keys[0].Digest != full.Digest() {
		t.Fatal("stored key is not the union of the uploads")
	}
}

func TestAddKeysBatchIsAllOrNothingAndIdempotent(t *testing.T) {
	s := pgtest.NewStore(t)
	ctx := context.Background()
	g := keygen.New(7)
	var batch []*pgp.Key
	for i := range 50 {
		batch = append(batch, typicalKey(t, g, i))
	}
	batch = append(batch, batch[3]) // a duplicate within the batch
	changes, err := s.AddKeys(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range changes[:50] {
		if c.Change != keys.Inserted || c.Key == nil {
			t.Fatalf("key %d: %v", i, c)
		}
	}
	if changes[50].Change != keys.Unchanged || changes[50].Key != nil {
		t.Fatalf("duplicate: %v", changes[50])
	}
	again, err := s.AddKeys(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range again {
		if c.Change != keys.Unchanged || c.Key != nil {
			t.Fatalf("second load, key %d: %v", i, c)
		}
	}
	st, err := s.KeyStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Keys != 50 || len(st.Daily) != 7 || st.Daily[0].New != 50 {
		t.Fatalf("stats %+v", st)
	}
	n := 0
	if err := s.Digests(ctx, func([16]byte) error { n++; return nil }); err != nil || n != 50 {
		t.Fatalf("digests: %d %v", n, err)
	}

	// A canceled batch writes nothing.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.AddKeys(cctx, []*pgp.Key{typicalKey(t, g, 99)}); err == nil {
		t.Fatal("canceled batch succeeded")
	}
	if st, _ := s.KeyStats(ctx); st.Keys != 50 {
		t.Fatalf("canceled batch left %d keys", st.Keys)
	}
}

func TestFindKeysCapsBroadQueries(t *testing.T) {
	s := pgtest.NewStore(t)
	ctx := context.Background()
	var batch []*pgp.Key
	for i := range 30 {
		batch = append(batch, entityKey(t, newEntity(t, fmt.Sprintf("Common Name %d <c%d@example.org>", i, i))))
	}
	if _, err := s.AddKeys(ctx, batch); err != nil {
		t.Fatal(err)
	}
	ks, more, err := s.FindKeys(ctx, keys.Query{Words: []string{"common", "name"}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != 10 || !more {
		t.Fatalf("got %d keys, more=%v; want 10 and more", len(ks), more)
	}
	ks, more, err = s.FindKeys(ctx, keys.Query{Words: []string{"common", "7"}, Limit: 10})
	if err != nil || len(ks) != 1 || more {
		t.Fatalf("two words ANDed: %d keys, more=%v, %v", len(ks), more, err)
	}
}

func TestKeyChangesReachAnotherNode(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	got := make(chan keys.DigestChange, 10)
	ready := make(chan struct{})
	lctx, lcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.WatchKeyChanges(lctx, ready, func(c keys.DigestChange) { got <- c }) }()
	<-ready

	full := entityKey(t, newEntity(t, "Bob <bob@example.org>", "Bob Two <bob2@example.org>"))
	first := withOnlyUserIDs(t, full, 0)
	a.AddKey(ctx, first)
	a.AddKey(ctx, first) // unchanged: no notification
	a.AddKey(ctx, full)
	want := []keys.DigestChange{{New: first.Digest()}, {Old: first.Digest(), New: full.Digest()}}
	for i, w := range want {
		select {
		case c := <-got:
			if c.Old != w.Old || c.New != w.New || !bytes.Equal(c.Fingerprint, full.Fingerprint()) {
				t.Fatalf("change %d: %x -> %x, want %x -> %x", i, c.Old, c.New, w.Old, w.New)
			}
		case <-ctx.Done():
			t.Fatalf("change %d never arrived", i)
		}
	}
	select {
	case c := <-got:
		t.Fatalf("unexpected change %+v", c)
	case <-time.After(300 * time.Millisecond):
	}
	lcancel()
	<-done
}

// The sizes the store keeps beside the packets decide what is read: a
// query over MaxBytes reads no packets and fails; InlineBytes leaves them
// out when they are larger together (or always, when negative), for the
// caller to stream; StreamPackets hands them out in the order asked.
func TestFindKeysReadsPacketsOnlyWhenWanted(t *testing.T) {
	s := pgtest.NewStore(t)
	ctx := context.Background()
	var batch []*pgp.Key
	for i := range 3 {
		batch = append(batch, entityKey(t, newEntity(t, fmt.Sprintf("Sized Key %d <s%d@example.org>", i, i))))
	}
	if _, err := s.AddKeys(ctx, batch); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, k := range batch {
		total += len(k.Bytes())
	}
	q := keys.Query{Words: []string{"sized"}, Limit: 10}
	ks, _, err := s.FindKeys(ctx, q)
	if err != nil || len(ks) != 3 {
		t.Fatalf("find: %d keys, %v", len(ks), err)
	}
	for _, k := range ks {
		if k.Packets == nil || k.Size != len(k.Packets) || k.KeyID == 0 {
			t.Errorf("key %X: %d packet bytes, size %d, key ID %X", k.Fingerprint, len(k.Packets), k.Size, k.KeyID)
		}
	}

	q.MaxBytes = total - 1
	if _, _, err := s.FindKeys(ctx, q); !errors.Is(err, keys.ErrAnswerTooLarge) {
		t.Errorf("over MaxBytes: %v, want ErrAnswerTooLarge", err)
	}
	q.MaxBytes = total
	for _, c := range []struct {
		inline int
		read   bool
	}{{-1, false}, {total - 1, false}, {total, true}, {0, true}} {
		q.InlineBytes = c.inline
		ks, _, err := s.FindKeys(ctx, q)
		if err != nil || len(ks) != 3 {
			t.Fatalf("inline %d: %d keys, %v", c.inline, len(ks), err)
		}
		for _, k := range ks {
			if (k.Packets != nil) != c.read || k.Size == 0 {
				t.Errorf("inline %d: key %X has %d packet bytes (size %d), want read=%v", c.inline, k.Fingerprint, len(k.Packets), k.Size, c.read)
			}
		}
	}

	// Streamed in the order asked, unknown fingerprints skipped.
	want := [][]byte{batch[2].Fingerprint(), batch[0].Fingerprint()}
	ask := [][]byte{want[0], bytes.Repeat([]byte{0xee}, 20), want[1]}
	var got [][]byte
	err = s.StreamPackets(ctx, ask, func(fp, packets []byte) error {
		got = append(got, bytes.Clone(fp))
		k, err := pgp.ParseKey(packets)
		if err != nil || !bytes.Equal(k.Fingerprint(), fp) {
			t.Errorf("streamed packets of %X do not parse as that key: %v", fp, err)
		}
		return nil
	})
	if err != nil || len(got) != 2 || !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
		t.Errorf("stream: %X, %v; want %X", got, err, want)
	}
}

// TestConcurrentAddKeysShareTransactionsAndEachLearnsItsOutcome: many
// uploads at once (new keys, and the same key twice with different user
// IDs) are grouped into shared transactions, yet each caller is told what
// its own upload changed, and every key is stored in full.
func TestConcurrentAddKeysShareTransactionsAndEachLearnsItsOutcome(t *testing.T) {
	const n = 48
	s := pgtest.NewStore(t)
	ctx := context.Background()
	g := keygen.New(91)
	ks := make([]*pgp.Key, n)
	for i := range ks {
		ks[i] = typicalKey(t, g, i)
	}
	full := entityKey(t, newEntity(t, "Twice <twice@example.org>", "Twice Again <again@example.org>"))
	halves := []*pgp.Key{withOnlyUserIDs(t, full, 0), withOnlyUserIDs(t, full, 1)}
	var wg sync.WaitGroup
	changes := make([]keys.Change, n)
	halfChanges := make([]keys.Change, 2)
	errs := make(chan error, n+2)
	for i, k := range ks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := s.AddKey(ctx, k)
			changes[i] = c.Change
			errs <- err
		}()
	}
	for i, k := range halves {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := s.AddKey(ctx, k)
			halfChanges[i] = c.Change
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range changes {
		if c != keys.Inserted {
			t.Errorf("key %d: %v, want inserted", i, c)
		}
		found, _, err := s.FindKeys(ctx, keys.Query{Fingerprint: ks[i].Fingerprint()})
		if err != nil || len(found) != 1 || found[0].Digest != ks[i].Digest() {
			t.Fatalf("key %d not stored whole: %d %v", i, len(found), err)
		}
	}
	if got := []keys.Change{halfChanges[0], halfChanges[1]}; !(got[0] == keys.Inserted && got[1] == keys.Updated) &&
		!(got[0] == keys.Updated && got[1] == keys.Inserted) {
		t.Errorf("the two halves of one key: %v, want one inserted and one updated", got)
	}
	found, _, err := s.FindKeys(ctx, keys.Query{Fingerprint: full.Fingerprint()})
	if err != nil || len(found) != 1 || found[0].Digest != full.Digest() {
		t.Fatalf("the key uploaded in halves is not their union: %d %v", len(found), err)
	}
}

// TestAddKeyWithCanceledContextStoresNothing: a caller that has given up
// before its upload was queued gets an error and its key is not stored.
func TestAddKeyWithCanceledContextStoresNothing(t *testing.T) {
	s := pgtest.NewStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k := typicalKey(t, keygen.New(92), 0)
	if _, err := s.AddKey(ctx, k); !errors.Is(err, context.Canceled) {
		t.Fatalf("AddKey with a canceled context: %v", err)
	}
	found, _, err := s.FindKeys(context.Background(), keys.Query{Fingerprint: k.Fingerprint()})
	if err != nil || len(found) != 0 {
		t.Fatalf("key stored anyway: %d %v", len(found), err)
	}
}

// TestConcurrentLargeBatchesOfTheSameNewKeys: two bulk batches (the COPY
// path) holding the same new keys race; the loser reruns with fresh
// reads, so both succeed and each key is inserted exactly once.
func TestConcurrentLargeBatchesOfTheSameNewKeys(t *testing.T) {
	const n = 150
	s := pgtest.NewStore(t)
	ctx := context.Background()
	g := keygen.New(93)
	ks := make([]*pgp.Key, n)
	for i := range ks {
		ks[i] = typicalKey(t, g, i)
	}
	addTwiceAtOnce(t, ctx, [2]*postgres.Store{s, s}, ks)
}

// Two nodes (two stores on one database, each with its own group
// transactions) upload the same new keys at once, a few at a time: both
// find no stored key, both insert, and the second's insert fails on the
// unique fingerprint when the first commits. Its whole transaction is
// rerun with fresh reads, so each key ends up stored once and whole, one
// node learns it inserted it and the other that it was already there.
func TestConcurrentSmallBatchesOfTheSameNewKeysFromTwoNodes(t *testing.T) {
	const n = 24
	url, first, conn := openWithConn(t)
	ctx := context.Background()
	second, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(second.Close)
	stores := [2]*postgres.Store{first, second}
	g := keygen.New(94)
	for round := range 4 {
		ks := make([]*pgp.Key, n/4)
		for i := range ks {
			ks[i] = typicalKey(t, g, round*len(ks)+i)
		}
		addTwiceAtOnce(t, ctx, stores, ks)
	}
	// No row of a lost insert is left behind.
	var keyRows, uidKeys, wordKeys, subKeys int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM keys), (SELECT count(DISTINCT key_ref) FROM user_ids),
		(SELECT count(DISTINCT key_ref) FROM key_words), (SELECT count(DISTINCT key_ref) FROM subkeys)`).Scan(&keyRows, &uidKeys, &wordKeys, &subKeys); err != nil {
		t.Fatal(err)
	}
	if keyRows != n || uidKeys != n || wordKeys != n || subKeys > n {
		t.Fatalf("%d keys rows; user IDs of %d keys, words of %d, subkeys of %d; want %d", keyRows, uidKeys, wordKeys, subKeys, n)
	}
}

// addTwiceAtOnce stores ks through both stores at the same time and checks
// that each key was inserted by one and found unchanged by the other, and
// is stored once and whole.
func addTwiceAtOnce(t *testing.T, ctx context.Context, stores [2]*postgres.Store, ks []*pgp.Key) {
	t.Helper()
	var wg sync.WaitGroup
	var results [2][]keys.Written
	var errs [2]error
	for w := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[w], errs[w] = stores[w].AddKeys(ctx, ks)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range ks {
		a, b := results[0][i].Change, results[1][i].Change
		if !(a == keys.Inserted && b == keys.Unchanged) && !(a == keys.Unchanged && b == keys.Inserted) {
			t.Fatalf("key %d: %v and %v, want one inserted and one unchanged", i, a, b)
		}
		found, _, err := stores[1].FindKeys(ctx, keys.Query{Fingerprint: ks[i].Fingerprint()})
		if err != nil || len(found) != 1 || found[0].Digest != ks[i].Digest() || len(found[0].UserIDs) != len(ks[i].Describe().UserIDs) {
			t.Fatalf("key %d not stored whole: %d %v", i, len(found), err)
		}
	}
}
