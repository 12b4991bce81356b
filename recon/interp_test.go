package recon

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// samplesOf computes the characteristic polynomial of set at each point.
func samplesOf(set []fe, points []fe) []fe {
	out := make([]fe, len(points))
	for i, z := range points {
		out[i] = feOne
		for _, e := range set {
			out[i] = feMul(out[i], feSub(z, e))
		}
	}
	return out
}

func feSetEqual(a, b []fe) bool {
	cmp := func(x, y fe) int {
		kx, ky := x.canon(), y.canon()
		return slices.Compare(kx[:], ky[:])
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, cmp)
	slices.SortFunc(b, cmp)
	return slices.Equal(a, b)
}

func ints(vs ...int64) []fe {
	out := make([]fe, len(vs))
	for i, v := range vs {
		out[i] = feFromInt(v)
	}
	return out
}

func TestRootsOfSmallPolynomials(t *testing.T) {
	tests := []struct {
		name  string
		roots []fe // the polynomial is ∏(x - r)
		extra poly // multiplied in; makes it not split
		ok    bool
	}{
		{"constant", nil, nil, true},
		{"one root", ints(7), nil, true},
		{"three roots", ints(3, 5, 1000), nil, true},
		{"five roots", ints(-4, 9, 11, 123456789, 42), nil, true},
		{"repeated root", ints(3, 3), nil, false},
		// x² + 1 has no root mod P when P ≡ 3 (mod 4); P mod 4 = 3.
		{"irreducible quadratic factor", ints(5), poly{feOne, feZero, feOne}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := poly{feOne}
			for _, r := range tt.roots {
				p = polyMul(p, poly{feNeg(r), feOne})
			}
			if tt.extra != nil {
				p = polyMul(p, tt.extra)
			}
			got, ok := roots(p)
			if ok != tt.ok {
				t.Fatalf("roots ok = %v, want %v", ok, tt.ok)
			}
			if ok && !feSetEqual(got, tt.roots) {
				t.Fatalf("roots = %v, want %v", got, tt.roots)
			}
		})
	}
}

func TestReconcileHandCheckedCase(t *testing.T) {
	pts := samplePoints(6)
	local := ints(10, 20)
	remote := ints(10, 30, 40)
	onlyRemote, onlyLocal, err := reconcile(samplesOf(remote, pts), samplesOf(local, pts), 3, 2, pts)
	if err != nil {
		t.Fatal(err)
	}
	if !feSetEqual(onlyRemote, ints(30, 40)) || !feSetEqual(onlyLocal, ints(20)) {
		t.Fatalf("got remote-only %v, local-only %v", onlyRemote, onlyLocal)
	}
}

func TestSamplePointsAreSKSOrder(t *testing.T) {
	want := ints(0, -1, 1, -2, 2, -3)
	if got := samplePoints(6); !slices.Equal(got, want) {
		t.Fatalf("points = %v, want %v", got, want)
	}
}

func randElems(r *rand.Rand, n int) []fe {
	out := make([]fe, n)
	for i := range out {
		var d [16]byte
		for j := range d {
			d[j] = byte(r.Uint32())
		}
		out[i] = feFromDigest(&d)
	}
	return out
}

// TestReconcileRecoversOrFails is the property: with up to mbar differences
// in total reconcile recovers them exactly; with more it fails, and it never
// returns a wrong answer.
func TestReconcileRecoversOrFails(t *testing.T) {
	pts := samplePoints(numSamples)
	r := rand.New(rand.NewPCG(7, 8))
	iters := 3000
	if testing.Short() {
		iters = 300
	}
	for i := 0; i < iters; i++ {
		common := randElems(r, r.IntN(40))
		dR, dL := r.IntN(mbar+3), r.IntN(mbar+3)
		onlyR, onlyL := randElems(r, dR), randElems(r, dL)
		remote := append(slices.Clone(common), onlyR...)
		local := append(slices.Clone(common), onlyL...)
		gotR, gotL, err := reconcile(samplesOf(remote, pts), samplesOf(local, pts), len(remote), len(local), pts)
		if dR+dL <= mbar {
			if err != nil {
				t.Fatalf("case %d (%d/%d differences): %v", i, dR, dL, err)
			}
		} else if err != nil {
			if !errors.Is(err, errLowMBar) {
				t.Fatalf("case %d: unexpected error %v", i, err)
			}
			continue
		}
		if !feSetEqual(gotR, onlyR) || !feSetEqual(gotL, onlyL) {
			t.Fatalf("case %d (%d/%d differences): wrong answer", i, dR, dL)
		}
	}
}

func TestReconcileRejectsZeroSample(t *testing.T) {
	pts := samplePoints(numSamples)
	local := samplesOf(ints(0, 5), pts) // element 0 makes the first sample zero
	remote := samplesOf(ints(5), pts)
	if _, _, err := reconcile(remote, local, 1, 2, pts); err == nil {
		t.Fatal("reconcile with a zero local sample succeeded")
	}
}

func BenchmarkReconcileFiveDifferences(b *testing.B) {
	pts := samplePoints(numSamples)
	r := rand.New(rand.NewPCG(9, 9))
	common := randElems(r, 30)
	remote := append(slices.Clone(common), randElems(r, 3)...)
	local := append(slices.Clone(common), randElems(r, 2)...)
	rs, ls := samplesOf(remote, pts), samplesOf(local, pts)
	for b.Loop() {
		if _, _, err := reconcile(rs, ls, len(remote), len(local), pts); err != nil {
			b.Fatal(err)
		}
	}
}
