// The prefix tree: every digest the node holds, arranged by leading bits,
// with each node's characteristic-polynomial samples kept current so a
// recon round can compare any subtree with a peer's in O(mbar) numbers.

package recon

import (
	"bytes"
	"context"
	"fmt"
	"math/big"
	"slices"
	"sync"
)

// DigestSource is where a tree's digests come from: it calls fn once for
// each stored key's SKS digest, stopping at the first error fn returns.
type DigestSource interface {
	Digests(ctx context.Context, fn func([16]byte) error) error
}

// Tree is the in-memory SKS prefix tree over 16-byte key digests. Its
// methods are safe for concurrent use: recon sessions read it while change
// notifications write it.
type Tree struct {
	points [numSamples]fe // immutable after creation

	mu   sync.RWMutex
	root *node
}

// node is one prefix-tree node. An interior node has children; a leaf has
// elems. samples[i] is ∏(points[i] - e) over the node's elements.
type node struct {
	samples  [numSamples]fe
	size     int
	children *[numChildren]*node
	elems    [][16]byte
}

// NewTree returns an empty tree.
func NewTree() *Tree {
	t := &Tree{}
	copy(t.points[:], samplePoints(numSamples))
	t.root = t.newNode()
	return t
}

func (t *Tree) newNode() *node {
	n := &node{}
	for i := range n.samples {
		n.samples[i] = feOne
	}
	return n
}

// BuildTree returns a tree holding the given digests (duplicates are
// stored once). It sorts a copy and builds bottom-up, so each digest costs
// mbar+1 multiplications instead of one per level.
func BuildTree(digests [][16]byte) *Tree {
	t := NewTree()
	ds := slices.Clone(digests)
	slices.SortFunc(ds, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	ds = slices.Compact(ds)
	t.root = t.build(ds, 0)
	return t
}

// BuildTreeFrom reads every digest from src and builds a tree of them.
func BuildTreeFrom(ctx context.Context, src DigestSource) (*Tree, error) {
	var ds [][16]byte
	if err := src.Digests(ctx, func(d [16]byte) error {
		ds = append(ds, d)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("recon: reading digests: %w", err)
	}
	return BuildTree(ds), nil
}

// build makes the subtree at depth for sorted, distinct ds sharing its prefix.
// Leaves keep sub-slices of ds (capacity-capped, so appends copy).
func (t *Tree) build(ds [][16]byte, depth int) *node {
	n := t.newNode()
	n.size = len(ds)
	if len(ds) <= splitAbove || depth >= digestBits/bitQuantum {
		n.elems = ds[:len(ds):len(ds)]
		n.samples = t.samplesOf(n.elems)
		return n
	}
	n.children = new([numChildren]*node)
	lo := 0
	for c := 0; c < numChildren; c++ {
		hi := lo
		for hi < len(ds) && childIndex(&ds[hi], depth) == c {
			hi++
		}
		ch := t.build(ds[lo:hi], depth+1)
		n.children[c] = ch
		for i := range n.samples {
			n.samples[i] = feMul(n.samples[i], ch.samples[i])
		}
		lo = hi
	}
	return n
}

// samplesOf computes the samples of a set of digests.
func (t *Tree) samplesOf(ds [][16]byte) [numSamples]fe {
	var s [numSamples]fe
	for i := range s {
		s[i] = feOne
	}
	for i := range ds {
		e := feFromDigest(&ds[i])
		for j := range s {
			s[j] = feMul(s[j], feSub(t.points[j], e))
		}
	}
	return s
}

// Len returns the number of digests in the tree.
func (t *Tree) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.root.size
}

// Has reports whether d is in the tree.
func (t *Tree) Has(d [16]byte) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.has(&d)
}

func (t *Tree) has(d *[16]byte) bool {
	n := t.root
	for depth := 0; n.children != nil; depth++ {
		n = n.children[childIndex(d, depth)]
	}
	return slices.Contains(n.elems, *d)
}

// Insert adds d and reports whether it was not already present.
func (t *Tree) Insert(d [16]byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.insert(&d)
}

func (t *Tree) insert(d *[16]byte) bool {
	if t.has(d) {
		return false
	}
	var diff [numSamples]fe
	e := feFromDigest(d)
	for i := range diff {
		diff[i] = feSub(t.points[i], e)
	}
	n := t.root
	depth := 0
	for {
		n.size++
		for i := range n.samples {
			n.samples[i] = feMul(n.samples[i], diff[i])
		}
		if n.children == nil {
			break
		}
		n = n.children[childIndex(d, depth)]
		depth++
	}
	n.elems = append(n.elems, *d)
	t.split(n, depth)
	return true
}

// split turns leaf n at depth into an interior node if it is too full.
func (t *Tree) split(n *node, depth int) {
	if len(n.elems) <= splitAbove || depth >= digestBits/bitQuantum {
		return
	}
	n.children = new([numChildren]*node)
	for c := range n.children {
		n.children[c] = t.newNode()
	}
	for i := range n.elems {
		d := &n.elems[i]
		ch := n.children[childIndex(d, depth)]
		ch.elems = append(ch.elems, *d)
	}
	n.elems = nil
	for _, ch := range n.children {
		ch.size = len(ch.elems)
		ch.samples = t.samplesOf(ch.elems)
		t.split(ch, depth+1)
	}
}

// Remove deletes d and reports whether it was present.
func (t *Tree) Remove(d [16]byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.remove(&d)
}

func (t *Tree) remove(d *[16]byte) bool {
	path := make([]*node, 0, 16)
	n := t.root
	for depth := 0; ; depth++ {
		path = append(path, n)
		if n.children == nil {
			break
		}
		n = n.children[childIndex(d, depth)]
	}
	i := slices.Index(n.elems, *d)
	if i < 0 {
		return false
	}
	last := len(n.elems) - 1
	n.elems[i] = n.elems[last]
	n.elems = n.elems[:last]
	for _, p := range path {
		p.size--
	}
	// Join the highest interior node that fell below the threshold.
	for k, p := range path {
		if p.children != nil && p.size < joinBelow {
			p.elems = make([][16]byte, 0, p.size)
			p.collect(&p.elems)
			p.children = nil
			path = path[:k+1]
			break
		}
	}
	// Recompute samples bottom-up along the path: no division needed, and
	// an element equal to a sample point (a zero factor) needs no special case.
	for k := len(path) - 1; k >= 0; k-- {
		p := path[k]
		if p.children == nil {
			p.samples = t.samplesOf(p.elems)
			continue
		}
		for i := range p.samples {
			p.samples[i] = feOne
		}
		for _, ch := range p.children {
			for i := range p.samples {
				p.samples[i] = feMul(p.samples[i], ch.samples[i])
			}
		}
	}
	return true
}

// Replace removes old and inserts new as one change, for a key whose
// digest changed on merge. It reports whether the tree changed.
func (t *Tree) Replace(old, new [16]byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old == new {
		return false
	}
	removed := t.remove(&old)
	inserted := t.insert(&new)
	return removed || inserted
}

// collect appends every element under n to out.
func (n *node) collect(out *[][16]byte) {
	if n.children == nil {
		*out = append(*out, n.elems...)
		return
	}
	for _, ch := range n.children {
		ch.collect(out)
	}
}

// Digests returns every digest in the tree, in prefix order of the leaves.
func (t *Tree) Digests() [][16]byte {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([][16]byte, 0, t.root.size)
	t.root.collect(&out)
	return out
}

// NodeInfo describes one prefix-tree node, for diagnostics and tests.
type NodeInfo struct {
	Prefix   Prefix
	Size     int        // number of digests under the node
	Leaf     bool       // the node has no children
	Samples  []*big.Int // ∏(z - e) at each sample point z, in SKS order
	Elements [][16]byte // the node's digests, when it is a leaf
}

// Node returns the node named by prefix, and false if the tree has no such
// node (its prefix lies inside a leaf, or past the tree's depth).
func (t *Tree) Node(prefix Prefix) (NodeInfo, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if prefix.Len()%bitQuantum != 0 {
		return NodeInfo{}, false
	}
	n := t.root
	for depth := 0; depth < prefix.Len()/bitQuantum; depth++ {
		if n.children == nil {
			return NodeInfo{}, false
		}
		n = n.children[prefix.Bit(depth*2)<<1|prefix.Bit(depth*2+1)]
	}
	info := NodeInfo{Prefix: prefix, Size: n.size, Leaf: n.children == nil}
	for _, s := range n.samples {
		info.Samples = append(info.Samples, s.big())
	}
	if info.Leaf {
		info.Elements = slices.Clone(n.elems)
	}
	return info, true
}

// nodeView is what a recon session sees of the tree at one prefix: a real
// node, or the part of a leaf under a longer prefix.
type nodeView struct {
	prefix   Prefix
	size     int
	samples  [numSamples]fe
	leaf     bool       // no children in the tree
	elems    [][16]byte // set when leaf, or when asked for
	children []Prefix   // child prefixes of an interior node
}

// view returns the session's view of prefix p, which must be a whole number
// of bit quanta. Elements are collected when the view is a leaf or holds
// fewer than elemsBelow elements.
func (t *Tree) view(p Prefix, elemsBelow int) nodeView {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n := t.root
	depth := 0
	for ; depth < p.Len()/bitQuantum && n.children != nil; depth++ {
		n = n.children[p.Bit(depth*2)<<1|p.Bit(depth*2+1)]
	}
	v := nodeView{prefix: p}
	if depth*bitQuantum == p.Len() {
		v.size, v.samples = n.size, n.samples
		v.leaf = n.children == nil
		if v.leaf {
			v.elems = slices.Clone(n.elems)
		} else {
			if n.size < elemsBelow {
				v.elems = make([][16]byte, 0, n.size)
				n.collect(&v.elems)
			}
			for c := 0; c < numChildren; c++ {
				v.children = append(v.children, p.Child(c))
			}
		}
		return v
	}
	// p lies inside leaf n: the view is the leaf's elements under p.
	v.leaf = true
	for _, d := range n.elems {
		if p.Contains(d) {
			v.elems = append(v.elems, d)
		}
	}
	v.size = len(v.elems)
	v.samples = t.samplesOf(v.elems)
	return v
}
