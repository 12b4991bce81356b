// tiles.go: the C2SP tlog-tiles layout: tile paths, and entry bundles.

package tlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	xtlog "golang.org/x/mod/sumdb/tlog"
)

// TileHeight is the height of every tile: a full tile holds 256 hashes
// (or entries), as C2SP tlog-tiles fixes.
const TileHeight = 8

// TileWidth is the number of hashes or entries in a full tile.
const TileWidth = 1 << TileHeight

// MaxEntrySize is the largest entry an entry bundle can hold (its length
// prefix is 16 bits).
const MaxEntrySize = 1<<16 - 1

// Tile names one tile: a hash tile at level L (0 for leaf hashes), or
// with Entries an entry bundle; N is its index at that level and W its
// width (TileWidth for a full tile).
type Tile struct {
	Entries bool
	L       int
	N       int64
	W       int
}

// Path returns the tile's path under the log prefix, such as
// "tile/0/x001/234" or "tile/entries/000.p/17".
func (t Tile) Path() string {
	level := strconv.Itoa(t.L)
	if t.Entries {
		level = "entries"
	}
	p := "tile/" + level + "/" + encodeIndex(t.N)
	if t.W != TileWidth {
		p += ".p/" + strconv.Itoa(t.W)
	}
	return p
}

// encodeIndex writes n in groups of three digits, all but the last with
// an "x" before them: 1234067 is x001/x234/067.
func encodeIndex(n int64) string {
	s := fmt.Sprintf("%03d", n%1000)
	for n >= 1000 {
		n /= 1000
		s = fmt.Sprintf("x%03d/", n%1000) + s
	}
	return s
}

// ParseTilePath parses a path as Path writes it.
func ParseTilePath(p string) (Tile, error) {
	bad := fmt.Errorf("tlog: bad tile path %q", p)
	rest, ok := strings.CutPrefix(p, "tile/")
	if !ok {
		return Tile{}, bad
	}
	level, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return Tile{}, bad
	}
	var t Tile
	if level == "entries" {
		t.Entries = true
	} else {
		l, err := strconv.Atoi(level)
		if err != nil || l < 0 || l > 63 || strconv.Itoa(l) != level {
			return Tile{}, bad
		}
		t.L = l
	}
	t.W = TileWidth
	if i := strings.Index(rest, ".p/"); i >= 0 {
		w, err := strconv.Atoi(rest[i+3:])
		if err != nil || w < 1 || w >= TileWidth || strconv.Itoa(w) != rest[i+3:] {
			return Tile{}, bad
		}
		t.W, rest = w, rest[:i]
	}
	parts := strings.Split(rest, "/")
	for i, part := range parts {
		last := i == len(parts)-1
		if !last {
			var ok bool
			if part, ok = strings.CutPrefix(part, "x"); !ok {
				return Tile{}, bad
			}
		}
		if len(part) != 3 || strings.Trim(part, "0123456789") != "" {
			return Tile{}, bad
		}
		d, _ := strconv.Atoi(part)
		if t.N > (1<<62)/1000 {
			return Tile{}, bad
		}
		t.N = t.N*1000 + int64(d)
	}
	if len(parts) > 1 && parts[0] == "x000" {
		return Tile{}, bad // not the one encoding of N
	}
	return t, nil
}

// needs returns the smallest tree size that holds everything in t.
func (t Tile) needs() int64 {
	span := int64(1)
	if !t.Entries {
		span = int64(1) << (TileHeight * t.L)
	}
	return (t.N*TileWidth + int64(t.W)) * span
}

// hashTile is t as the x/mod tile of the same hashes.
func (t Tile) hashTile() xtlog.Tile {
	return xtlog.Tile{H: TileHeight, L: t.L, N: t.N, W: t.W}
}

// AppendEntry appends entry to an entry bundle: its length as a 16-bit
// big-endian number, then its bytes.
func AppendEntry(bundle, entry []byte) ([]byte, error) {
	if len(entry) > MaxEntrySize {
		return nil, fmt.Errorf("tlog: entry of %d bytes, limit %d", len(entry), MaxEntrySize)
	}
	bundle = binary.BigEndian.AppendUint16(bundle, uint16(len(entry)))
	return append(bundle, entry...), nil
}

// SplitEntries splits an entry bundle into its entries.
func SplitEntries(bundle []byte) ([][]byte, error) {
	var out [][]byte
	for len(bundle) > 0 {
		if len(bundle) < 2 {
			return nil, errors.New("tlog: entry bundle: truncated length")
		}
		n := int(binary.BigEndian.Uint16(bundle))
		if len(bundle) < 2+n {
			return nil, errors.New("tlog: entry bundle: truncated entry")
		}
		out = append(out, bundle[2:2+n])
		bundle = bundle[2+n:]
	}
	return out, nil
}
