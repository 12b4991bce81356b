// links.go: the links an OpenPGP key carries itself (its authentication
// subkeys, the emails of its user IDs), kept on record as the key
// changes. A key-carried record says only "this key carries this link":
// it is appended when the key starts carrying a link and revoked when the
// key stops, and nothing else about an upload (a new certification, a
// changed unhashed area, a re-upload) appends anything.

package identity

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"
)

// keyLinks reads the links an OpenPGP factor's stored key carries at now,
// the one reading of the clock the write it serves stamps its records
// with; other factors carry none.
func (s *Service) keyLinks(ctx context.Context, f Factor, now time.Time) ([]KeyLink, []byte, error) {
	if f.Kind != KindPGP {
		return nil, nil, nil
	}
	key, links, err := s.verifier.PGPKeyLinks(ctx, f.Value, now)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, Refuse(CodeUnknownKey, "no OpenPGP key %s is stored: upload it first", f.Value)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("key links of %s: %w", f, err)
	}
	return links, key, nil
}

// SameLink reports whether a key-carried record holds link l: the same
// method, the same factor (with the same data) and the same expiry. The
// signature bytes do not count: anyone can change a signature's unhashed
// area, and a new self-signature that says the same links nothing new.
func SameLink(e *Evidence, l KeyLink) bool {
	return e.Method == l.Method && e.To.Same(l.To) && bytes.Equal(e.To.Data, l.To.Data) &&
		e.Expires.Equal(TruncateTime(l.Expires))
}

// syncKeyLinks brings the records the key f carries up to date with
// links: a link no active record holds is appended, and an active record
// whose link the key no longer carries is revoked.
func (s *Service) syncKeyLinks(ctx context.Context, tx Tx, f Factor, key []byte, links []KeyLink, now time.Time) error {
	if f.Kind != KindPGP {
		return nil
	}
	recs, err := tx.KeyRecords(ctx, f)
	if err != nil {
		return err
	}
	active := map[int64]*Evidence{}
	for i := range recs {
		if recs[i].Method.KeyCarried() {
			active[recs[i].Seq] = &recs[i]
		}
	}
	for _, e := range recs {
		if e.Method == MethodRevocation {
			delete(active, e.Revokes)
		}
	}
	kept := map[int64]bool{}
	for _, l := range links {
		found := false
		for seq, e := range active {
			if SameLink(e, l) {
				kept[seq], found = true, true
			}
		}
		if found {
			continue
		}
		e := &Evidence{Method: l.Method, From: f, To: l.To, Label: l.Label, Statement: l.Statement,
			Signature: l.Signature, SignerKey: key, Created: now, Expires: l.Expires}
		if err := tx.Append(ctx, e); err != nil {
			return err
		}
	}
	seqs := make([]int64, 0, len(active))
	for seq := range active {
		if !kept[seq] {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	for _, seq := range seqs {
		e := &Evidence{Method: MethodRevocation, From: f, To: active[seq].To, Revokes: seq,
			Label: "the key no longer carries this link", SignerKey: key, Created: now}
		if err := tx.Append(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// SyncKey records what the stored OpenPGP key with fingerprint fp now
// carries (new auth subkeys and user IDs, and the end of those it lost),
// when the key is linked to some identity; otherwise it does nothing. The
// keys Service (identity/keys), the one upload path, calls it (through
// SyncKeys) for every key a write changed, so no upload path can forget
// it; running it again for an unchanged key appends nothing.
func (s *Service) SyncKey(ctx context.Context, fp []byte) error {
	f := PGPFactor(fp)
	named, err := s.store.FactorHandles(ctx, f)
	if err != nil {
		return fmt.Errorf("identity: sync key %s: %w", f.Value, err)
	}
	if len(named) == 0 {
		return nil
	}
	// One reading of the clock both derives the links and stamps their
	// records, so that no record states a link expired at its own time.
	now := s.clock()
	key, links, err := s.verifier.PGPKeyLinks(ctx, f.Value, now)
	if errors.Is(err, ErrNotFound) {
		links = nil // deleted: it carries nothing now
	} else if err != nil {
		return fmt.Errorf("identity: sync key %s: %w", f.Value, err)
	}
	err = s.update(ctx, func(ctx context.Context, tx Tx) error {
		return s.syncKeyLinks(ctx, tx, f, key, links, now)
	})
	if err != nil {
		return fmt.Errorf("identity: sync key %s: %w", f.Value, err)
	}
	return nil
}

// SyncKeys runs SyncKey for those of the changed keys (primary
// fingerprints) that an identity names, asking the store once which
// those are, so that a bulk load pays one query per batch.
func (s *Service) SyncKeys(ctx context.Context, fps [][]byte) error {
	values := make([]string, len(fps))
	byValue := make(map[string][]byte, len(fps))
	for i, fp := range fps {
		values[i] = PGPFactor(fp).Value
		byValue[values[i]] = fp
	}
	linked, err := s.store.LinkedKeys(ctx, values)
	if err != nil {
		return fmt.Errorf("identity: sync keys: %w", err)
	}
	var errs []error
	for _, f := range linked {
		errs = append(errs, s.SyncKey(ctx, byValue[f.Value]))
	}
	return errors.Join(errs...)
}

// SyncLinkedKeys runs SyncKey for every OpenPGP key an identity names,
// so that changes made while no server listened (a `kith load` into an
// idle store, a crash between a key write and its sync) are caught up.
// It returns how many keys it synced.
func (s *Service) SyncLinkedKeys(ctx context.Context) (int, error) {
	fs, err := s.store.LinkedKeys(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("identity: sync linked keys: %w", err)
	}
	for _, f := range fs {
		fp, err := hex.DecodeString(f.Value)
		if err != nil {
			return 0, fmt.Errorf("identity: sync linked keys: %w", err)
		}
		if err := s.SyncKey(ctx, fp); err != nil {
			return 0, err
		}
	}
	return len(fs), nil
}
