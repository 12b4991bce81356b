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
