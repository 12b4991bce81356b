// client.go: proofs from tiles, for clients that check one record (or
// one new checkpoint) without fetching the whole log.

package tlog

import (
	"context"
	"fmt"

	xtlog "golang.org/x/mod/sumdb/tlog"
)

// Fetch gets a path under a log's prefix ("tile/0/000", say) and returns
// its bytes, or an error when the server does not answer 200.
type Fetch func(ctx context.Context, path string) ([]byte, error)

// tileReader reads hash tiles through a Fetch for x/mod's proof code,
// which checks every tile against the tree's root.
type tileReader struct {
	ctx   context.Context
	fetch Fetch
}

func (r tileReader) Height() int { return TileHeight }

func (r tileReader) ReadTiles(tiles []xtlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		b, err := r.fetch(r.ctx, Tile{L: t.L, N: t.N, W: t.W}.Path())
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

func (r tileReader) SaveTiles([]xtlog.Tile, [][]byte) {}

func hashReader(ctx context.Context, fetch Fetch, c Checkpoint) xtlog.HashReader {
	return xtlog.TileHashReader(xtlog.Tree{N: c.Size, Hash: c.Root}, tileReader{ctx, fetch})
}

// ProveInclusion checks, with the hash tiles fetch gets, that entry is
// entry number index (from 0) of the tree c signs.
func ProveInclusion(ctx context.Context, fetch Fetch, c Checkpoint, index int64, entry []byte) error {
	if index < 0 || index >= c.Size {
		return fmt.Errorf("tlog: entry %d is not in the checkpoint of %d entries", index, c.Size)
	}
	p, err := xtlog.ProveRecord(c.Size, index, hashReader(ctx, fetch, c))
	if err != nil {
		return fmt.Errorf("tlog: inclusion proof of entry %d: %w", index, err)
	}
	if err := xtlog.CheckRecord(p, c.Size, c.Root, index, xtlog.RecordHash(entry)); err != nil {
		return fmt.Errorf("tlog: entry %d is not in the checkpoint of %d entries: %w", index, c.Size, err)
	}
	return nil
}

// ProveConsistency checks, with the hash tiles fetch gets, that the tree
// old signs is a prefix of the tree c signs.
func ProveConsistency(ctx context.Context, fetch Fetch, old, c Checkpoint) error {
	if old.Size > c.Size {
		return fmt.Errorf("tlog: the log shrank from %d entries to %d", old.Size, c.Size)
	}
	if old.Size == 0 || old.Size == c.Size {
		if old.Size == c.Size && old.Root != c.Root {
			return fmt.Errorf("tlog: the checkpoint of %d entries is not consistent with the one seen before: same size, another root (the log forked)", c.Size)
		}
		return nil
	}
	p, err := xtlog.ProveTree(c.Size, old.Size, hashReader(ctx, fetch, c))
	if err != nil {
		return fmt.Errorf("tlog: consistency proof from %d to %d: %w", old.Size, c.Size, err)
	}
	if err := xtlog.CheckTree(p, c.Size, c.Root, old.Size, old.Root); err != nil {
		return fmt.Errorf("tlog: the checkpoint of %d entries is not consistent with the one of %d seen before: %w", c.Size, old.Size, err)
	}
	return nil
}

// LeafHashes returns the leaf hashes (RFC 6962 hashes of the entries) of
// entries [start, end) of the tree c signs, read from the hash tiles
// fetch gets, each tile checked against c's root: a client that fetched
// records from elsewhere compares their hashes with these, and so knows
// them to be the log's entries.
func LeafHashes(ctx context.Context, fetch Fetch, c Checkpoint, start, end int64) ([]xtlog.Hash, error) {
	if start < 0 || start > end || end > c.Size {
		return nil, fmt.Errorf("tlog: entries %d to %d are not in the checkpoint of %d entries", start, end, c.Size)
	}
	indexes := make([]int64, 0, end-start)
	for i := start; i < end; i++ {
		indexes = append(indexes, xtlog.StoredHashIndex(0, i))
	}
	if len(indexes) == 0 {
		return nil, nil
	}
	hashes, err := hashReader(ctx, fetch, c).ReadHashes(indexes)
	if err != nil {
		return nil, fmt.Errorf("tlog: leaf hashes of entries %d to %d: %w", start, end, err)
	}
	return hashes, nil
}

// LeafHash returns the RFC 6962 leaf hash of an entry.
func LeafHash(entry []byte) xtlog.Hash { return xtlog.RecordHash(entry) }
