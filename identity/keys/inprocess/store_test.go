package inprocess_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/keys/inprocess"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

var testTime = time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)

// applied is e's public key through the default policy.
func applied(t *testing.T, e *openpgp.Entity) *pgp.Key {
	t.Helper()
	var b bytes.Buffer
	if err := keygen.Serialize(&b, e); err != nil {
		t.Fatal(err)
	}
	k, err := pgp.ParseKey(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := pgp.DefaultPolicy().Apply(k)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func entity(t *testing.T, name, email string, seed int64) *openpgp.Entity {
	t.Helper()
	e, err := keygen.NewEd25519(name, email, testTime, seed)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestStoreFindsAKeyEveryWayAndMergesNewUserIDs(t *testing.T) {
	ctx := context.Background()
	st := inprocess.New(inprocess.Options{})
	changes := make(chan keys.DigestChange, 10)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan struct{})
	go st.WatchKeyChanges(lctx, ready, func(c keys.DigestChange) { changes <- c })
	<-ready

	e := entity(t, "Alice Liddell", "alice@example.org", 1)
	first := applied(t, e)
	w, err := st.AddKey(ctx, first)
	if err != nil || w.Change != keys.Inserted || w.Key == nil {
		t.Fatalf("first: %+v, %v", w, err)
	}
	if c := <-changes; c.Old != ([16]byte{}) || c.New != first.Digest() {
		t.Errorf("insert notified as %x -> %x", c.Old, c.New)
	}
	d := first.Describe()
	for _, q := range []keys.Query{
		{Fingerprint: d.Fingerprint},
		{KeyID: d.KeyID},
		{ShortKeyID: d.KeyID32(), HasShortKeyID: true},
		{Email: "Alice@Example.org"},
		{Words: []string{"alice", "liddell"}},
		{Digests: [][16]byte{first.Digest()}},
		{Fingerprints: [][]byte{d.Fingerprint}},
		{PrimaryKeyIDs: []uint64{d.KeyID + 1, d.KeyID}},
	} {
		found, more, err := st.FindKeys(ctx, q)
		if err != nil || more || len(found) != 1 || !bytes.Equal(found[0].Packets, first.Bytes()) {
			t.Errorf("%+v: %d keys, more %v, %v", q, len(found), more, err)
		}
	}
	if found, _, _ := st.FindKeys(ctx, keys.Query{Words: []string{"alice", "nobody"}}); len(found) != 0 {
		t.Errorf("words ANDed: %d keys", len(found))
	}

	if err := e.AddUserId("Alice Work", "", "alice@work.example", nil); err != nil {
		t.Fatal(err)
	}
	w, err = st.AddKey(ctx, applied(t, e))
	if err != nil || w.Change != keys.Updated || len(w.Key.Describe().UserIDs) != 2 {
		t.Fatalf("second user ID: %+v, %v", w.Change, err)
	}
	if c := <-changes; c.Old != first.Digest() || c.New != w.Key.Digest() {
		t.Errorf("update notified as %x -> %x", c.Old, c.New)
	}
	if w, err := st.AddKey(ctx, first); err != nil || w.Change != keys.Unchanged || w.Key != nil {
		t.Errorf("the first form again: %+v, %v", w, err)
	}
}

func TestStoreBlocksAndTombstones(t *testing.T) {
	ctx := context.Background()
	st := inprocess.New(inprocess.Options{})
	k := applied(t, entity(t, "Bob", "bob@example.org", 2))
	if _, err := st.AddKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	out, err := st.AddBlock(ctx, identity.Block{Fingerprint: k.Fingerprint(), KeepRevocations: true})
	if err != nil || out != identity.BlockKeyTombstoned {
		t.Fatalf("tombstone: %q, %v", out, err)
	}
	found, _, _ := st.FindKeys(ctx, keys.Query{Fingerprint: k.Fingerprint()})
	if len(found) != 1 || len(found[0].UserIDs) != 0 {
		t.Fatalf("the tombstone: %d keys, %+v", len(found), found)
	}
	if w, err := st.AddKey(ctx, k); err != nil || w.Change != keys.Reduced {
		t.Errorf("upload onto a tombstone: %+v, %v", w.Change, err)
	}
	if _, err := st.AddBlock(ctx, identity.Block{Fingerprint: k.Fingerprint()}); !errors.Is(err, identity.ErrAlreadyBlocked) {
		t.Errorf("a second whole-key block: %v", err)
	}

	other := applied(t, entity(t, "Carol", "carol@example.org", 3))
	if out, err := st.AddBlock(ctx, identity.Block{Fingerprint: other.Fingerprint()}); err != nil || out != identity.BlockKeyNotStored {
		t.Fatalf("block of a key not stored: %q, %v", out, err)
	}
	if w, err := st.AddKey(ctx, other); err != nil || w.Change != keys.Blocked || w.Key != nil {
		t.Errorf("upload of a blocked key: %+v, %v", w, err)
	}
}

// TestChangedPrefixesAreTheKeysLastChangedInTheSpan: as postgres's, a key
// is in the span of its last change, and a write that changes nothing
// leaves it there.
func TestChangedPrefixesAreTheKeysLastChangedInTheSpan(t *testing.T) {
	ctx := context.Background()
	now := testTime
	st := inprocess.New(inprocess.Options{Now: func() time.Time { return now }})
	a, b := entity(t, "A", "a@example.org", 1), entity(t, "B", "b@example.org", 2)
	if _, err := st.AddKeys(ctx, []*pgp.Key{applied(t, a), applied(t, b)}); err != nil {
		t.Fatal(err)
	}
	day := testTime.Truncate(24 * time.Hour)
	now = testTime.AddDate(0, 0, 1)
	if err := a.AddUserId("A", "", "second@example.org", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddKeys(ctx, []*pgp.Key{applied(t, a), applied(t, b)}); err != nil {
		t.Fatal(err)
	}
	hexFP := func(e *openpgp.Entity) string { return fmt.Sprintf("%x", e.PrimaryKey.Fingerprint) }
	for _, tc := range []struct {
		from   time.Time
		digits int
		want   []string
	}{
		{day, 40, []string{hexFP(b)}},
		{day.AddDate(0, 0, 1), 40, []string{hexFP(a)}},
		{day.AddDate(0, 0, 1), 2, []string{hexFP(a)[:2]}},
		{day.AddDate(0, 0, 2), 40, nil},
	} {
		got, err := st.ChangedPrefixes(ctx, tc.from, tc.from.AddDate(0, 0, 1), tc.digits)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ChangedPrefixes(%s, %d digits) = %q, %v; want %q", tc.from.Format(time.DateOnly), tc.digits, got, err, tc.want)
		}
	}
	if n, err := st.CountKeys(ctx); err != nil || n != 2 {
		t.Errorf("CountKeys: %d, %v; want 2", n, err)
	}
}
