package bulk

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
)

// Rechecker is what a repair needs of the keys Service (keys.Service is
// one): the key policy run again over a stored key, and the normal write
// path.
type Rechecker interface {
	Recheck(stored *pgp.Key) (*pgp.Key, pgp.Report, error)
	AddKeys(ctx context.Context, batch []*pgp.Key) ([]keys.Change, error)
}

// RepairSummary is what a repair found and did.
type RepairSummary struct {
	// Keys is how many stored keys were checked; Changed how many the
	// policy changes (written back unless a dry run), Unchanged how many
	// it leaves as they are, Unparseable how many do not parse.
	Keys, Changed, Unchanged, Unparseable int
	// Dropped sums the packets the policy dropped from the changed keys.
	Dropped pgp.Report
	// Rejected lists the fingerprints (hex, upper case) of the keys the
	// policy rejects as a whole, by pgp.RejectionReason. They stay
	// stored.
	Rejected map[string][]string
}

// Repair re-runs the key policy over every key in store and writes the
// keys it changes back through svc, in batches of BatchSize: digests, the
// recon tree and other nodes follow as for any change. With dryRun it
// only counts. A key that does not parse is logged to log and counted.
func Repair(ctx context.Context, store keys.Lister, svc Rechecker, log *slog.Logger, dryRun bool) (*RepairSummary, error) {
	r := &repairer{svc: svc, log: log, dryRun: dryRun, sum: &RepairSummary{Rejected: map[string][]string{}}}
	err := store.DumpKeys(ctx, func(packets []byte) error {
		r.sum.Keys++
		raw, err := pgp.ParseKey(packets)
		if err != nil {
			r.sum.Unparseable++
			r.log.Warn("repair: stored key does not parse", "err", err)
			return nil
		}
		out, rep, err := r.svc.Recheck(raw)
		if err != nil {
			reason := pgp.RejectionReason(err)
			r.sum.Rejected[reason] = append(r.sum.Rejected[reason], fmt.Sprintf("%X", raw.Fingerprint()))
			return nil
		}
		if bytes.Equal(out.Bytes(), packets) {
			r.sum.Unchanged++
			return nil
		}
		r.sum.Dropped.Add(rep)
		r.sum.Changed++
		if r.dryRun {
			return nil
		}
		r.batch = append(r.batch, out)
		if len(r.batch) == BatchSize {
			return r.flush(ctx)
		}
		return nil
	})
	if err != nil {
		return r.sum, err
	}
	return r.sum, r.flush(ctx)
}

// repairer is one repair's state.
type repairer struct {
	svc    Rechecker
	log    *slog.Logger
	dryRun bool
	batch  []*pgp.Key
	sum    *RepairSummary
}

// flush writes the batch through AddKeys: the store merges each key with
// its stored copy under the same policy, which drops what Apply dropped,
// and rewrites digest, user IDs, subkeys and notifies, as for any change.
func (r *repairer) flush(ctx context.Context) error {
	if len(r.batch) == 0 {
		return nil
	}
	if _, err := r.svc.AddKeys(ctx, r.batch); err != nil {
		return err
	}
	r.batch = r.batch[:0]
	return nil
}
