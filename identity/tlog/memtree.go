// memtree.go: a tree held in memory, which a client builds from the
// entries it fetched to check them against a signed checkpoint.

package tlog

import (
	"fmt"

	xtlog "golang.org/x/mod/sumdb/tlog"
)

// MemTree is a Merkle tree in memory: every stored hash of the entries
// appended so far (two hashes an entry).
type MemTree struct {
	stored []xtlog.Hash
	n      int64
}

var _ xtlog.HashReader = (*MemTree)(nil)

// Append adds the next entry.
func (t *MemTree) Append(entry []byte) error {
	hs, err := xtlog.StoredHashes(t.n, entry, t)
	if err != nil {
		return fmt.Errorf("tlog: entry %d: %w", t.n, err)
	}
	t.stored = append(t.stored, hs...)
	t.n++
	return nil
}

// Size returns how many entries were appended.
func (t *MemTree) Size() int64 { return t.n }

// Root returns the root hash of the tree of the first n entries.
func (t *MemTree) Root(n int64) (xtlog.Hash, error) {
	if n < 0 || n > t.n {
		return xtlog.Hash{}, fmt.Errorf("tlog: tree of %d entries holds %d", n, t.n)
	}
	return treeHash(n, t)
}

// ReadHashes returns stored hashes by index (xtlog.HashReader).
func (t *MemTree) ReadHashes(indexes []int64) ([]xtlog.Hash, error) {
	out := make([]xtlog.Hash, len(indexes))
	for i, idx := range indexes {
		if idx < 0 || idx >= int64(len(t.stored)) {
			return nil, fmt.Errorf("tlog: stored hash %d not held", idx)
		}
		out[i] = t.stored[idx]
	}
	return out, nil
}
