package bulk_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/keys/bulk"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// dumpList is a store holding the given packets.
type dumpList [][]byte

func (d dumpList) Digests(context.Context, func([16]byte) error) error { return nil }

func (d dumpList) DumpKeys(ctx context.Context, fn func([]byte) error) error {
	for _, p := range d {
		if err := fn(p); err != nil {
			return err
		}
	}
	return nil
}

// rechecker answers Recheck from a table by fingerprint: a replacement
// key (changed), an error (rejected), or the key itself (unchanged).
type rechecker struct {
	replace map[string]*pgp.Key
	reject  map[string]error
	batches []int
	failAdd error
}

func (r *rechecker) Recheck(k *pgp.Key) (*pgp.Key, pgp.Report, error) {
	fp := fmt.Sprintf("%X", k.Fingerprint())
	if err := r.reject[fp]; err != nil {
		return nil, pgp.Report{}, err
	}
	if out := r.replace[fp]; out != nil {
		return out, pgp.Report{}, nil
	}
	return k, pgp.Report{}, nil
}

func (r *rechecker) AddKeys(ctx context.Context, batch []*pgp.Key) ([]keys.Change, error) {
	if r.failAdd != nil {
		return nil, r.failAdd
	}
	r.batches = append(r.batches, len(batch))
	return make([]keys.Change, len(batch)), nil
}

// TestRepairWritesBackWhatThePolicyChanges: changed keys are written in
// batches (none in a dry run); rejected, unchanged and unparseable keys
// are counted and never written.
func TestRepairWritesBackWhatThePolicyChanges(t *testing.T) {
	t.Parallel()
	raw, err := keygen.TypicalKeys(4, 11)
	if err != nil {
		t.Fatal(err)
	}
	ks := make([]*pgp.Key, len(raw))
	for i, b := range raw {
		if ks[i], err = pgp.ParseKey(b); err != nil {
			t.Fatal(err)
		}
	}
	fp := func(i int) string { return fmt.Sprintf("%X", ks[i].Fingerprint()) }
	// The stored copies are the keys' own packets, so the policy finds
	// them unchanged unless the table says otherwise.
	store := dumpList{ks[0].Bytes(), ks[1].Bytes(), ks[2].Bytes(), ks[3].Bytes(), []byte("not a key")}
	log := slog.New(slog.DiscardHandler)
	for _, dry := range []bool{false, true} {
		t.Run(fmt.Sprintf("dry run %v", dry), func(t *testing.T) {
			rc := &rechecker{
				replace: map[string]*pgp.Key{fp(0): ks[3], fp(1): ks[3]},
				reject:  map[string]error{fp(2): pgp.ErrNoSelfSignature},
			}
			sum, err := bulk.Repair(context.Background(), store, rc, log, dry)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Keys != 5 || sum.Changed != 2 || sum.Unchanged != 1 || sum.Unparseable != 1 {
				t.Errorf("summary %+v", sum)
			}
			reason := pgp.RejectionReason(pgp.ErrNoSelfSignature)
			if got := sum.Rejected[reason]; len(got) != 1 || got[0] != fp(2) {
				t.Errorf("rejected %v", sum.Rejected)
			}
			want := "[2]"
			if dry {
				want = "[]"
			}
			if got := fmt.Sprint(rc.batches); got != want {
				t.Errorf("batches written %s, want %s", got, want)
			}
		})
	}
	rc := &rechecker{replace: map[string]*pgp.Key{fp(0): ks[3]}, failAdd: errors.New("store down")}
	if _, err := bulk.Repair(context.Background(), store, rc, log, false); err == nil || !strings.Contains(err.Error(), "store down") {
		t.Errorf("a failed write: %v", err)
	}
}
