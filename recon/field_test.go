package recon

import (
	"math/big"
	"math/rand/v2"
	"testing"
)

func TestFieldConstants(t *testing.T) {
	p := Prime()
	if !p.ProbablyPrime(32) || p.BitLen() != 129 {
		t.Fatalf("P = %v is not a 129-bit prime", p)
	}
	if got := feP; got[0] != p0 || fe(limbsOf(p)) != feP {
		t.Fatalf("P limbs = %x, want %x", got, limbsOf(p))
	}
	R := new(big.Int).Lsh(big.NewInt(1), 192)
	if got, want := [3]uint64(feOne), limbsOf(new(big.Int).Mod(R, p)); got != want {
		t.Errorf("R mod P = %x, want %x", got, want)
	}
	rr := new(big.Int).Mul(R, R)
	if got, want := [3]uint64(feRR), limbsOf(rr.Mod(rr, p)); got != want {
		t.Errorf("R² mod P = %x, want %x", got, want)
	}
	two64 := new(big.Int).Lsh(big.NewInt(1), 64)
	inv := new(big.Int).ModInverse(new(big.Int).Mod(p, two64), two64)
	inv.Sub(two64, inv)
	if inv.Uint64() != pInv {
		t.Errorf("-P⁻¹ mod 2^64 = %x, want %x", uint64(pInv), inv.Uint64())
	}
}

func limbsOf(x *big.Int) [3]uint64 {
	var r [3]uint64
	var buf [24]byte
	x.FillBytes(buf[:])
	for i := 0; i < 3; i++ {
		for j := 0; j < 8; j++ {
			r[i] |= uint64(buf[23-(8*i+j)]) << (8 * j)
		}
	}
	return r
}

// randBig returns a random value in [0, P), biased toward edge values.
func randBig(r *rand.Rand, p *big.Int) *big.Int {
	switch r.IntN(8) {
	case 0:
		return big.NewInt(int64(r.IntN(3)))
	case 1:
		return new(big.Int).Sub(p, big.NewInt(int64(1+r.IntN(3))))
	case 2:
		return new(big.Int).Lsh(big.NewInt(1), uint(r.IntN(129))).Mod(new(big.Int).Lsh(big.NewInt(1), uint(r.IntN(129))), p)
	}
	var buf [17]byte
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	v := new(big.Int).SetBytes(buf[:])
	return v.Mod(v, p)
}

func mustFe(t testing.TB, v *big.Int) fe {
	t.Helper()
	x, ok := feFromBig(v)
	if !ok {
		t.Fatalf("feFromBig(%v) failed", v)
	}
	return x
}

func TestFieldOpsMatchBigInt(t *testing.T) {
	p := Prime()
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		a, b := randBig(r, p), randBig(r, p)
		fa, fb := mustFe(t, a), mustFe(t, b)
		if got := fa.big(); got.Cmp(a) != 0 {
			t.Fatalf("round trip %v -> %v", a, got)
		}
		check := func(op string, got fe, want *big.Int) {
			want.Mod(want, p)
			if got.big().Cmp(want) != 0 {
				t.Fatalf("%v %s %v = %v, want %v", a, op, b, got.big(), want)
			}
		}
		check("*", feMul(fa, fb), new(big.Int).Mul(a, b))
		check("+", feAdd(fa, fb), new(big.Int).Add(a, b))
		check("-", feSub(fa, fb), new(big.Int).Sub(a, b))
		if i%10 == 0 {
			inv, ok := feInv(fa)
			if a.Sign() == 0 {
				if ok {
					t.Fatal("inverse of zero reported ok")
				}
				continue
			}
			check("inv", inv, new(big.Int).ModInverse(a, p))
		}
	}
}

func TestFieldWireRoundTrip(t *testing.T) {
	p := Prime()
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 1000; i++ {
		a := mustFe(t, randBig(r, p))
		w := a.wire()
		b, ok := feFromWire(&w)
		if !ok || b != a {
			t.Fatalf("wire round trip of %v failed", a.big())
		}
	}
	var w [elementWireSize]byte
	pw := fe(limbsOf(p)) // plain limbs of P, encoded by hand
	for i := 0; i < 8; i++ {
		w[i] = byte(pw[0] >> (8 * i))
		w[8+i] = byte(pw[1] >> (8 * i))
	}
	w[16] = byte(pw[2])
	if _, ok := feFromWire(&w); ok {
		t.Error("feFromWire accepted P itself")
	}
}

func TestFieldDigestIsLittleEndian(t *testing.T) {
	var d [16]byte
	d[0] = 1
	d[15] = 0x80
	want := new(big.Int).Lsh(big.NewInt(0x80), 120)
	want.Add(want, big.NewInt(1))
	if got := feFromDigest(&d).big(); got.Cmp(want) != 0 {
		t.Fatalf("digest value = %v, want %v", got, want)
	}
	back, ok := feFromDigest(&d).digest()
	if !ok || back != d {
		t.Fatalf("digest round trip = %x, %v", back, ok)
	}
	if _, ok := feFromInt(-1).digest(); ok {
		t.Error("P-1 was accepted as a digest")
	}
}

func BenchmarkFieldMul(b *testing.B) {
	x, y := feFromInt(-12345), feFromInt(987654321)
	for b.Loop() {
		x = feMul(x, y)
	}
	_ = x
}
