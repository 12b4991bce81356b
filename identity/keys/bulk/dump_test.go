package bulk_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// TestDumpPutsV6KeysInFilesOfTheirOwn: gpg stops reading a file at a v6
// key and SKS loads every *.pgp file of a directory, so v6 keys go into
// v6/sks-dump-v6-NNNN.pgp; both series read back whole.
func TestDumpPutsV6KeysInFilesOfTheirOwn(t *testing.T) {
	t.Parallel()
	raw, err := keygen.TypicalKeys(2, 14)
	if err != nil {
		t.Fatal(err)
	}
	var v6 [][]byte
	for i, kind := range []keygen.Kind{keygen.V6MLDSA65, keygen.V6Ed25519, keygen.V4MLKEMSubkey} {
		b, err := keygen.PublicKey(kind, "Quantum", "q@example.org", time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), int64(i))
		if err != nil {
			t.Fatal(err)
		}
		v6 = append(v6, b)
	}
	store := dumpList{raw[0], v6[0], v6[2], v6[1], raw[1]}
	dir := t.TempDir()
	sum, err := bulk.Dump(context.Background(), store, dir, 2, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Keys != 3 || sum.Files != 2 || sum.V6Keys != 2 || sum.V6Files != 1 || sum.SkippedTotal() != 0 {
		t.Errorf("summary %+v", sum)
	}
	got := func(paths ...string) []byte {
		var all []byte
		for _, p := range paths {
			b, err := os.ReadFile(filepath.Join(dir, p))
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, b...)
		}
		return all
	}
	if !bytes.Equal(got("sks-dump-0000.pgp", "sks-dump-0001.pgp"), bytes.Join([][]byte{raw[0], v6[2], raw[1]}, nil)) {
		t.Error("the gpg-readable files are not the v3 and v4 keys (the v4 key with an ML-KEM subkey among them)")
	}
	if !bytes.Equal(got(filepath.Join(bulk.V6Dir, "sks-dump-v6-0000.pgp")), bytes.Join([][]byte{v6[0], v6[1]}, nil)) {
		t.Error("the v6 file is not the v6 keys")
	}
}
