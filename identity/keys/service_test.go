package keys_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/keys/inprocess"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// identities is an identity service for the Service's tests: it proves
// the keys in proven, fails when failing is set, and records the keys
// whose links it was asked to refresh.
type identities struct {
	mu      sync.Mutex
	proven  map[string]bool
	failing error
	synced  [][]byte
}

func (ids *identities) WhoProves(ctx context.Context, f identity.Factor) (identity.Handle, error) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if ids.failing != nil {
		return "", ids.failing
	}
	if ids.proven[f.Value] {
		return "someone", nil
	}
	return "", identity.Refuse(identity.CodeNotLinked, "not linked")
}

func (ids *identities) SyncKeys(ctx context.Context, fps [][]byte) error {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	ids.synced = append(ids.synced, fps...)
	return nil
}

func (ids *identities) takeSynced() [][]byte {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	out := ids.synced
	ids.synced = nil
	return out
}

// subscriber records the keys it is told of.
type subscriber struct {
	mu      sync.Mutex
	writing [][]byte // told to KeysWriting
	changed [][]byte // told to KeysChanged
	// onWriting, when set, is called by KeysWriting.
	onWriting func(ks []*pgp.Key)
}

func (s *subscriber) KeysWriting(ctx context.Context, ks []*pgp.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range ks {
		s.writing = append(s.writing, k.Fingerprint())
	}
	if s.onWriting != nil {
		s.onWriting(ks)
	}
}

func (s *subscriber) takeWriting() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.writing
	s.writing = nil
	return out
}

func (s *subscriber) KeysChanged(ctx context.Context, changed []*pgp.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range changed {
		s.changed = append(s.changed, k.Fingerprint())
	}
}

func (s *subscriber) take() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.changed
	s.changed = nil
	return out
}

// testKey is a fresh Ed25519 key with one user ID, as uploaded.
func testKey(t *testing.T, seed int64) *pgp.Key {
	t.Helper()
	b, err := keygen.PublicEd25519("Test Key", "test@example.org", time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC), seed)
	if err != nil {
		t.Fatal(err)
	}
	k, err := pgp.ParseKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestUploadStoresSyncsLinksAndTellsSubscribersBeforeReturning(t *testing.T) {
	ctx := context.Background()
	st := inprocess.New(inprocess.Options{})
	ids := &identities{}
	svc := keys.NewService(st, keys.Options{Identities: ids})
	k := testKey(t, 1)
	// The subscriber is told of the key before the store holds it, so
	// that it knows the key when the store's notification comes.
	storedFirst := false
	sub := &subscriber{onWriting: func(ks []*pgp.Key) {
		found, _, err := st.FindKeys(ctx, keys.Query{Fingerprint: k.Fingerprint()})
		storedFirst = storedFirst || err != nil || len(found) != 0
	}}
	svc.Subscribe(sub)

	res, err := svc.Upload(ctx, k, keys.UploadOptions{})
	if err != nil || res.Change != keys.Inserted {
		t.Fatalf("first upload: %v, %v", res.Change, err)
	}
	want := [][]byte{k.Fingerprint()}
	if got := sub.takeWriting(); !slices.EqualFunc(got, want, bytes.Equal) || storedFirst {
		t.Errorf("subscriber told of %x before the write (the store holding it already: %v), want %x", got, storedFirst, want)
	}
	if got := ids.takeSynced(); !slices.EqualFunc(got, want, bytes.Equal) {
		t.Errorf("links refreshed for %x, want %x", got, want)
	}
	if got := sub.take(); !slices.EqualFunc(got, want, bytes.Equal) {
		t.Errorf("subscriber told of %x, want %x", got, want)
	}
	if found, _, _ := st.FindKeys(ctx, keys.Query{Fingerprint: k.Fingerprint()}); len(found) != 1 {
		t.Fatalf("stored %d keys", len(found))
	}

	res, err = svc.Upload(ctx, k, keys.UploadOptions{})
	if err != nil || res.Change != keys.Unchanged {
		t.Fatalf("second upload: %v, %v", res.Change, err)
	}
	if got, told := ids.takeSynced(), sub.take(); len(got) != 0 || len(told) != 0 {
		t.Errorf("an unchanged key refreshed links of %x and told the subscriber of %x", got, told)
	}
}

func TestUploadRefusals(t *testing.T) {
	ctx := context.Background()
	k := testKey(t, 2)
	bare := pgp.NewKey(k.Packets()[:1]) // a primary key with no self-signature
	fp := identity.PGPFactor(k.Fingerprint()).Value
	cases := []struct {
		name     string
		policy   keys.UploadPolicy
		ids      *identities
		key      *pgp.Key
		loggedIn bool
		// byUpload: a *Rejection by the upload policy; byKey: by the key
		// policy; failed: ErrUploadPolicyFailed; none: stored.
		want string
	}{
		{"key policy", keys.UploadsOpen, &identities{}, bare, false, "byKey"},
		{"read-only mirror", keys.UploadsOff, &identities{}, k, true, "byUpload"},
		{"unproven key", keys.UploadsIdentities, &identities{}, k, false, "byUpload"},
		{"unproven key, logged in", keys.UploadsIdentities, &identities{}, k, true, "none"},
		{"proven key", keys.UploadsIdentities, &identities{proven: map[string]bool{fp: true}}, k, false, "none"},
		{"identity store down", keys.UploadsIdentities, &identities{failing: errors.New("down")}, k, false, "failed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := inprocess.New(inprocess.Options{})
			svc := keys.NewService(st, keys.Options{Uploads: c.policy, Identities: c.ids})
			_, err := svc.Upload(ctx, c.key, keys.UploadOptions{LoggedIn: c.loggedIn})
			var rej *keys.Rejection
			got := "none"
			switch {
			case errors.As(err, &rej) && rej.ByUploadPolicy:
				got = "byUpload"
			case errors.As(err, &rej):
				got = "byKey"
			case errors.Is(err, keys.ErrUploadPolicyFailed):
				got = "failed"
			case err != nil:
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got %s (%v), want %s", got, err, c.want)
			}
			stored, _, _ := st.FindKeys(ctx, keys.Query{Fingerprint: k.Fingerprint()})
			if (len(stored) == 1) != (c.want == "none") {
				t.Errorf("%d keys stored after %s", len(stored), got)
			}
		})
	}
}

func TestAddKeysAndAddBlockRefreshLinksAndTellSubscribers(t *testing.T) {
	ctx := context.Background()
	st := inprocess.New(inprocess.Options{})
	ids := &identities{}
	svc := keys.NewService(st, keys.Options{Identities: ids})
	sub := &subscriber{}
	svc.Subscribe(sub)
	a, b := testKey(t, 3), testKey(t, 4)
	var batch []*pgp.Key
	for _, k := range []*pgp.Key{a, b} {
		applied, _, err := svc.Recheck(k)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, applied)
	}
	changes, err := svc.AddKeys(ctx, batch)
	if err != nil || !slices.Equal(changes, []keys.Change{keys.Inserted, keys.Inserted}) {
		t.Fatalf("add keys: %v, %v", changes, err)
	}
	if got, told, before := ids.takeSynced(), sub.take(), sub.takeWriting(); len(got) != 2 || len(told) != 2 || len(before) != 2 {
		t.Errorf("links refreshed for %d keys and the subscriber told of %d, %d before the write, want 2", len(got), len(told), len(before))
	}
	out, err := svc.AddBlock(ctx, identity.Block{Fingerprint: a.Fingerprint(), Origin: identity.BlockByOperator})
	if err != nil || out != identity.BlockKeyRemoved {
		t.Fatalf("block: %q, %v", out, err)
	}
	if got := ids.takeSynced(); !slices.EqualFunc(got, [][]byte{a.Fingerprint()}, bytes.Equal) {
		t.Errorf("after the block, links refreshed for %x", got)
	}
	if told := sub.take(); !slices.EqualFunc(told, [][]byte{a.Fingerprint()}, bytes.Equal) {
		t.Errorf("after the block, the subscriber was told of %x", told)
	}
	if res, err := svc.Upload(ctx, a, keys.UploadOptions{}); err != nil || res.Change != keys.Blocked {
		t.Errorf("upload of a blocked key: %v, %v", res.Change, err)
	}
}
