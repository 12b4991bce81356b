package pgp

import (
	"slices"
	"testing"
)

func TestForLegacyClients(t *testing.T) {
	for _, tc := range []struct {
		versions []int
		send     []bool
	}{
		{nil, []bool{}},
		{[]int{4}, []bool{true}},
		{[]int{6}, []bool{true}},
		{[]int{4, 6, 3}, []bool{true, false, true}},
		{[]int{6, 6}, []bool{true, true}},
		{[]int{6, 4}, []bool{false, true}},
	} {
		if got := ForLegacyClients(tc.versions); !slices.Equal(got, tc.send) {
			t.Errorf("ForLegacyClients(%v) = %v, want %v", tc.versions, got, tc.send)
		}
	}
}

func TestKeyVersion(t *testing.T) {
	for _, tc := range []struct {
		file string
		want int
	}{
		{"v6-ed25519.pgp", 6},
		{"v4-mlkem-subkey.pgp", 4},
	} {
		if got := mustParse(t, pqcKey(t, tc.file)).Version(); got != tc.want {
			t.Errorf("%s: Version() = %d, want %d", tc.file, got, tc.want)
		}
	}
	if got := NewKey(nil).Version(); got != 0 {
		t.Errorf("a key of no packets: Version() = %d, want 0", got)
	}
}

// TestKeepForLegacyClients: the kept items, and the same entries of
// along, follow ForLegacyClients in answer order; a nil along stays nil.
func TestKeepForLegacyClients(t *testing.T) {
	versions := []int{6, 4, 6, 3}
	items := []string{"v6a", "v4", "v6b", "v3"}
	along := []int{0, 1, 2, 3}
	got, gotAlong := KeepForLegacyClients(items, along, func(i int) int { return versions[i] })
	if !slices.Equal(got, []string{"v4", "v3"}) || !slices.Equal(gotAlong, []int{1, 3}) {
		t.Errorf("mixed answer: kept %q, %v", got, gotAlong)
	}
	only6 := []int{6, 6}
	got, gotAlong = KeepForLegacyClients(items[:2], []int(nil), func(i int) int { return only6[i] })
	if !slices.Equal(got, items[:2]) || gotAlong != nil {
		t.Errorf("all-v6 answer: kept %q, %v", got, gotAlong)
	}
}
