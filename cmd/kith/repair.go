package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/kith-keyserver/kith/identity/keys/bulk"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/pgp"
)

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
	st, err := openExistingStore(ctx, cfg, log, postgres.Options{Policy: &policy})
	if err != nil {
		return err
	}
	defer st.Close()

	// A changed key refreshes the identity links it implies, as in serve.
	ks, err := newToolKeyService(st.Store, cfg, policy, log)
	if err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	start := time.Now()
	sum, err := bulk.Repair(ctx, st.Store, ks, log, *dryRun)
	if err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	writeRepairSummary(env.stdout, sum, *dryRun, time.Since(start))
	return nil
}

// writeRepairSummary prints what the repair found and did.
func writeRepairSummary(w io.Writer, r *bulk.RepairSummary, dryRun bool, took time.Duration) {
	var b strings.Builder
	rejected := 0
	for _, fps := range r.Rejected {
		rejected += len(fps)
	}
	verb := "repaired"
	if dryRun {
		verb = "would repair (dry run)"
	}
	fmt.Fprintf(&b, "checked %d keys in %s: %s %d, %d unchanged, %d rejected by the policy, %d unparseable\n",
		r.Keys, took.Round(time.Millisecond), verb, r.Changed, r.Unchanged, rejected, r.Unparseable)
	if r.Dropped.Total() > 0 {
		fmt.Fprintf(&b, "  packets dropped: %s\n", r.Dropped.String())
	}
	reasons := make([]string, 0, len(r.Rejected))
	for reason := range r.Rejected {
		reasons = append(reasons, reason)
	}
	sort.Strings(reasons)
	for _, reason := range reasons {
		fmt.Fprintf(&b, "  rejected, %s: %d: %s\n", reason, len(r.Rejected[reason]), strings.Join(r.Rejected[reason], " "))
	}
	if rejected+r.Unparseable > 0 {
		b.WriteString("  rejected and unparseable keys stay stored: the store has no path to delete a key\n")
	}
	io.WriteString(w, b.String())
}
