package recon

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
)

func randDigests(r *rand.Rand, n int) [][16]byte {
	out := make([][16]byte, n)
	for i := range out {
		for j := 0; j < 16; j += 8 {
			v := r.Uint64()
			for k := 0; k < 8; k++ {
				out[i][j+k] = byte(v >> (8 * k))
			}
		}
	}
	return out
}

// checkTree verifies every node's size and samples against its elements and
// the split/join shape rules.
func checkTree(t *testing.T, tr *Tree) {
	t.Helper()
	tr.mu.RLock()
	defer tr.mu.RUnlock()
	var walk func(n *node, p Prefix, depth int)
	walk = func(n *node, p Prefix, depth int) {
		var elems [][16]byte
		n.collect(&elems)
		if len(elems) != n.size {
			t.Fatalf("node %q: size %d, holds %d", p, n.size, len(elems))
		}
		if n.samples != tr.samplesOf(elems) {
			t.Fatalf("node %q: samples do not match its elements", p)
		}
		for _, d := range elems {
			if !p.Contains(d) {
				t.Fatalf("node %q holds %x", p, d)
			}
		}
		if n.children == nil {
			if len(n.elems) > splitAbove {
				t.Fatalf("leaf %q holds %d > %d", p, len(n.elems), splitAbove)
			}
			return
		}
		if depth > 0 && n.size < joinBelow {
			t.Fatalf("interior node %q holds %d < %d", p, n.size, joinBelow)
		}
		for c, ch := range n.children {
			walk(ch, p.Child(c), depth+1)
		}
	}
	walk(tr.root, Prefix{}, 0)
}

func TestTreeInsertRemoveKeepsSamples(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	tr := NewTree()
	ds := randDigests(r, 3000)
	for _, d := range ds {
		if !tr.Insert(d) {
			t.Fatal("Insert of a new digest returned false")
		}
	}
	if tr.Insert(ds[0]) {
		t.Fatal("Insert of a present digest returned true")
	}
	checkTree(t, tr)
	if tr.Len() != len(ds) {
		t.Fatalf("Len = %d, want %d", tr.Len(), len(ds))
	}
	// Remove most, so nodes join back.
	for _, d := range ds[:2900] {
		if !tr.Remove(d) {
			t.Fatal("Remove of a present digest returned false")
		}
	}
	if tr.Remove(ds[0]) {
		t.Fatal("Remove of an absent digest returned true")
	}
	checkTree(t, tr)
	if got := BuildTree(ds[2900:]); got.root.samples != tr.root.samples || got.Len() != tr.Len() {
		t.Fatal("bulk-built tree differs from the incrementally kept one")
	}
}

func TestBuildTreeMatchesInserts(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	ds := randDigests(r, 5000)
	ds = append(ds, ds[:10]...) // duplicates are stored once
	bulk := BuildTree(ds)
	checkTree(t, bulk)
	inc := NewTree()
	for _, d := range ds {
		inc.Insert(d)
	}
	if bulk.Len() != 5000 || inc.Len() != 5000 {
		t.Fatalf("Len = %d and %d, want 5000", bulk.Len(), inc.Len())
	}
	if bulk.root.samples != inc.root.samples {
		t.Fatal("root samples differ")
	}
	// Bulk-built leaves share one backing array: inserting into them must
	// not overwrite a neighbour.
	extra := randDigests(r, 2000)
	for _, d := range extra {
		bulk.Insert(d)
	}
	checkTree(t, bulk)
	for _, d := range ds {
		if !bulk.Has(d) {
			t.Fatalf("digest %x lost after inserts", d)
		}
	}
}

func TestTreeReplace(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	ds := randDigests(r, 200)
	tr := BuildTree(ds[:100])
	if !tr.Replace(ds[0], ds[150]) {
		t.Fatal("Replace reported no change")
	}
	if tr.Has(ds[0]) || !tr.Has(ds[150]) || tr.Len() != 100 {
		t.Fatal("Replace did not swap the digests")
	}
	want := BuildTree(append(slices.Clone(ds[1:100]), ds[150]))
	if want.root.samples != tr.root.samples {
		t.Fatal("samples after Replace differ from a fresh build")
	}
	checkTree(t, tr)
}

func TestTreeNodeLookupByPrefix(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	ds := randDigests(r, 1000)
	tr := BuildTree(ds)
	root, ok := tr.Node(Prefix{})
	if !ok || root.Size != 1000 || root.Leaf || len(root.Samples) != numSamples {
		t.Fatalf("root = %+v, %v", root, ok)
	}
	// Descend along ds[0] to its leaf; every level must hold it.
	var leaf NodeInfo
	for bits := 0; ; bits += bitQuantum {
		n, ok := tr.Node(PrefixOf(ds[0], bits))
		if !ok {
			t.Fatalf("no node at %d bits on the path of a stored digest", bits)
		}
		if n.Leaf {
			leaf = n
			break
		}
	}
	if !slices.Contains(leaf.Elements, ds[0]) {
		t.Fatal("leaf on the digest's path does not hold it")
	}
	if _, ok := tr.Node(PrefixOf(ds[0], leaf.Prefix.Len()+bitQuantum)); ok {
		t.Fatal("Node found a node below a leaf")
	}
	if _, ok := tr.Node(PrefixOf(ds[0], 3)); ok {
		t.Fatal("Node accepted a prefix that is not whole bit quanta")
	}
}

func TestTreeViewInsideLeaf(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	ds := randDigests(r, 30) // one leaf
	tr := BuildTree(ds)
	p := PrefixOf(ds[0], 4)
	v := tr.view(p, 0)
	var want [][16]byte
	for _, d := range ds {
		if p.Contains(d) {
			want = append(want, d)
		}
	}
	if !v.leaf || v.size != len(want) || v.samples != tr.samplesOf(want) {
		t.Fatalf("view inside a leaf = %+v, want %d elements", v, len(want))
	}
}

func TestPrefixBitsAreMSBFirst(t *testing.T) {
	d := [16]byte{0b1011_0000, 0xff}
	p := PrefixOf(d, 4)
	if p.String() != "1011" {
		t.Fatalf("PrefixOf = %q, want 1011", p)
	}
	if childIndex(&d, 0) != 0b10 || childIndex(&d, 1) != 0b11 || childIndex(&d, 4) != 0b11 {
		t.Fatal("childIndex does not read bits MSB first")
	}
	q, err := ParsePrefix("1011")
	if err != nil || q != p {
		t.Fatalf("ParsePrefix = %v, %v", q, err)
	}
	if !p.Contains(d) || p.Contains([16]byte{0b1010_0000}) {
		t.Fatal("Contains is wrong")
	}
	if p.Child(2).String() != "101110" {
		t.Fatalf("Child(2) = %q", p.Child(2))
	}
	if _, err := ParsePrefix("10x"); err == nil {
		t.Fatal("ParsePrefix accepted a non-bit")
	}
}

func TestTreeConcurrentReadersAndWriters(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	ds := randDigests(r, 4000)
	tr := BuildTree(ds[:2000])
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for _, d := range ds[2000:] {
			tr.Insert(d)
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 2000; i++ {
			tr.view(PrefixOf(ds[i], 2*(i%4)), (i%2)*1000)
			tr.Has(ds[i])
		}
	}()
	wg.Wait()
	checkTree(t, tr)
}

type sliceSource [][16]byte

func (s sliceSource) Digests(ctx context.Context, fn func([16]byte) error) error {
	for _, d := range s {
		if err := fn(d); err != nil {
			return err
		}
	}
	return nil
}

type failingSource struct{}

func (failingSource) Digests(context.Context, func([16]byte) error) error {
	return errors.New("store down")
}

func TestBuildTreeFromSource(t *testing.T) {
	ds := randDigests(rand.New(rand.NewPCG(7, 7)), 100)
	tr, err := BuildTreeFrom(context.Background(), sliceSource(ds))
	if err != nil || tr.Len() != 100 {
		t.Fatalf("BuildTreeFrom = %v, %v", tr, err)
	}
	if _, err := BuildTreeFrom(context.Background(), failingSource{}); err == nil {
		t.Fatal("BuildTreeFrom hid the source's error")
	}
}

// BenchmarkTreeMemoryPerDigest reports the heap a built tree of a million
// digests keeps, per digest (heap-B/digest; 16 bytes of it are the digest
// itself), the figure that sizes a node's memory for a large keyserver.
func BenchmarkTreeMemoryPerDigest(b *testing.B) {
	const n = 1_000_000
	ds := randDigests(rand.New(rand.NewPCG(8, 8)), n)
	var perDigest float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tr := BuildTree(ds)
		runtime.GC()
		runtime.ReadMemStats(&after)
		perDigest = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
		runtime.KeepAlive(tr)
	}
	b.ReportMetric(perDigest, "heap-B/digest")
}

func BenchmarkBuild1M(b *testing.B) {
	ds := randDigests(rand.New(rand.NewPCG(9, 9)), 1_000_000)
	for b.Loop() {
		BuildTree(ds)
	}
}

func BenchmarkInsert1M(b *testing.B) {
	ds := randDigests(rand.New(rand.NewPCG(10, 10)), 1_000_000)
	for b.Loop() {
		tr := NewTree()
		for _, d := range ds {
			tr.Insert(d)
		}
	}
}
