package bulk_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/keys/bulk"
	"github.com/kith-keyserver/kith/identity/keys/inprocess"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// writeFile writes data to a file of its own and returns its name.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadStoresEveryKeyOnceThroughTheService: keys in two files, one
// binary and one armored, are stored; loading them again changes nothing;
// progress counts every file, key and byte.
func TestLoadStoresEveryKeyOnceThroughTheService(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw, err := keygen.TypicalKeys(12, 7)
	if err != nil {
		t.Fatal(err)
	}
	var dump, armored bytes.Buffer
	for _, k := range raw[:8] {
		dump.Write(k)
	}
	for _, k := range raw[8:] {
		ks, err := pgp.ReadKeys(bytes.NewReader(k))
		if err != nil || len(ks) != 1 {
			t.Fatalf("read back %d keys: %v", len(ks), err)
		}
		if err := pgp.WriteArmored(&armored, ks[0]); err != nil {
			t.Fatal(err)
		}
	}
	files := []string{writeFile(t, "dump.pgp", dump.Bytes()), writeFile(t, "more.asc", armored.Bytes())}
	svc := keys.NewService(inprocess.New(inprocess.Options{}), keys.Options{})

	var p bulk.Progress
	sum, err := bulk.Load(ctx, svc, 2, files, &p)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Changes[keys.Inserted] != 12 || len(sum.Rejected) != 0 {
		t.Errorf("first load: changes %v, rejected %v", sum.Changes, sum.Rejected)
	}
	if got, want := p.Bytes.Load(), int64(dump.Len()+armored.Len()); p.Files.Load() != 2 || p.Keys.Load() != 12 || got != want {
		t.Errorf("progress: files %d keys %d bytes %d (want 2, 12, %d)", p.Files.Load(), p.Keys.Load(), got, want)
	}
	sum, err = bulk.Load(ctx, svc, 2, files, nil)
	if err != nil || sum.Changes[keys.Unchanged] != 12 || sum.Changes[keys.Inserted] != 0 {
		t.Errorf("second load: changes %v, %v", sum.Changes, err)
	}
}

// fakeWriter hands out results it is given, ignoring the files' bytes,
// and records the batches written.
type fakeWriter struct {
	results  []pgp.Result
	batches  []int
	writeErr error
}

func (w *fakeWriter) Process(ctx context.Context, r *pgp.Reader, workers int, fn func(pgp.Result) error) error {
	for _, res := range w.results {
		if err := fn(res); err != nil {
			return err
		}
	}
	return nil
}

func (w *fakeWriter) AddKeys(ctx context.Context, batch []*pgp.Key) ([]keys.Change, error) {
	if w.writeErr != nil {
		return nil, w.writeErr
	}
	w.batches = append(w.batches, len(batch))
	changes := make([]keys.Change, len(batch))
	for i := range changes {
		changes[i] = keys.Updated
	}
	return changes, nil
}

// TestLoadWritesWholeBatchesAndCountsRejections: keys go to the store in
// batches of BatchSize and a last partial one; rejections are counted by
// reason and never written.
func TestLoadWritesWholeBatchesAndCountsRejections(t *testing.T) {
	t.Parallel()
	w := &fakeWriter{}
	for i := range 2*bulk.BatchSize + 5 {
		w.results = append(w.results, pgp.Result{Index: i, Key: &pgp.Key{}})
	}
	w.results = append(w.results, pgp.Result{Err: pgp.ErrNoSelfSignature}, pgp.Result{Err: pgp.ErrNoSelfSignature}, pgp.Result{Err: errors.New("odd")})
	f := writeFile(t, "k", nil)
	var p bulk.Progress
	sum, err := bulk.Load(context.Background(), w, 1, []string{f, f}, &p)
	if err != nil {
		t.Fatal(err)
	}
	// Two files of 2*BatchSize+5 keys each: four whole batches, then the 10 left.
	if got, want := fmt.Sprint(w.batches), fmt.Sprint([]int{bulk.BatchSize, bulk.BatchSize, bulk.BatchSize, bulk.BatchSize, 10}); got != want {
		t.Errorf("batches %s, want %s", got, want)
	}
	if sum.Changes[keys.Updated] != 2*(2*bulk.BatchSize+5) {
		t.Errorf("changes %v", sum.Changes)
	}
	if sum.Rejected[pgp.RejectionReason(pgp.ErrNoSelfSignature)] != 4 || sum.Rejected["other"] != 2 {
		t.Errorf("rejected %v", sum.Rejected)
	}
	if p.Keys.Load() != 2*(2*bulk.BatchSize+8) || p.Files.Load() != 2 {
		t.Errorf("progress: keys %d files %d", p.Keys.Load(), p.Files.Load())
	}
}

// TestLoadStopsAtTheFirstError: a file that cannot be opened and a batch
// the store refuses end the load with their error, and the summary of
// what was done before is still returned.
func TestLoadStopsAtTheFirstError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := &fakeWriter{results: []pgp.Result{{Key: &pgp.Key{}}}}
	good := writeFile(t, "k", nil)
	missing := filepath.Join(t.TempDir(), "missing")
	sum, err := bulk.Load(ctx, w, 1, []string{good, missing, good}, nil)
	if !errors.Is(err, os.ErrNotExist) || sum == nil {
		t.Fatalf("missing file: %v, summary %v", err, sum)
	}
	if len(w.batches) != 0 {
		t.Errorf("batches written after a read error: %v", w.batches)
	}
	refused := io.ErrClosedPipe
	w = &fakeWriter{results: []pgp.Result{{Key: &pgp.Key{}}}, writeErr: refused}
	if _, err := bulk.Load(ctx, w, 1, []string{good}, nil); !errors.Is(err, refused) {
		t.Errorf("refused batch: %v", err)
	}
}
