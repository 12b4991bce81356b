package tlog

import "testing"

func TestTilePathsRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		tile Tile
		path string
	}{
		{Tile{L: 0, N: 0, W: 256}, "tile/0/000"},
		{Tile{L: 1, N: 1234067, W: 256}, "tile/1/x001/x234/067"},
		{Tile{L: 2, N: 999, W: 17}, "tile/2/999.p/17"},
		{Tile{Entries: true, N: 1000, W: 1}, "tile/entries/x001/000.p/1"},
	} {
		if got := tt.tile.Path(); got != tt.path {
			t.Errorf("%+v.Path() = %q, want %q", tt.tile, got, tt.path)
		}
		got, err := ParseTilePath(tt.path)
		if err != nil || got != tt.tile {
			t.Errorf("ParseTilePath(%q) = %+v, %v", tt.path, got, err)
		}
	}
	for _, bad := range []string{"tile/0/1", "tile/0/x000/001", "tile/0/x001", "tile/0/001.p/256", "tile/0/001.p/0",
		"tile/0/001.p/07", "tile/-1/000", "tile/64/000", "tile/01/000", "tile/x/000", "tile/0/00a", "tile/0/",
		"tile/0/x999/x999/x999/x999/x999/x999/x999/000"} {
		if _, err := ParseTilePath(bad); err == nil {
			t.Errorf("ParseTilePath(%q) succeeded", bad)
		}
	}
}

func TestEntryBundles(t *testing.T) {
	var b []byte
	var err error
	for _, e := range [][]byte{[]byte("a"), {}, make([]byte, MaxEntrySize)} {
		if b, err = AppendEntry(b, e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := SplitEntries(b)
	if err != nil || len(got) != 3 || string(got[0]) != "a" || len(got[1]) != 0 || len(got[2]) != MaxEntrySize {
		t.Fatalf("SplitEntries: %d entries, %v", len(got), err)
	}
	if _, err := AppendEntry(nil, make([]byte, MaxEntrySize+1)); err == nil {
		t.Fatal("an entry too long for its length prefix was bundled")
	}
	if _, err := SplitEntries(b[:len(b)-1]); err == nil {
		t.Fatal("a truncated bundle split")
	}
}
