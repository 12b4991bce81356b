package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// TestDumpLoadCarriesV6AndPQCKeys: v6 and post-quantum keys load with
// their SKS digests, dump into files of their own beside the gpg-readable
// ones, and load from the dump into a fresh store with the same digests.
func TestDumpLoadCarriesV6AndPQCKeys(t *testing.T) {
	fixtures, err := filepath.Glob(filepath.Join("..", "..", "pgp", "testdata", "pqc", "*.pgp"))
	if err != nil || len(fixtures) != 7 {
		t.Fatalf("pgp/testdata/pqc: %d keys (%v)", len(fixtures), err)
	}
	var in []byte
	var want []string // the PQC keys' digests
	v6 := 0
	for _, f := range fixtures {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, b...)
		k, err := pgp.ParseKey(b)
		if err != nil {
			t.Fatal(err)
		}
		applied, _, err := pgp.Policy{}.Apply(k)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		want = append(want, pgp.FormatDigest(applied.Digest()))
		if applied.Describe().Version == 6 {
			v6++
		}
	}
	typical, err := keygen.TypicalKeys(20, 35)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range typical {
		in = append(in, b...)
	}
	path := filepath.Join(t.TempDir(), "pqc.pgp")
	if err := os.WriteFile(path, in, 0o644); err != nil {
		t.Fatal(err)
	}

	src := pgtest.NewDatabase(t)
	if _, errOut, err := runKith(t, "load", "--database-url", src, path); err != nil {
		t.Fatalf("load: %v\n%s", err, errOut)
	}
	a := digestsOf(t, openTestStore(t, src))
	if len(a) != 27 {
		t.Fatalf("%d keys stored, want 27", len(a))
	}
	for _, d := range want {
		if !slices.Contains(a, d) {
			t.Errorf("digest %s of a PQC key is not in the store", d)
		}
	}

	dir := t.TempDir()
	out, errOut, err := runKith(t, "dump", "--database-url", src, "--dir", dir)
	if err != nil {
		t.Fatalf("dump: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "dumped 21 keys into 1 files") || !strings.Contains(out, "dumped 6 v6 keys into 1 files") || v6 != 6 {
		t.Fatalf("dump said %q (%d v6 keys given)", out, v6)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.pgp"))
	v6Files, _ := filepath.Glob(filepath.Join(dir, "v6", "*.pgp"))
	if len(files) != 1 || len(v6Files) != 1 {
		t.Fatalf("dump files %v and %v", files, v6Files)
	}
	dst := pgtest.NewDatabase(t)
	if _, errOut, err := runKith(t, append([]string{"load", "--database-url", dst}, append(files, v6Files...)...)...); err != nil {
		t.Fatalf("load dump: %v\n%s", err, errOut)
	}
	if b := digestsOf(t, openTestStore(t, dst)); !slices.Equal(a, b) {
		t.Fatalf("digests differ after the round trip: %d keys vs %d", len(a), len(b))
	}
}
