package bulk_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/kith-keyserver/kith/identity/keys/bulk"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// TestDumpSpreadsReadableKeysOverNumberedFiles: keys go in store order
// into files of perFile keys each; a key gpg cannot read is left out and
// counted; the files read back as the keys.
func TestDumpSpreadsReadableKeysOverNumberedFiles(t *testing.T) {
	t.Parallel()
	raw, err := keygen.TypicalKeys(5, 13)
	if err != nil {
		t.Fatal(err)
	}
	store := dumpList{raw[0], raw[1], []byte{0x99, 0x00}, raw[2], raw[3], raw[4]}
	dir := t.TempDir()
	sum, err := bulk.Dump(context.Background(), store, dir, 2, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Keys != 5 || sum.Files != 3 || sum.SkippedTotal() != 1 || sum.Skipped["malformed"] != 1 {
		t.Errorf("summary %+v", sum)
	}
	var all []byte
	for i, want := range [][][]byte{{raw[0], raw[1]}, {raw[2], raw[3]}, {raw[4]}} {
		b, err := os.ReadFile(filepath.Join(dir, []string{"sks-dump-0000.pgp", "sks-dump-0001.pgp", "sks-dump-0002.pgp"}[i]))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, bytes.Join(want, nil)) {
			t.Errorf("file %d is not keys %d to %d", i, 2*i, 2*i+len(want)-1)
		}
		all = append(all, b...)
	}
	if ks, err := pgp.ReadKeys(bytes.NewReader(all)); err != nil || len(ks) != 5 {
		t.Errorf("read back %d keys: %v", len(ks), err)
	}
	// A dump never overwrites one.
	if _, err := bulk.Dump(context.Background(), store, dir, 2, slog.New(slog.DiscardHandler)); !os.IsExist(err) {
		t.Errorf("a second dump into the same directory: %v", err)
	}
}
