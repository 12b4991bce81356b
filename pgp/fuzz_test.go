package pgp

import (
	"bytes"
	"io"
	"testing"
)

// fuzzSeeds are small real keys (two generated ones and two Debian role
// keys), binary and armored.
func fuzzSeeds(f *testing.F) [][]byte {
	a, b := twoKeys(f)
	seeds := [][]byte{a, b, slices2(a, b), armored(f, a, b), oldFormat(f, a)}
	if raw, err := readFileIfPresent("/usr/share/keyrings/debian-role-keys.gpg"); err == nil {
		r := NewReader(bytes.NewReader(raw))
		for i := 0; i < 2; i++ {
			if k, err := r.Next(); err == nil {
				seeds = append(seeds, k.Bytes())
			}
		}
	}
	return seeds
}

// FuzzReader: any input reads, applies, serializes and re-reads without
// panicking, and the policy output is a fixed point.
func FuzzReader(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReaderOptions(bytes.NewReader(data), ReaderOptions{MaxConsecutiveErrors: 20})
		for i := 0; i < 50; i++ {
			k, err := r.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				continue
			}
			_ = k.Describe()
			_ = k.Digest()
			out, _, err := Policy{}.Apply(k)
			if err != nil {
				continue
			}
			again, rep, err := Policy{}.Apply(mustParse(t, out.Bytes()))
			if err != nil || rep.Total() != 0 || !bytes.Equal(again.Bytes(), out.Bytes()) {
				t.Fatalf("policy output is not a fixed point: %v %v", err, rep)
			}
		}
	})
}

// FuzzMerge: merging a key with a mutated copy of itself is commutative and
// idempotent and never panics.
func FuzzMerge(f *testing.F) {
	seeds := fuzzSeeds(f)
	for i, s := range seeds {
		f.Add(s, seeds[(i+1)%len(seeds)], uint16(i*37))
	}
	f.Fuzz(func(t *testing.T, a, b []byte, cut uint16) {
		ka, err := ParseKey(a)
		if err != nil {
			return
		}
		// b's packets grafted onto a's primary, from a cut point on.
		kb, err := ParseKey(b)
		ps := []Packet{ka.Packets()[0]}
		if err == nil {
			bp := kb.Packets()
			ps = append(ps, bp[min(int(cut)%(len(bp)+1), len(bp)):]...)
		}
		other := NewKey(ps)
		ab, _, errAB := Policy{}.Merge(ka, other)
		ba, _, errBA := Policy{}.Merge(other, ka)
		if (errAB == nil) != (errBA == nil) {
			t.Fatalf("errors differ: %v / %v", errAB, errBA)
		}
		if errAB != nil {
			return
		}
		if !bytes.Equal(ab.Bytes(), ba.Bytes()) {
			t.Fatal("merge not commutative")
		}
		if m, _, err := (Policy{}).Merge(ab, ka); err != nil || !bytes.Equal(m.Bytes(), ab.Bytes()) {
			t.Fatalf("merge not idempotent: %v", err)
		}
	})
}
