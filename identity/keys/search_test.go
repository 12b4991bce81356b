package keys

import (
	"errors"
	"slices"
	"testing"
)

func TestParseKeySearchReadsEveryHKPForm(t *testing.T) {
	fp40 := "0123456789ABCDEF0123456789ABCDEF01234567"
	cases := []struct {
		in   string
		want func(Query) bool
	}{
		{"0xDEADBEEF", func(q Query) bool { return q.HasShortKeyID && q.ShortKeyID == 0xDEADBEEF }},
		{"0x0123456789abcdef", func(q Query) bool { return q.KeyID == 0x0123456789abcdef }},
		{"0x" + fp40, func(q Query) bool { return len(q.Fingerprint) == 20 }},
		{"0x00112233445566778899AABBCCDDEEFF", func(q Query) bool { return len(q.Fingerprint) == 16 }}, // v3
		{"0x0123 4567 89AB CDEF 0123  4567 89AB CDEF 0123 4567", func(q Query) bool { return len(q.Fingerprint) == 20 }},
		{fp40 + fp40[:24], func(q Query) bool { return len(q.Fingerprint) == 32 }},
		{fp40, func(q Query) bool { return len(q.Fingerprint) == 20 }},
		{"Alice@Example.org", func(q Query) bool { return q.Email == "alice@example.org" }},
		{"<alice@example.org>", func(q Query) bool { return q.Email == "alice@example.org" }},
		{"Alice  Liddell alice", func(q Query) bool { return slices.Equal(q.Words, []string{"alice", "liddell"}) }},
		{"deadbeef", func(q Query) bool { return slices.Equal(q.Words, []string{"deadbeef"}) }},
	}
	for _, c := range cases {
		q, err := ParseSearch(c.in)
		if err != nil || !c.want(q) {
			t.Errorf("ParseSearch(%q) = %+v, %v", c.in, q, err)
		}
	}
}

func TestParseKeySearchRefusesWhatNamesNoKey(t *testing.T) {
	for _, in := range []string{"0x", "0x123", "0xZZZZZZZZ", "0x" + "00112233445566778899", "", "  ", "--- !!!",
		"a b c d e f g h i j k l m n o p q"} {
		if q, err := ParseSearch(in); !errors.Is(err, ErrBadSearch) {
			t.Errorf("ParseSearch(%q) = %+v, %v; want ErrBadSearch", in, q, err)
		}
	}
}
