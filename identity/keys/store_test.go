package keys_test

import (
	"testing"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
)

// TestWrittenBatchTellsEachKeyOfTheBatch: copies of one fingerprint are
// stored once, a key's form is told only when the batch committed it,
// and blocks that took something out make it Reduced unless they refused
// it whole.
func TestWrittenBatchTellsEachKeyOfTheBatch(t *testing.T) {
	k := pgp.NewKey(nil)
	outcomes := map[string]keys.Outcome{
		"new":     {Change: keys.Inserted, Key: k, Written: true},
		"same":    {Change: keys.Unchanged, Key: k},
		"cleaned": {Change: keys.Updated, Key: k, Written: true, Reduced: true},
		"blocked": {Change: keys.Blocked, Key: k, Reduced: true},
	}
	index := []string{"new", "same", "new", "cleaned", "blocked"}
	got := keys.WrittenBatch(index, func(name string) keys.Outcome { return outcomes[name] })
	want := []keys.Written{{Change: keys.Inserted, Key: k}, {Change: keys.Unchanged},
		{Change: keys.Unchanged}, {Change: keys.Reduced, Key: k}, {Change: keys.Blocked}}
	if len(got) != len(want) {
		t.Fatalf("%d results for %d keys", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("key %d (%s): %+v, want %+v", i, index[i], got[i], want[i])
		}
	}
}
