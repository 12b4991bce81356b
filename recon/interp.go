// Rational-function interpolation: given the ratio of two sets'
// characteristic polynomials at the sample points, recover the elements in
// which the sets differ (Minsky, Trachtenberg, Zippel, section 3).
//
// For sets A (remote) and B (local), f(z) = χ_A(z)/χ_B(z) = χ_{A∖B}(z)/χ_{B∖A}(z).
// The degree difference of the reduced fraction is δ = |A| - |B|. With m
// points the monic numerator and denominator get degrees
// mA = ⌊(m+δ)/2⌋ and mB = mA-δ, giving a linear system in their
// coefficients. One more point, not used for interpolation, checks the result.

package recon

import "errors"

// errLowMBar says the sets differ in more elements than one node's samples
// can resolve (or the samples are inconsistent); the driver descends.
var errLowMBar = errors.New("recon: difference too large for mbar sample points")

// solveLinear solves the m×n system rows·x = rhs over Z(P), returning one
// solution (free variables set to zero), or false when it is inconsistent.
// rows is modified.
func solveLinear(rows [][]fe, rhs []fe, n int) ([]fe, bool) {
	m := len(rows)
	pivotCol := make([]int, 0, n)
	r := 0
	for c := 0; c < n && r < m; c++ {
		piv := -1
		for i := r; i < m; i++ {
			if !rows[i][c].isZero() {
				piv = i
				break
			}
		}
		if piv < 0 {
			continue
		}
		rows[r], rows[piv] = rows[piv], rows[r]
		rhs[r], rhs[piv] = rhs[piv], rhs[r]
		inv, _ := feInv(rows[r][c])
		for j := c; j < n; j++ {
			rows[r][j] = feMul(rows[r][j], inv)
		}
		rhs[r] = feMul(rhs[r], inv)
		for i := 0; i < m; i++ {
			if i == r || rows[i][c].isZero() {
				continue
			}
			f := rows[i][c]
			for j := c; j < n; j++ {
				rows[i][j] = feSub(rows[i][j], feMul(f, rows[r][j]))
			}
			rhs[i] = feSub(rhs[i], feMul(f, rhs[r]))
		}
		pivotCol = append(pivotCol, c)
		r++
	}
	for i := r; i < m; i++ {
		if !rhs[i].isZero() {
			return nil, false
		}
	}
	x := make([]fe, n)
	for i, c := range pivotCol {
		x[c] = rhs[i]
	}
	return x, true
}

// interpolate finds monic num, den with num(z)/den(z) = values at points,
// deg num - deg den = delta, reduced to lowest terms.
func interpolate(values, points []fe, delta int) (num, den poly, err error) {
	m := len(points)
	if delta > m || -delta > m {
		return nil, nil, errLowMBar
	}
	mA := (m + delta) / 2
	mB := mA - delta
	n := mA + mB
	rows := make([][]fe, m)
	rhs := make([]fe, m)
	for k, z := range points {
		row := make([]fe, n)
		f := values[k]
		pow := feOne
		for j := 0; j < max(mA, mB)+1; j++ {
			if j < mA {
				row[j] = pow
			}
			if j < mB {
				row[mA+j] = feNeg(feMul(f, pow))
			}
			if j == mB {
				rhs[k] = feAdd(rhs[k], feMul(f, pow))
			}
			if j == mA {
				rhs[k] = feSub(rhs[k], pow)
			}
			pow = feMul(pow, z)
		}
		rows[k] = row
	}
	x, ok := solveLinear(rows, rhs, n)
	if !ok {
		return nil, nil, errLowMBar
	}
	num = make(poly, mA+1)
	copy(num, x[:mA])
	num[mA] = feOne
	den = make(poly, mB+1)
	copy(den, x[mA:])
	den[mB] = feOne
	g := polyGCD(num, den)
	if g.deg() > 0 {
		num, _, _ = polyDivMod(num, g)
		den, _, _ = polyDivMod(den, g)
	}
	return num.trim(), den.trim(), nil
}

// samplePoints returns the SKS sample points 0, -1, 1, -2, 2, -3, ...
func samplePoints(n int) []fe {
	pts := make([]fe, n)
	for i := range pts {
		if i%2 == 0 {
			pts[i] = feFromInt(int64(i / 2))
		} else {
			pts[i] = feFromInt(-int64((i + 1) / 2))
		}
	}
	return pts
}

// reconcile returns the elements only the remote side has (which the local
// side lacks) and those only the local side has, from the two sides' sample
// values and sizes at one node. The last point is the check point. It fails
// with errLowMBar rather than ever returning a wrong answer it can detect.
func reconcile(remote, local []fe, remoteSize, localSize int, points []fe) (onlyRemote, onlyLocal []fe, err error) {
	n := len(points)
	if len(remote) != n || len(local) != n || n < 2 {
		return nil, nil, errLowMBar
	}
	values := make([]fe, n)
	for i := range values {
		inv, ok := feInv(local[i])
		if !ok {
			return nil, nil, errLowMBar
		}
		values[i] = feMul(remote[i], inv)
	}
	delta := remoteSize - localSize
	num, den, err := interpolate(values[:n-1], points[:n-1], delta)
	if err != nil {
		return nil, nil, err
	}
	// The check point.
	dz := den.eval(points[n-1])
	inv, ok := feInv(dz)
	if !ok || feMul(num.eval(points[n-1]), inv) != values[n-1] {
		return nil, nil, errLowMBar
	}
	if num.deg()-den.deg() != delta || num.deg() > remoteSize || den.deg() > localSize {
		return nil, nil, errLowMBar
	}
	onlyRemote, ok = roots(num)
	if !ok {
		return nil, nil, errLowMBar
	}
	onlyLocal, ok = roots(den)
	if !ok {
		return nil, nil, errLowMBar
	}
	return onlyRemote, onlyLocal, nil
}
