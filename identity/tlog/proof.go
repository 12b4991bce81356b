// proof.go: C2SP tlog-proof, an entry's inclusion proof with the signed
// checkpoint it is against, made by the server from its stored hashes and
// checked by a client offline.

package tlog

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	xtlog "golang.org/x/mod/sumdb/tlog"
)

// ProofHeader is the first line of a C2SP tlog-proof.
const ProofHeader = "c2sp.org/tlog-proof@v1"

// maxProofHashes bounds the hashes of an inclusion or consistency proof
// a parser accepts: two per level of a tree of 2^63 entries.
const maxProofHashes = 2 * 63

// Proof is a C2SP tlog-proof: the inclusion proof of entry Index (from
// 0) in the tree a signed checkpoint commits to, with the checkpoint
// verbatim (its cosignatures too).
type Proof struct {
	// Extra is the optional opaque extra data; nothing in it is
	// authenticated.
	Extra []byte
	// Index is the entry's index (record Seq Index+1).
	Index int64
	// Hashes are the RFC 6962 inclusion proof, from the leaf's sibling
	// up to the root's child.
	Hashes []xtlog.Hash
	// Checkpoint is the signed checkpoint (a signed note).
	Checkpoint []byte
}

// Marshal returns the proof in the tlog-proof text format.
func (p Proof) Marshal() []byte {
	var b bytes.Buffer
	b.WriteString(ProofHeader + "\n")
	if p.Extra != nil {
		b.WriteString("extra " + base64.StdEncoding.EncodeToString(p.Extra) + "\n")
	}
	b.WriteString("index " + strconv.FormatInt(p.Index, 10) + "\n")
	for _, h := range p.Hashes {
		b.WriteString(base64.StdEncoding.EncodeToString(h[:]) + "\n")
	}
	b.WriteString("\n")
	b.Write(p.Checkpoint)
	return b.Bytes()
}

// ParseProof parses a proof in the tlog-proof text format. It checks the
// format only: Check verifies it.
func ParseProof(text []byte) (Proof, error) {
	var p Proof
	head, cp, ok := bytes.Cut(text, []byte("\n\n"))
	if !ok || len(cp) == 0 {
		return p, errors.New("tlog: proof: no checkpoint after the proof lines")
	}
	p.Checkpoint = cp
	lines := strings.Split(string(head), "\n")
	if lines[0] != ProofHeader {
		return p, fmt.Errorf("tlog: proof: first line %q, want %q", clipLine(lines[0]), ProofHeader)
	}
	lines = lines[1:]
	if len(lines) > 0 && strings.HasPrefix(lines[0], "extra ") {
		extra, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(lines[0], "extra "))
		if err != nil {
			return p, errors.New("tlog: proof: bad extra data")
		}
		p.Extra, lines = extra, lines[1:]
	}
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "index ") {
		return p, errors.New("tlog: proof: no index line")
	}
	s := strings.TrimPrefix(lines[0], "index ")
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
		return p, fmt.Errorf("tlog: proof: bad index %q", clipLine(s))
	}
	p.Index, lines = n, lines[1:]
	if len(lines) > maxProofHashes {
		return p, fmt.Errorf("tlog: proof: %d hashes, more than any tree needs", len(lines))
	}
	for _, l := range lines {
		h, err := base64.StdEncoding.DecodeString(l)
		if err != nil || len(h) != xtlog.HashSize {
			return p, errors.New("tlog: proof: bad hash line")
		}
		p.Hashes = append(p.Hashes, xtlog.Hash(h))
	}
	return p, nil
}

func clipLine(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// Check verifies that entry is entry p.Index of the tree cp commits to,
// cp being p's checkpoint as the caller opened it (with OpenCheckpoint or
// a witness policy): the proof's hashes must lead from the entry to cp's
// root.
func (p Proof) Check(cp Checkpoint, entry []byte) error {
	if p.Index < 0 || p.Index >= cp.Size {
		return fmt.Errorf("tlog: entry %d is not in the checkpoint of %d entries", p.Index, cp.Size)
	}
	if err := xtlog.CheckRecord(xtlog.RecordProof(p.Hashes), cp.Size, cp.Root, p.Index, xtlog.RecordHash(entry)); err != nil {
		return fmt.Errorf("tlog: entry %d is not in the checkpoint of %d entries: %w", p.Index, cp.Size, err)
	}
	return nil
}

// storedReader reads stored hashes from r for x/mod's proof code.
func storedReader(ctx context.Context, r TreeReader) xtlog.HashReader {
	return xtlog.HashReaderFunc(func(indexes []int64) ([]xtlog.Hash, error) {
		return r.ReadHashes(ctx, indexes)
	})
}

// Prover makes proofs against one signed checkpoint from a store's
// stored hashes: O(log n) hashes read per proof. Make one with
// NewProver.
type Prover struct {
	r      TreeReader
	size   int64
	signed []byte
}

// ErrNoCheckpoint means no checkpoint is signed yet.
var ErrNoCheckpoint = errors.New("tlog: no checkpoint signed yet")

// NewProver returns a prover against the latest checkpoint r holds, or
// ErrNoCheckpoint.
func NewProver(ctx context.Context, r TreeReader) (*Prover, error) {
	size, signed, err := r.Checkpoint(ctx)
	if err != nil {
		return nil, fmt.Errorf("tlog: prover: %w", err)
	}
	if signed == nil {
		return nil, ErrNoCheckpoint
	}
	return &Prover{r: r, size: size, signed: signed}, nil
}

// Size returns the size of the tree the prover's checkpoint signs.
func (p *Prover) Size() int64 { return p.size }

// Checkpoint returns the signed checkpoint the proofs are against.
func (p *Prover) Checkpoint() []byte { return p.signed }

// Inclusion returns the tlog-proof of entry index (record Seq index+1).
func (p *Prover) Inclusion(ctx context.Context, index int64) (Proof, error) {
	if index < 0 || index >= p.size {
		return Proof{}, fmt.Errorf("tlog: entry %d is not in the checkpoint of %d entries", index, p.size)
	}
	hashes, err := xtlog.ProveRecord(p.size, index, storedReader(ctx, p.r))
	if err != nil {
		return Proof{}, fmt.Errorf("tlog: inclusion proof of entry %d: %w", index, err)
	}
	return Proof{Index: index, Hashes: hashes, Checkpoint: p.signed}, nil
}

// Consistency returns the RFC 6962 consistency proof from the tree of
// old entries to the checkpoint's; none when old is 0 or the size.
func (p *Prover) Consistency(ctx context.Context, old int64) ([]xtlog.Hash, error) {
	if old < 0 || old > p.size {
		return nil, fmt.Errorf("tlog: consistency proof from %d entries: the checkpoint has %d", old, p.size)
	}
	if old == 0 || old == p.size {
		return nil, nil
	}
	hashes, err := xtlog.ProveTree(p.size, old, storedReader(ctx, p.r))
	if err != nil {
		return nil, fmt.Errorf("tlog: consistency proof from %d to %d: %w", old, p.size, err)
	}
	return hashes, nil
}

// CheckConsistency verifies that the tree old signs is a prefix of the
// tree c signs, by the consistency proof hashes (as Prover.Consistency
// makes them).
func CheckConsistency(hashes []xtlog.Hash, old, c Checkpoint) error {
	if old.Size > c.Size {
		return fmt.Errorf("tlog: the log shrank from %d entries to %d", old.Size, c.Size)
	}
	if old.Size == 0 {
		return nil
	}
	if old.Size == c.Size {
		if old.Root != c.Root {
			return fmt.Errorf("tlog: the checkpoint of %d entries is not consistent with the one seen before: same size, another root (the log forked)", c.Size)
		}
		return nil
	}
	if err := xtlog.CheckTree(xtlog.TreeProof(hashes), c.Size, c.Root, old.Size, old.Root); err != nil {
		return fmt.Errorf("tlog: the checkpoint of %d entries is not consistent with the one of %d seen before: %w", c.Size, old.Size, err)
	}
	return nil
}
