// Polynomials over Z(P): the small amount of algebra interpolation and root
// finding need. Coefficients are stored lowest degree first; a normalized
// polynomial has no trailing zero coefficients, so the zero polynomial is
// the empty slice.

package recon

// poly is a polynomial over Z(P), lowest coefficient first.
type poly []fe

// trim drops trailing zero coefficients.
func (p poly) trim() poly {
	for len(p) > 0 && p[len(p)-1].isZero() {
		p = p[:len(p)-1]
	}
	return p
}

// deg returns the degree of p; -1 for the zero polynomial.
func (p poly) deg() int { return len(p.trim()) - 1 }

// eval returns p(x).
func (p poly) eval(x fe) fe {
	var r fe
	for i := len(p) - 1; i >= 0; i-- {
		r = feAdd(feMul(r, x), p[i])
	}
	return r
}

// polySub returns a-b.
func polySub(a, b poly) poly {
	n := max(len(a), len(b))
	r := make(poly, n)
	for i := range r {
		var x, y fe
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		r[i] = feSub(x, y)
	}
	return r.trim()
}

// polyMul returns a·b.
func polyMul(a, b poly) poly {
	a, b = a.trim(), b.trim()
	if len(a) == 0 || len(b) == 0 {
		return nil
	}
	r := make(poly, len(a)+len(b)-1)
	for i, x := range a {
		for j, y := range b {
			r[i+j] = feAdd(r[i+j], feMul(x, y))
		}
	}
	return r.trim()
}

// polyDivMod returns a = q·b + r with deg r < deg b; ok is false if b is zero.
func polyDivMod(a, b poly) (q, r poly, ok bool) {
	a, b = a.trim(), b.trim()
	if len(b) == 0 {
		return nil, nil, false
	}
	lead, _ := feInv(b[len(b)-1])
	r = append(poly(nil), a...)
	if len(r) < len(b) {
		return nil, r, true
	}
	q = make(poly, len(r)-len(b)+1)
	for i := len(r) - len(b); i >= 0; i-- {
		c := feMul(r[i+len(b)-1], lead)
		q[i] = c
		if c.isZero() {
			continue
		}
		for j, y := range b {
			r[i+j] = feSub(r[i+j], feMul(c, y))
		}
	}
	return q.trim(), r.trim(), true
}

// monic divides p by its leading coefficient; the zero polynomial stays zero.
func (p poly) monic() poly {
	p = p.trim()
	if len(p) == 0 {
		return p
	}
	inv, _ := feInv(p[len(p)-1])
	r := make(poly, len(p))
	for i, c := range p {
		r[i] = feMul(c, inv)
	}
	return r
}

// polyGCD returns the monic greatest common divisor of a and b.
func polyGCD(a, b poly) poly {
	a, b = a.trim(), b.trim()
	for len(b) > 0 {
		_, r, _ := polyDivMod(a, b)
		a, b = b, r
	}
	return a.monic()
}

// polyPowMod returns base^e mod m, e given as little-endian 64-bit limbs.
// It works in fixed buffers with m made monic, so the loop neither
// allocates nor inverts.
func polyPowMod(base poly, e [3]uint64, m poly) poly {
	m = m.monic()
	d := m.deg()
	if d <= 0 {
		return nil
	}
	_, base, _ = polyDivMod(base, m)
	b := make([]fe, d)
	copy(b, base)
	acc := make([]fe, d)
	acc[0] = feOne
	prod := make([]fe, 2*d-1)
	mulmod := func(x, y []fe) {
		clear(prod)
		for i, xi := range x {
			if xi.isZero() {
				continue
			}
			for j, yj := range y {
				prod[i+j] = feAdd(prod[i+j], feMul(xi, yj))
			}
		}
		for i := len(prod) - 1; i >= d; i-- {
			c := prod[i]
			if c.isZero() {
				continue
			}
			for j := 0; j < d; j++ {
				prod[i-d+j] = feSub(prod[i-d+j], feMul(c, m[j]))
			}
		}
		copy(x, prod[:d])
	}
	started := false
	for i := 2; i >= 0; i-- {
		for j := 63; j >= 0; j-- {
			if started {
				mulmod(acc, acc)
			}
			if e[i]>>uint(j)&1 == 1 {
				mulmod(acc, b)
				started = true
			}
		}
	}
	return poly(acc).trim()
}
