package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/keys/bulk"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/pgp"
)

// repairBatch is how many changed keys go into one store transaction.
const repairBatch = bulk.BatchSize

func runRepair(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "repair", "repair [flags]\n\nRe-runs the key policy over every stored key and writes back the keys it\nchanges (packets stored before a rule existed, such as malformed\ncertifications), through the store's normal write path: digests, the recon\ntree and other nodes follow. Keys the policy now rejects as a whole are\nlisted, not deleted.")
	dryRun := fs.Bool("dry-run", false, "only report what would change; write nothing")
	cfg, rest, err := loadToolConfig(fs, args, env.environ, "public_url", "listen")
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("%w: repair takes no arguments, got %q", errUsage, rest)
	}
	log := newLogger(env.stderr, cfg)
	policy := pgp.DefaultPolicy()
	st, err := openSharedStore(ctx, cfg, log, postgres.Options{Policy: &policy})
	if err != nil {
		return err
	}
	defer st.Close()

	// A changed key refreshes the identity links it implies, as in serve.
	ks, err := newToolKeyService(st.Store, cfg, policy, log)
	if err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	r := &repairer{store: st.Store, svc: ks, log: log, dryRun: *dryRun,
		rejected: map[string][]string{}}
	start := time.Now()
	if err := r.run(ctx); err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	r.write(env.stdout, time.Since(start))
	return nil
}

// repairKeys is what repair needs of the keys Service: the key policy
// run again, and the normal write path.
type repairKeys interface {
	Recheck(stored *pgp.Key) (*pgp.Key, pgp.Report, error)
	AddKeys(ctx context.Context, batch []*pgp.Key) ([]keys.Change, error)
}

// repairer re-applies the policy to stored keys and counts the outcome.
type repairer struct {
	store  keys.Lister
	svc    repairKeys
	log    *slog.Logger
	dryRun bool

	batch       []*pgp.Key
	keys        int
	changed     int
	unchanged   int
	unparseable int
	dropped     pgp.Report
	// rejected lists the fingerprints of keys the policy rejects as a
	// whole, by reason.
	rejected map[string][]string
}

func (r *repairer) run(ctx context.Context) error {
	err := r.store.DumpKeys(ctx, func(packets []byte) error {
		r.keys++
		raw, err := pgp.ParseKey(packets)
		if err != nil {
			r.unparseable++
			r.log.Warn("repair: stored key does not parse", "err", err)
			return nil
		}
		out, rep, err := r.svc.Recheck(raw)
		if err != nil {
			reason := pgp.RejectionReason(err)
			r.rejected[reason] = append(r.rejected[reason], fmt.Sprintf("%X", raw.Fingerprint()))
			return nil
		}
		if bytes.Equal(out.Bytes(), packets) {
			r.unchanged++
			return nil
		}
		r.dropped.Add(rep)
		r.changed++
		if r.dryRun {
			return nil
		}
		r.batch = append(r.batch, out)
		if len(r.batch) == repairBatch {
			return r.flush(ctx)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return r.flush(ctx)
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

func (r *repairer) write(w io.Writer, took time.Duration) {
	var b strings.Builder
	rejected := 0
	for _, fps := range r.rejected {
		rejected += len(fps)
	}
	verb := "repaired"
	if r.dryRun {
		verb = "would repair (dry run)"
	}
	fmt.Fprintf(&b, "checked %d keys in %s: %s %d, %d unchanged, %d rejected by the policy, %d unparseable\n",
		r.keys, took.Round(time.Millisecond), verb, r.changed, r.unchanged, rejected, r.unparseable)
	if r.dropped.Total() > 0 {
		fmt.Fprintf(&b, "  packets dropped: %s\n", r.dropped.String())
	}
	reasons := make([]string, 0, len(r.rejected))
	for reason := range r.rejected {
		reasons = append(reasons, reason)
	}
	sort.Strings(reasons)
	for _, reason := range reasons {
		fmt.Fprintf(&b, "  rejected, %s: %d: %s\n", reason, len(r.rejected[reason]), strings.Join(r.rejected[reason], " "))
	}
	if rejected+r.unparseable > 0 {
		b.WriteString("  rejected and unparseable keys stay stored: the store has no path to delete a key\n")
	}
	io.WriteString(w, b.String())
}
