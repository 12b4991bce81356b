// Field arithmetic over Z(P), the prime field SKS reconciliation works in.
//
// Elements are kept as three 64-bit limbs in Montgomery form (x·R mod P with
// R = 2^192), so a multiplication is a handful of 64-bit multiplies and never
// allocates. The tree update does mbar+1 multiplications per node on an
// insert; math/big would allocate on each of them.

package recon

import (
	"math/big"
	"math/bits"
)

// primeDecimal is the SKS modulus P, a 129-bit prime.
const primeDecimal = "530512889551602322505127520352579437339"

// The limbs of P, R mod P, R² mod P and -P⁻¹ mod 2^64, little-endian limbs.
// TestFieldConstants checks them against math/big.
const (
	p0 = 0xc91f85d930a5431b
	p1 = 0x8f1d10e4878b1fdf
	p2 = 0x1

	r0 = 0xa5804f1870d6b547 // R mod P
	r1 = 0x862c9a994c8dd0db

	rr0 = 0x5e931f9f7f2a1e51 // R² mod P
	rr1 = 0x8d2900fcfdf6ca30

	pInv = 0x6320d927c830a0ed // -P⁻¹ mod 2^64
)

// fe is an element of Z(P) in Montgomery form. The zero value is 0.
type fe [3]uint64

var (
	feZero = fe{}
	feOne  = fe{r0, r1, 0}
	feRR   = fe{rr0, rr1, 0}
	feP    = fe{p0, p1, p2}
)

// lessP reports whether the plain (non-Montgomery) limbs x are below P.
func lessP(x *[3]uint64) bool {
	if x[2] != p2 {
		return x[2] < p2
	}
	if x[1] != p1 {
		return x[1] < p1
	}
	return x[0] < p0
}

// subP returns x - P and whether it borrowed (x < P).
func subP(x0, x1, x2 uint64) (uint64, uint64, uint64, uint64) {
	var b uint64
	x0, b = bits.Sub64(x0, p0, 0)
	x1, b = bits.Sub64(x1, p1, b)
	x2, b = bits.Sub64(x2, p2, b)
	return x0, x1, x2, b
}

// feMul returns a·b (Montgomery product a·b·R⁻¹ mod P).
func feMul(a, b fe) fe {
	var t0, t1, t2, t3, t4 uint64
	for i := 0; i < 3; i++ {
		ai := a[i]
		// t += ai * b
		var c, hi, lo, cc uint64
		hi, lo = bits.Mul64(ai, b[0])
		lo, cc = bits.Add64(lo, t0, 0)
		hi += cc
		t0, c = lo, hi
		hi, lo = bits.Mul64(ai, b[1])
		lo, cc = bits.Add64(lo, t1, 0)
		hi += cc
		lo, cc = bits.Add64(lo, c, 0)
		hi += cc
		t1, c = lo, hi
		hi, lo = bits.Mul64(ai, b[2])
		lo, cc = bits.Add64(lo, t2, 0)
		hi += cc
		lo, cc = bits.Add64(lo, c, 0)
		hi += cc
		t2, c = lo, hi
		t3, cc = bits.Add64(t3, c, 0)
		t4 = cc
		// t = (t + m*P) / 2^64
		m := t0 * pInv
		hi, lo = bits.Mul64(m, p0)
		_, cc = bits.Add64(lo, t0, 0)
		c = hi + cc
		hi, lo = bits.Mul64(m, p1)
		lo, cc = bits.Add64(lo, t1, 0)
		hi += cc
		lo, cc = bits.Add64(lo, c, 0)
		hi += cc
		t0, c = lo, hi
		// p2 == 1: m*p2 = m
		lo, cc = bits.Add64(m, t2, 0)
		hi = cc
		lo, cc = bits.Add64(lo, c, 0)
		hi += cc
		t1, c = lo, hi
		t2, cc = bits.Add64(t3, c, 0)
		t3 = t4 + cc
	}
	// t < 2P: subtract P once if needed.
	s0, s1, s2, bo := subP(t0, t1, t2)
	_, bo = bits.Sub64(t3, 0, bo)
	if bo == 0 {
		return fe{s0, s1, s2}
	}
	return fe{t0, t1, t2}
}

// feSquare returns a².
func feSquare(a fe) fe { return feMul(a, a) }

// feAdd returns a+b.
func feAdd(a, b fe) fe {
	var c uint64
	var r fe
	r[0], c = bits.Add64(a[0], b[0], 0)
	r[1], c = bits.Add64(a[1], b[1], c)
	r[2], _ = bits.Add64(a[2], b[2], c) // < 2^130, no overflow
	s0, s1, s2, bo := subP(r[0], r[1], r[2])
	if bo == 0 {
		return fe{s0, s1, s2}
	}
	return r
}

// feSub returns a-b.
func feSub(a, b fe) fe {
	var bo uint64
	var r fe
	r[0], bo = bits.Sub64(a[0], b[0], 0)
	r[1], bo = bits.Sub64(a[1], b[1], bo)
	r[2], bo = bits.Sub64(a[2], b[2], bo)
	if bo != 0 {
		var c uint64
		r[0], c = bits.Add64(r[0], p0, 0)
		r[1], c = bits.Add64(r[1], p1, c)
		r[2], _ = bits.Add64(r[2], p2, c)
	}
	return r
}

// feNeg returns -a.
func feNeg(a fe) fe { return feSub(feZero, a) }

// isZero reports whether a is 0.
func (a fe) isZero() bool { return a[0]|a[1]|a[2] == 0 }

// feInv returns a⁻¹ and false if a is zero. It uses Fermat: a^(P-2).
func feInv(a fe) (fe, bool) {
	if a.isZero() {
		return feZero, false
	}
	e := [3]uint64{p0 - 2, p1, p2} // P-2; p0 ≥ 2 so no borrow
	r := feOne
	for i := 2; i >= 0; i-- {
		top := 63
		if i == 2 {
			top = bits.Len64(e[2]) - 1
		}
		for j := top; j >= 0; j-- {
			r = feSquare(r)
			if e[i]>>uint(j)&1 == 1 {
				r = feMul(r, a)
			}
		}
	}
	return r, true
}

// feFromCanon converts plain limbs (already < P) to Montgomery form.
func feFromCanon(x [3]uint64) fe { return feMul(fe(x), feRR) }

// canon returns the plain value of a as little-endian limbs.
func (a fe) canon() [3]uint64 { return [3]uint64(feMul(a, fe{1, 0, 0})) }

// feFromInt returns the field element for a small signed integer.
func feFromInt(v int64) fe {
	if v >= 0 {
		return feFromCanon([3]uint64{uint64(v), 0, 0})
	}
	return feNeg(feFromCanon([3]uint64{uint64(-v), 0, 0}))
}

// feFromDigest reads a 16-byte digest as a little-endian integer (< 2^128 < P).
func feFromDigest(d *[16]byte) fe {
	var x [3]uint64
	for i := 0; i < 8; i++ {
		x[0] |= uint64(d[i]) << (8 * i)
		x[1] |= uint64(d[8+i]) << (8 * i)
	}
	return feFromCanon(x)
}

// digest returns a's value as a 16-byte little-endian digest, and false if
// the value does not fit in 128 bits (so it cannot be an element).
func (a fe) digest() ([16]byte, bool) {
	var d [16]byte
	x := a.canon()
	if x[2] != 0 {
		return d, false
	}
	for i := 0; i < 8; i++ {
		d[i] = byte(x[0] >> (8 * i))
		d[8+i] = byte(x[1] >> (8 * i))
	}
	return d, true
}

// feFromWire decodes 17 little-endian bytes; false if the value is not below P.
func feFromWire(b *[elementWireSize]byte) (fe, bool) {
	var x [3]uint64
	for i := 0; i < 8; i++ {
		x[0] |= uint64(b[i]) << (8 * i)
		x[1] |= uint64(b[8+i]) << (8 * i)
	}
	x[2] = uint64(b[16])
	if !lessP(&x) {
		return feZero, false
	}
	return feFromCanon(x), true
}

// wire encodes a as 17 little-endian bytes.
func (a fe) wire() [elementWireSize]byte {
	var b [elementWireSize]byte
	x := a.canon()
	for i := 0; i < 8; i++ {
		b[i] = byte(x[0] >> (8 * i))
		b[8+i] = byte(x[1] >> (8 * i))
	}
	b[16] = byte(x[2])
	return b
}

// big returns a's value as a new big.Int.
func (a fe) big() *big.Int {
	x := a.canon()
	v := new(big.Int).SetUint64(x[2])
	v.Lsh(v, 64).Or(v, new(big.Int).SetUint64(x[1]))
	v.Lsh(v, 64).Or(v, new(big.Int).SetUint64(x[0]))
	return v
}

// feFromBig converts v, which must satisfy 0 ≤ v < P; false otherwise.
func feFromBig(v *big.Int) (fe, bool) {
	if v.Sign() < 0 || v.BitLen() > 129 {
		return feZero, false
	}
	var x [3]uint64
	var buf [24]byte
	v.FillBytes(buf[:]) // big-endian, 24 bytes holds 129 bits
	for i := 0; i < 3; i++ {
		for j := 0; j < 8; j++ {
			x[i] |= uint64(buf[23-(8*i+j)]) << (8 * j)
		}
	}
	if !lessP(&x) {
		return feZero, false
	}
	return feFromCanon(x), true
}

// Prime returns the SKS modulus P as a new big.Int.
func Prime() *big.Int {
	p, _ := new(big.Int).SetString(primeDecimal, 10)
	return p
}
