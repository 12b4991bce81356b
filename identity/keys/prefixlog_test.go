package keys_test

import (
	"math"
	"testing"

	"github.com/kith-keyserver/kith/identity/keys"
)

// TestPrefixDigitsNamesAtLeastMinKeysPerPrefix: the prefix is the longest
// at which each prefix names minKeys stored keys on average, one digit at
// least.
func TestPrefixDigitsNamesAtLeastMinKeysPerPrefix(t *testing.T) {
	for _, tc := range []struct {
		stored  int64
		minKeys int
		want    int
	}{
		{0, 16, 1},
		{1, 16, 1},
		{4095, 16, 1},
		{4096, 16, 2},       // 256 prefixes of 16
		{65535, 16, 2},      // one short of 4,096 prefixes of 16
		{65536, 16, 3},      // 4,096 prefixes of 16
		{100_000, 16, 3},    // 4,096 prefixes of about 24
		{1_000_000, 16, 3},  // 4 digits would name about 15 a prefix
		{1_048_576, 16, 4},  // 65,536 prefixes of 16
		{6_000_000, 16, 4},  // 65,536 prefixes of about 92
		{16_777_216, 16, 5}, // 1,048,576 prefixes of 16
		{4096, 1, 3},
		{4095, 1, 2},
		{5000, 0, 3}, // below 1 counts as 1
		{math.MaxInt64, 1, 15},
		{math.MaxInt64, math.MaxInt32, 8},
		{math.MaxInt64, math.MaxInt, 1},
	} {
		if got := keys.PrefixDigits(tc.stored, tc.minKeys); got != tc.want {
			t.Errorf("PrefixDigits(%d, %d) = %d, want %d", tc.stored, tc.minKeys, got, tc.want)
		}
		// The rule itself: each prefix names minKeys on average, and one
		// digit more would not.
		got, minKeys := keys.PrefixDigits(tc.stored, tc.minKeys), max(tc.minKeys, 1)
		if got > 1 && float64(tc.stored)/math.Pow(16, float64(got)) < float64(minKeys) {
			t.Errorf("PrefixDigits(%d, %d) = %d names fewer than %d keys a prefix", tc.stored, tc.minKeys, got, minKeys)
		}
		if float64(tc.stored)/math.Pow(16, float64(got+1)) >= float64(minKeys) {
			t.Errorf("PrefixDigits(%d, %d) = %d, but %d digits would still name %d keys a prefix", tc.stored, tc.minKeys, got, got+1, minKeys)
		}
	}
}
