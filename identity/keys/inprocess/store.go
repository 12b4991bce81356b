// Package inprocess is an in-memory keys.Store, as identity/inprocess is
// for identities and Upspin's key/inprocess for its key server: the same
// semantics as identity/postgres's key store (merge under the key policy,
// the blocklist, tombstones, the outcome of each write, the change
// notifications, what each query selects) without a database, so that
// frontend tests run without PostgreSQL. Nothing survives the process.
//
// It does not own OpenPGP (package pgp: policy, merge, tombstones) or the
// upload path (identity/keys.Service).
package inprocess

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
)

// The store implements the key store.
var _ keys.Store = (*Store)(nil)

// Store is an in-memory keys.Store. It is safe for concurrent use: every
// write holds its lock for the whole batch, so that a batch is
// all-or-nothing as a postgres transaction is.
type Store struct {
	policy pgp.Policy
	now    func() time.Time

	mu      sync.RWMutex
	nextID  int64
	byFP    map[string]*record // primary fingerprint -> key
	blocks  map[string]*blocks // primary fingerprint -> its blocks
	refused map[[16]byte]bool
	// listeners get every change; a listener's channel never blocks a
	// write (see listen).
	listeners map[*listener]bool
}

// record is one stored key.
type record struct {
	id        int64
	key       *pgp.Key
	desc      pgp.Description
	firstSeen time.Time
	modified  time.Time
}

// blocks are the blocks of one fingerprint.
type blocks struct {
	whole, tomb bool
	packets     map[[32]byte]bool
}

// Options configure a Store.
type Options struct {
	// Policy merges keys with the stored ones (zero limits: pgp's
	// defaults), as postgres.Options.Policy does.
	Policy pgp.Policy
	// Now is the clock of FirstSeen, Modified and KeyStats (nil:
	// time.Now).
	Now func() time.Time
}

// New returns an empty Store.
func New(opts Options) *Store {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{policy: opts.Policy, now: opts.Now, byFP: map[string]*record{}, blocks: map[string]*blocks{},
		refused: map[[16]byte]bool{}, listeners: map[*listener]bool{}}
}

// AddKey stores one key, as AddKeys does a batch of one.
func (s *Store) AddKey(ctx context.Context, key *pgp.Key) (keys.Written, error) {
	ws, err := s.AddKeys(ctx, []*pgp.Key{key})
	if err != nil {
		return keys.Written{}, err
	}
	return ws[0], nil
}

// AddKeys merges a batch of keys that passed the key policy into the
// store, all or nothing: keys with the same fingerprint within the batch
// are merged first; a blocked key is refused, a tombstone takes only
// revocations, blocked packets never merge. It returns each key's outcome
// in input order and, when the key was written, its stored form.
func (s *Store) AddKeys(ctx context.Context, batch []*pgp.Key) ([]keys.Written, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("inprocess: add keys: %w", err)
	}
	type pending struct {
		fp      string
		key     *pgp.Key
		change  keys.Change
		reduced bool
		old     [16]byte
		written bool
	}
	byFP := map[string]*pending{}
	var order []*pending
	index := make([]*pending, len(batch))
	for i, k := range batch {
		fp := string(k.Fingerprint())
		if fp == "" {
			return nil, errors.New("inprocess: add keys: a key has no primary key packet")
		}
		if p, ok := byFP[fp]; ok {
			merged, _, err := s.policy.Merge(p.key, k)
			if err != nil {
				return nil, fmt.Errorf("inprocess: merge duplicate %X in batch: %w", fp, err)
			}
			p.key = merged
		} else {
			byFP[fp] = &pending{fp: fp, key: k}
			order = append(order, byFP[fp])
		}
		index[i] = byFP[fp]
	}

	s.mu.Lock()
	policy := s.policy
	policy.Issuers = s.issuersLocked
	policy.Budget = keys.VerifyBudgetOf(ctx)
	next := map[string]*pgp.Key{} // what the batch writes, applied on success
	for _, p := range order {
		tomb := false
		if b := s.blocks[p.fp]; b != nil {
			k, change, reduced, isTomb, err := s.applyBlocks(p.key, b)
			if err != nil {
				s.mu.Unlock()
				return nil, fmt.Errorf("inprocess: add keys: %w", err)
			}
			p.key, p.reduced, tomb = k, reduced, isTomb
			if change == keys.Blocked {
				p.change = change
				continue
			}
		}
		st := s.byFP[p.fp]
		if st == nil {
			p.change = keys.Inserted
			next[p.fp] = p.key
			continue
		}
		p.old = st.key.Digest()
		if p.key.Digest() == p.old {
			p.change = keys.Unchanged
			continue
		}
		var merged *pgp.Key
		var err error
		if tomb {
			merged, err = policy.Tombstone(st.key, p.key)
		} else {
			merged, _, err = policy.Merge(st.key, p.key)
		}
		if err != nil {
			s.mu.Unlock()
			return nil, fmt.Errorf("inprocess: merge %X: %w", p.fp, err)
		}
		if merged.Digest() == p.old {
			p.change = keys.Unchanged
			continue
		}
		p.key, p.change = merged, keys.Updated
		next[p.fp] = merged
	}
	now := s.now()
	var changes []keys.DigestChange
	for _, p := range order {
		k, ok := next[p.fp]
		if !ok {
			continue
		}
		rec := s.byFP[p.fp]
		if rec == nil {
			s.nextID++
			rec = &record{id: s.nextID, firstSeen: now}
			s.byFP[p.fp] = rec
		}
		rec.key, rec.desc, rec.modified = k, k.Describe(), now
		p.written = true
		changes = append(changes, keys.DigestChange{Old: p.old, New: k.Digest(), Fingerprint: []byte(p.fp)})
	}
	s.notifyLocked(changes)
	s.mu.Unlock()

	return keys.WrittenBatch(index, func(p *pending) keys.Outcome {
		return keys.Outcome{Change: p.change, Key: p.key, Written: p.written, Reduced: p.reduced}
	}), nil
}

// applyBlocks reduces k to what b allows: nothing (keys.Blocked), its
// tombstone, or k without its blocked packets.
func (s *Store) applyBlocks(k *pgp.Key, b *blocks) (out *pgp.Key, change keys.Change, reduced, tomb bool, err error) {
	switch {
	case b.whole && !b.tomb:
		return k, keys.Blocked, false, false, nil
	case b.whole:
		t, err := s.policy.Tombstone(k)
		if err != nil {
			return nil, 0, false, false, fmt.Errorf("tombstone %X: %w", k.Fingerprint(), err)
		}
		return t, 0, t.Digest() != k.Digest(), true, nil
	}
	out, removed, err := s.policy.WithoutPackets(k, func(h [32]byte) bool { return b.packets[h] })
	if errors.Is(err, pgp.ErrBlockedAway) {
		return k, keys.Blocked, true, false, nil
	}
	if err != nil {
		return nil, 0, false, false, fmt.Errorf("remove blocked packets of %X: %w", k.Fingerprint(), err)
	}
	return out, 0, removed, false, nil
}

// AddBlock adds b to the blocklist and applies it to the stored key: a
// key blocked whole is deleted (with KeepRevocations, rewritten as its
// tombstone), a blocked packet is taken out of it.
func (s *Store) AddBlock(ctx context.Context, b identity.Block) (identity.BlockOutcome, error) {
	if len(b.Fingerprint) == 0 {
		return "", errors.New("inprocess: add block: no fingerprint")
	}
	if len(b.PacketHash) != 0 && len(b.PacketHash) != 32 {
		return "", fmt.Errorf("inprocess: add block: a packet hash is 32 bytes, not %d", len(b.PacketHash))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fp := string(b.Fingerprint)
	kb := s.blocks[fp]
	if kb == nil {
		kb = &blocks{packets: map[[32]byte]bool{}}
	}
	if b.WholeKey() && kb.whole || !b.WholeKey() && kb.packets[[32]byte(b.PacketHash)] {
		return "", identity.ErrAlreadyBlocked
	}
	if b.WholeKey() {
		kb.whole, kb.tomb = true, b.KeepRevocations
	} else {
		kb.packets[[32]byte(b.PacketHash)] = true
	}
	s.blocks[fp] = kb
	rec := s.byFP[fp]
	if rec == nil {
		return identity.BlockKeyNotStored, nil
	}
	old := rec.key.Digest()
	k, change, reduced, tomb, err := s.applyBlocks(rec.key, kb)
	if err != nil {
		return "", fmt.Errorf("inprocess: add block %X: %w", b.Fingerprint, err)
	}
	switch {
	case change == keys.Blocked:
		delete(s.byFP, fp)
		s.notifyLocked([]keys.DigestChange{{Old: old, Fingerprint: b.Fingerprint}})
		return identity.BlockKeyRemoved, nil
	case !reduced:
		return identity.BlockKeyUnchanged, nil
	}
	rec.key, rec.desc, rec.modified = k, k.Describe(), s.now()
	s.notifyLocked([]keys.DigestChange{{Old: old, New: k.Digest(), Fingerprint: b.Fingerprint}})
	if tomb {
		return identity.BlockKeyTombstoned, nil
	}
	return identity.BlockKeyCleaned, nil
}

// IssuerKeys looks up stored primary keys by 64-bit key ID for
// pgp.Policy.Issuers.
func (s *Store) IssuerKeys(ctx context.Context) pgp.IssuerKeys {
	return func(id uint64) [][]byte {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return s.issuersLocked(id)
	}
}

// issuersLocked is IssuerKeys with s.mu held.
func (s *Store) issuersLocked(id uint64) [][]byte {
	var out [][]byte
	for _, r := range s.sorted() {
		if r.desc.KeyID == id && len(r.key.Packets()) > 0 {
			out = append(out, r.key.Packets()[0].Body)
		}
	}
	return out
}

// sorted returns the stored keys in the order they were first stored;
// s.mu is held.
func (s *Store) sorted() []*record {
	out := make([]*record, 0, len(s.byFP))
	for _, r := range s.byFP {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *record) int { return int(a.id - b.id) })
	return out
}

// FindKeys returns the keys q selects, in the order they were first
// stored, at most q.Limit of them, and whether more matched.
func (s *Store) FindKeys(ctx context.Context, q keys.Query) ([]keys.Stored, bool, error) {
	match, err := matcher(q)
	if err != nil {
		return nil, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var found []*record
	for _, r := range s.sorted() {
		if match(r) {
			found = append(found, r)
		}
	}
	more := false
	if q.Limit > 0 && len(found) > q.Limit {
		found, more = found[:q.Limit], true
	}
	total := 0
	for _, r := range found {
		total += r.key.Size()
	}
	if q.MaxBytes > 0 && total > q.MaxBytes {
		return nil, false, fmt.Errorf("%w: %d bytes, limit %d", keys.ErrAnswerTooLarge, total, q.MaxBytes)
	}
	inline := q.InlineBytes == 0 || q.InlineBytes > 0 && total <= q.InlineBytes
	out := make([]keys.Stored, len(found))
	for i, r := range found {
		out[i] = stored(r, inline, !q.NoUserIDs)
	}
	return out, more, nil
}

// matcher returns the test of q's one selector.
func matcher(q keys.Query) (func(*record) bool, error) {
	switch {
	case len(q.Fingerprint) > 0:
		return func(r *record) bool {
			return bytes.Equal(r.desc.Fingerprint, q.Fingerprint) ||
				slices.ContainsFunc(r.desc.Subkeys, func(sk pgp.Subkey) bool { return bytes.Equal(sk.Fingerprint, q.Fingerprint) })
		}, nil
	case q.KeyID != 0:
		return func(r *record) bool {
			return r.desc.KeyID == q.KeyID || slices.ContainsFunc(r.desc.Subkeys, func(sk pgp.Subkey) bool { return sk.KeyID == q.KeyID })
		}, nil
	case q.HasShortKeyID:
		return func(r *record) bool {
			return r.desc.KeyID32() == q.ShortKeyID ||
				slices.ContainsFunc(r.desc.Subkeys, func(sk pgp.Subkey) bool { return sk.KeyID32() == q.ShortKeyID })
		}, nil
	case q.Email != "":
		email := strings.ToLower(q.Email)
		return func(r *record) bool {
			return slices.ContainsFunc(r.desc.UserIDs, func(u pgp.UserID) bool { return u.Email == email })
		}, nil
	case len(q.Words) > 0:
		return func(r *record) bool {
			return slices.ContainsFunc(r.desc.UserIDs, func(u pgp.UserID) bool {
				have := keys.SearchWords(u.Text)
				for _, w := range q.Words {
					if _, ok := slices.BinarySearch(have, strings.ToLower(w)); !ok {
						return false
					}
				}
				return true
			})
		}, nil
	case len(q.Digests) > 0:
		return func(r *record) bool { return slices.Contains(q.Digests, r.key.Digest()) }, nil
	case len(q.Fingerprints) > 0:
		return func(r *record) bool {
			return slices.ContainsFunc(q.Fingerprints, func(fp []byte) bool { return bytes.Equal(fp, r.desc.Fingerprint) })
		}, nil
	case len(q.PrimaryKeyIDs) > 0:
		return func(r *record) bool { return slices.Contains(q.PrimaryKeyIDs, r.desc.KeyID) }, nil
	}
	return nil, errors.New("inprocess: find keys: empty query")
}

// stored is r as the index shows it, with its packets when inline and
// its user IDs when userIDs.
func stored(r *record, inline, userIDs bool) keys.Stored {
	d := r.desc
	k := keys.Stored{Fingerprint: d.Fingerprint, Digest: r.key.Digest(), Size: r.key.Size(), KeyID: d.KeyID,
		Version: d.Version, Algorithm: int(d.Algorithm), Bits: d.Bits, Curve: d.Curve, Created: d.Created,
		Expires: d.Expires, Revoked: d.Revoked, FirstSeen: r.firstSeen, Modified: r.modified}
	if inline {
		k.Packets = r.key.Bytes()
	}
	if userIDs {
		for _, u := range d.UserIDs {
			k.UserIDs = append(k.UserIDs, keys.StoredUserID{Text: cleanText(u.Text), Email: cleanText(u.Email), Created: u.Created,
				Expires: u.Expires, Revoked: u.Revoked, Primary: u.Primary})
		}
	}
	return k
}

// cleanText is s as the postgres store keeps a user ID's text: valid
// UTF-8 without NUL bytes (the packets keep the original bytes).
func cleanText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// KeysByDigest returns the stored keys with the given SKS digests.
func (s *Store) KeysByDigest(ctx context.Context, digests [][16]byte) ([]keys.Stored, error) {
	found, _, err := s.FindKeys(ctx, keys.Query{Digests: digests})
	return found, err
}

// StreamPackets calls fn with the packets of each key whose primary
// fingerprint is in fps, in the order of fps; keys not held are skipped.
func (s *Store) StreamPackets(ctx context.Context, fps [][]byte, fn func(fingerprint, packets []byte) error) error {
	for _, fp := range fps {
		s.mu.RLock()
		r := s.byFP[string(fp)]
		s.mu.RUnlock()
		if r == nil {
			continue
		}
		if err := fn(r.desc.Fingerprint, r.key.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// ChangedPrefixes returns the first digits hex digits of the primary
// fingerprints of the keys last changed in [from, to), each once, sorted.
func (s *Store) ChangedPrefixes(ctx context.Context, from, to time.Time, digits int) ([]string, error) {
	if digits < 1 {
		return nil, fmt.Errorf("inprocess: changed prefixes: %d digits", digits)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	seen := map[string]bool{}
	var out []string
	for _, r := range s.byFP {
		if r.modified.Before(from) || !r.modified.Before(to) {
			continue
		}
		p := hex.EncodeToString(r.desc.Fingerprint)
		p = p[:min(digits, len(p))]
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}

// CountKeys returns the number of stored keys.
func (s *Store) CountKeys(ctx context.Context) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return int64(len(s.byFP)), nil
}

// KeyStats counts the stored keys and the keys first seen and changed on
// each of the last seven days, newest first.
func (s *Store) KeyStats(ctx context.Context) (keys.Stats, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	now := s.now()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, now.Location())
	st := keys.Stats{Keys: int64(len(s.byFP))}
	for i := range 7 {
		day := today.AddDate(0, 0, -i)
		d := keys.Daily{Day: day}
		for _, r := range s.byFP {
			in := func(t time.Time) bool { return !t.Before(day) && t.Before(day.AddDate(0, 0, 1)) }
			if in(r.firstSeen) {
				d.New++
			} else if in(r.modified) && r.firstSeen.Before(day) {
				d.Updated++
			}
		}
		st.Daily = append(st.Daily, d)
	}
	return st, nil
}

// DumpKeys calls fn with the packets of every stored key, in the order
// keys were first stored, from one snapshot.
func (s *Store) DumpKeys(ctx context.Context, fn func(packets []byte) error) error {
	s.mu.RLock()
	recs := s.sorted()
	s.mu.RUnlock()
	for _, r := range recs {
		if err := fn(r.key.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// Digests calls fn with the SKS digest of every stored key.
func (s *Store) Digests(ctx context.Context, fn func([16]byte) error) error {
	s.mu.RLock()
	recs := s.sorted()
	s.mu.RUnlock()
	for _, r := range recs {
		if err := fn(r.key.Digest()); err != nil {
			return err
		}
	}
	return nil
}

// RefuseDigest remembers that the key with digest d was refused.
func (s *Store) RefuseDigest(ctx context.Context, d [16]byte, fp []byte, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused[d] = true
	return nil
}

// RefusedDigests returns which of ds are remembered as refused.
func (s *Store) RefusedDigests(ctx context.Context, ds [][16]byte) (map[[16]byte]bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[[16]byte]bool{}
	for _, d := range ds {
		if s.refused[d] {
			out[d] = true
		}
	}
	return out, nil
}
