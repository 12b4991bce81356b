package postgres

import (
	"testing"
	"time"
)

// The word a search starts from: the fewest estimated keys; a word the
// counts do not know is taken as rare, the longer of two such first; a
// word searches found common never; none when every word is common.
// Learned words are forgotten when the counts are read again, and a
// failed read keeps the old counts.
func TestWordCountsPickTheRarestWord(t *testing.T) {
	var w wordCounts
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	if !w.stale(now) || w.stale(now) {
		t.Fatal("the first search does not read the counts, or a second reads them too")
	}
	w.set(map[string]float64{"example": 60000, "wei": 3000, "net": 20000, "alt": 40}, now)
	for _, c := range []struct {
		words []string
		want  string
		ok    bool
	}{
		{[]string{"example", "user55061", "wei"}, "user55061", true},
		{[]string{"example", "wei"}, "", false},
		{[]string{"alt", "example"}, "alt", true},
		{[]string{"ab", "abc", "example"}, "abc", true},
		{[]string{"abc", "ab"}, "abc", true},
	} {
		got, ok := w.rarest(c.words)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("%q: %q, %v; want %q, %v", c.words, got, ok, c.want, c.ok)
		}
	}
	w.learn("abc")
	if got, _ := w.rarest([]string{"ab", "abc"}); got != "ab" {
		t.Errorf("after abc proved common: %q, want ab", got)
	}
	if _, ok := w.rarest([]string{"abc", "wei"}); ok {
		t.Error("a learned common word and a common one: a word to start from")
	}
	if w.stale(now.Add(wordCountsAge - time.Second)) {
		t.Error("the counts are read again before wordCountsAge")
	}
	if !w.stale(now.Add(wordCountsAge)) {
		t.Fatal("the counts are not read again after wordCountsAge")
	}
	w.set(nil, now.Add(wordCountsAge))
	if got, ok := w.rarest([]string{"abc", "alt"}); !ok || got != "alt" {
		t.Errorf("after a failed read: %q, %v; want the old counts and what was learned (alt)", got, ok)
	}
	w.set(map[string]float64{"example": 60000}, now.Add(2*wordCountsAge))
	if got, ok := w.rarest([]string{"abc", "example"}); !ok || got != "abc" {
		t.Errorf("after a new read: %q, %v; want abc, tried again", got, ok)
	}
}
