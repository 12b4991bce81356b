// Root finding over Z(P): recover the elements a characteristic polynomial
// encodes. A polynomial that does not split into distinct linear factors
// cannot be the quotient of two sets' characteristic polynomials, so it is
// reported as a failure rather than partly factored.

package recon

import "math/rand/v2"

// Exponents for the splitting tests, as little-endian limbs.
var (
	expP     = [3]uint64{p0, p1, p2}                                // P
	expHalfP = [3]uint64{0xe48fc2ec9852a18d, 0xc78e887243c58fef, 0} // (P-1)/2
)

// maxSplitTries bounds the random trials of equal-degree splitting. Each
// trial splits a product of n ≥ 2 distinct linear factors with probability
// at least 1/2, so reaching the bound means the input was not such a product.
const maxSplitTries = 64

// roots returns the distinct roots of p when p (nonzero) is a product of
// distinct linear factors over Z(P); ok is false otherwise.
func roots(p poly) (rs []fe, ok bool) {
	p = p.monic()
	switch p.deg() {
	case -1:
		return nil, false
	case 0:
		return nil, true
	case 1:
		return []fe{feNeg(p[0])}, true
	}
	// p splits into distinct linear factors iff p divides x^P - x.
	x := poly{feZero, feOne}
	xp := polyPowMod(x, expP, p)
	_, xmod, _ := polyDivMod(x, p)
	if polySub(xp, xmod).deg() >= 0 {
		return nil, false
	}
	var out []fe
	if !split(p, &out) {
		return nil, false
	}
	return out, true
}

// split appends the roots of p, known to be a product of distinct linear
// factors, to out (Cantor–Zassenhaus equal-degree splitting, degree 1).
func split(p poly, out *[]fe) bool {
	switch p.deg() {
	case 0:
		return true
	case 1:
		*out = append(*out, feNeg(p.monic()[0]))
		return true
	}
	for try := 0; try < maxSplitTries; try++ {
		a := feFromCanon([3]uint64{rand.Uint64(), rand.Uint64() >> 1, 0})
		h := polyPowMod(poly{a, feOne}, expHalfP, p)
		h = polySub(h, poly{feOne})
		g := polyGCD(p, h)
		if d := g.deg(); d > 0 && d < p.deg() {
			q, r, _ := polyDivMod(p, g)
			if r.deg() >= 0 {
				return false
			}
			return split(g, out) && split(q.monic(), out)
		}
	}
	return false
}
