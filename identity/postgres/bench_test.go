package postgres_test

import (
	"context"
	"testing"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// BenchmarkAddKeysBatch stores batches of 1000 new typical keys, as
// `kith load` writes them: the cost of one write transaction, blocklist
// check included.
func BenchmarkAddKeysBatch(b *testing.B) {
	const batch = 1000
	raw, err := keygen.New(77).Range(0, batch*4)
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]*pgp.Key, len(raw))
	for i, r := range raw {
		k, err := pgp.ParseKey(r)
		if err != nil {
			b.Fatal(err)
		}
		if keys[i], _, err = pgp.DefaultPolicy().Apply(k); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s := pgtest.NewStore(b)
		b.StartTimer()
		for start := 0; start < len(keys); start += batch {
			if _, err := s.AddKeys(ctx, keys[start:start+batch]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(keys)*b.N)/b.Elapsed().Seconds(), "keys/s")
}
