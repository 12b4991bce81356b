// log.go: integrating appended records into the tree and signing
// checkpoints over them, in the background so that appends stay fast.

package tlog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/mod/sumdb/note"
	xtlog "golang.org/x/mod/sumdb/tlog"
)

// Storage is what the log needs of a store (identity/postgres.Store is
// one): the stored hashes of the tree (indexed as x/mod's
// tlog.StoredHashIndex numbers them), the latest signed checkpoint, and
// the hashes of the evidence records, which are the tree's entries.
type Storage interface {
	// UpdateTree runs fn in one transaction that holds the tree's lock,
	// so that one node at a time integrates; what fn writes commits when
	// it returns nil, and nothing when it returns an error.
	UpdateTree(ctx context.Context, fn func(ctx context.Context, tx TreeTx) error) error
	TreeReader
}

// TreeReader reads the tree as last committed.
type TreeReader interface {
	// Checkpoint returns the latest signed checkpoint and the tree size
	// it covers; size 0 and nil before the first.
	Checkpoint(ctx context.Context) (size int64, signed []byte, err error)
	// ReadHashes returns the stored hashes at indexes, in their order;
	// an error if any is missing.
	ReadHashes(ctx context.Context, indexes []int64) ([]xtlog.Hash, error)
	// RecordHashes returns the Hash of the evidence records with Seq in
	// (after, after+limit], in order (fewer at the log's end).
	RecordHashes(ctx context.Context, after int64, limit int) ([][]byte, error)
}

// TreeTx is one transaction of tree writes.
type TreeTx interface {
	TreeReader
	// WriteHashes stores hashes at the stored-hash indexes from start on.
	WriteHashes(ctx context.Context, start int64, hashes []xtlog.Hash) error
	// SetCheckpoint records the signed checkpoint of the tree of size.
	SetCheckpoint(ctx context.Context, size int64, signed []byte) error
}

// Witnesses asks witnesses to cosign the log's checkpoints
// (identity/tlog/witness.Submitter is one). The log calls it while it
// holds the tree's lock, so that one node at a time submits, in order.
type Witnesses interface {
	// Witness returns signed, the checkpoint c, with the cosignatures the
	// witnesses returned merged in; prev is the size of the checkpoint
	// before it and prove returns the consistency proof from an older
	// size to c. It returns within its own bound, with what arrived.
	Witness(ctx context.Context, signed []byte, c Checkpoint, prev int64, prove func(old int64) (xtlog.TreeProof, error)) []byte
	// Retry reports whether the latest checkpoint, signed, should be
	// submitted again though the log did not grow (a witness's
	// cosignature is missing).
	Retry(signed []byte) bool
}

// Options configures a Log.
type Options struct {
	// Witnesses, when set, cosign each checkpoint before it is
	// published.
	Witnesses Witnesses
	// Interval is the least time between two checkpoints while records
	// arrive; zero means DefaultInterval.
	Interval time.Duration
	// Logger gets integration failures; nil discards them.
	Logger *slog.Logger
}

// DefaultInterval is the default least time between checkpoints.
const DefaultInterval = 2 * time.Second

// batchSize is how many records one transaction integrates at most.
const batchSize = 4096

// Log integrates the evidence log into the tree and signs checkpoints.
type Log struct {
	store    Storage
	key      *Key
	interval time.Duration
	log      *slog.Logger
	kick     chan struct{}
	wit      Witnesses
}

// New returns the log over store signed by key.
func New(store Storage, key *Key, opts Options) *Log {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Log{store: store, key: key, interval: opts.Interval, log: opts.Logger, kick: make(chan struct{}, 1), wit: opts.Witnesses}
}

// Key returns the log's signing key.
func (l *Log) Key() *Key { return l.key }

// Notify tells the log that records were appended; it never blocks. The
// next checkpoint comes at once when the last is older than the
// interval, else when the interval has passed.
func (l *Log) Notify() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Run integrates and signs until ctx ends: at once, after each Notify
// (at most once an interval), and once an interval anyway, which picks up
// what other nodes appended.
func (l *Log) Run(ctx context.Context) {
	tick := time.NewTicker(l.interval)
	defer tick.Stop()
	for {
		last := time.Now()
		if _, err := l.Integrate(ctx); err != nil && ctx.Err() == nil {
			l.log.Error("tlog: integrate", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-l.kick:
			// At most one checkpoint an interval: wait out the rest of
			// this one.
			if wait := l.interval - time.Since(last); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
		}
	}
}

// Integrate adds every record the tree lacks and, when the tree grew or
// its checkpoint is missing or not by this log's key, signs a checkpoint.
// It returns the tree size signed.
func (l *Log) Integrate(ctx context.Context) (int64, error) {
	for {
		var size int64
		var more bool
		err := l.store.UpdateTree(ctx, func(ctx context.Context, tx TreeTx) error {
			var err error
			size, more, err = l.integrate(ctx, tx)
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("tlog: integrate: %w", err)
		}
		if !more {
			return size, nil
		}
	}
}

// integrate adds up to batchSize records; more reports that some remain.
func (l *Log) integrate(ctx context.Context, tx TreeTx) (size int64, more bool, err error) {
	old, signed, err := tx.Checkpoint(ctx)
	if err != nil {
		return 0, false, err
	}
	hashes, err := tx.RecordHashes(ctx, old, batchSize)
	if err != nil {
		return 0, false, err
	}
	if len(hashes) == 0 && signed != nil && l.signedByKey(signed) {
		if l.wit != nil && l.wit.Retry(signed) {
			return old, false, l.rewitness(ctx, tx, old, signed)
		}
		return old, false, nil
	}
	// Hashes written in this transaction are read back from here.
	pending := map[int64]xtlog.Hash{}
	reader := xtlog.HashReaderFunc(func(indexes []int64) ([]xtlog.Hash, error) {
		out := make([]xtlog.Hash, len(indexes))
		var missing []int64
		for _, i := range indexes {
			if _, ok := pending[i]; !ok {
				missing = append(missing, i)
			}
		}
		var got []xtlog.Hash
		if len(missing) > 0 {
			var err error
			if got, err = tx.ReadHashes(ctx, missing); err != nil {
				return nil, err
			}
			if len(got) != len(missing) {
				return nil, fmt.Errorf("%d stored hashes for %d indexes", len(got), len(missing))
			}
		}
		for i, idx := range indexes {
			h, ok := pending[idx]
			if !ok {
				h, got = got[0], got[1:]
			}
			out[i] = h
		}
		return out, nil
	})
	start := xtlog.StoredHashIndex(0, old)
	var all []xtlog.Hash
	for i, rh := range hashes {
		if len(rh) != xtlog.HashSize {
			return 0, false, fmt.Errorf("record %d has a hash of %d bytes", old+int64(i)+1, len(rh))
		}
		n := old + int64(i)
		stored, err := xtlog.StoredHashes(n, rh, reader)
		if err != nil {
			return 0, false, fmt.Errorf("record %d: %w", n+1, err)
		}
		idx := xtlog.StoredHashIndex(0, n)
		for j, h := range stored {
			pending[idx+int64(j)] = h
		}
		all = append(all, stored...)
	}
	size = old + int64(len(hashes))
	if len(all) > 0 {
		if err := tx.WriteHashes(ctx, start, all); err != nil {
			return 0, false, err
		}
	}
	root, err := treeHash(size, reader)
	if err != nil {
		return 0, false, fmt.Errorf("root of %d: %w", size, err)
	}
	note, err := l.key.SignCheckpoint(Checkpoint{Origin: l.key.Name(), Size: size, Root: root})
	if err != nil {
		return 0, false, err
	}
	if l.wit != nil {
		note = l.wit.Witness(ctx, note, Checkpoint{Origin: l.key.Name(), Size: size, Root: root}, old, func(n int64) (xtlog.TreeProof, error) {
			return xtlog.ProveTree(size, n, reader)
		})
	}
	if err := tx.SetCheckpoint(ctx, size, note); err != nil {
		return 0, false, err
	}
	return size, len(hashes) == batchSize, nil
}

// rewitness submits the latest checkpoint, signed, of size, again and
// stores it with the cosignatures that arrived.
func (l *Log) rewitness(ctx context.Context, tx TreeTx, size int64, signed []byte) error {
	c, err := ParseCheckpoint(noteText(signed))
	if err != nil {
		return err
	}
	reader := xtlog.HashReaderFunc(func(indexes []int64) ([]xtlog.Hash, error) { return tx.ReadHashes(ctx, indexes) })
	cosigned := l.wit.Witness(ctx, signed, c, size, func(n int64) (xtlog.TreeProof, error) {
		return xtlog.ProveTree(size, n, reader)
	})
	if bytes.Equal(cosigned, signed) {
		return nil
	}
	return tx.SetCheckpoint(ctx, size, cosigned)
}

// noteText is the text of a signed note (nil if it is not one).
func noteText(signed []byte) []byte {
	text, _, _ := SplitNote(signed)
	return text
}

// treeHash is xtlog.TreeHash, with RFC 6962's hash of the empty tree
// (SHA-256 of nothing) for n = 0.
func treeHash(n int64, r xtlog.HashReader) (xtlog.Hash, error) {
	if n == 0 {
		return xtlog.Hash(sha256.Sum256(nil)), nil
	}
	return xtlog.TreeHash(n, r)
}

// signedByKey reports whether a stored checkpoint verifies with the log's
// key (after the key changed, the tree is signed anew).
func (l *Log) signedByKey(signed []byte) bool {
	v, err := note.NewVerifier(l.key.VerifierKey())
	if err != nil {
		return false
	}
	_, err = note.Open(signed, note.VerifierList(v))
	return err == nil
}

// ErrTileNotFound means a tile lies beyond the signed tree.
var ErrTileNotFound = errors.New("tlog: tile not in the signed tree")

// ReadTile returns the bytes of t as the latest checkpoint's tree has
// them: a hash tile from the stored hashes, an entry bundle from the
// records' hashes. ErrTileNotFound if the tree does not hold it yet.
func ReadTile(ctx context.Context, r TreeReader, t Tile) ([]byte, error) {
	size, _, err := r.Checkpoint(ctx)
	if err != nil {
		return nil, fmt.Errorf("tlog: read tile: %w", err)
	}
	if t.needs() > size {
		return nil, ErrTileNotFound
	}
	if t.Entries {
		hashes, err := r.RecordHashes(ctx, t.N*TileWidth, t.W)
		if err != nil {
			return nil, fmt.Errorf("tlog: read %s: %w", t.Path(), err)
		}
		if len(hashes) != t.W {
			return nil, fmt.Errorf("tlog: read %s: %d records", t.Path(), len(hashes))
		}
		var b []byte
		for _, h := range hashes {
			if b, err = AppendEntry(b, h); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	data, err := xtlog.ReadTileData(t.hashTile(), xtlog.HashReaderFunc(func(indexes []int64) ([]xtlog.Hash, error) {
		return r.ReadHashes(ctx, indexes)
	}))
	if err != nil {
		return nil, fmt.Errorf("tlog: read %s: %w", t.Path(), err)
	}
	return data, nil
}
