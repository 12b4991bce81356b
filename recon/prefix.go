// Prefixes: the bit strings that name prefix-tree nodes. Bits are read
// most-significant bit first from the digest bytes, as SKS does.

package recon

import (
	"fmt"
	"strings"
)

// Prefix is a bit string of at most 128 bits naming a node of the prefix
// tree: the node holds the digests whose leading bits equal it. The zero
// Prefix is the empty string, naming the root.
type Prefix struct {
	n    uint8 // number of bits, ≤ 128
	bits [16]byte
}

// PrefixOf returns the first n bits (0 ≤ n ≤ 128) of digest d.
func PrefixOf(d [16]byte, n int) Prefix {
	n = min(max(n, 0), digestBits)
	p := Prefix{n: uint8(n)}
	copy(p.bits[:], d[:(n+7)/8])
	p.mask()
	return p
}

// ParsePrefix parses a string of '0' and '1' characters, as String prints.
func ParsePrefix(s string) (Prefix, error) {
	if len(s) > digestBits {
		return Prefix{}, fmt.Errorf("recon: prefix of %d bits is longer than %d", len(s), digestBits)
	}
	var p Prefix
	for _, c := range s {
		switch c {
		case '0':
			p = p.appendBit(0)
		case '1':
			p = p.appendBit(1)
		default:
			return Prefix{}, fmt.Errorf("recon: prefix %q: not a bit string", s)
		}
	}
	return p, nil
}

// Len returns the number of bits in p.
func (p Prefix) Len() int { return int(p.n) }

// Bit returns bit i (0 or 1) of p; i must be below p.Len().
func (p Prefix) Bit(i int) int { return int(p.bits[i/8]>>(7-uint(i%8))) & 1 }

// String returns p as '0' and '1' characters; the root prints as "".
func (p Prefix) String() string {
	var b strings.Builder
	for i := 0; i < p.Len(); i++ {
		b.WriteByte(byte('0' + p.Bit(i)))
	}
	return b.String()
}

// Contains reports whether digest d lies under p.
func (p Prefix) Contains(d [16]byte) bool {
	full := int(p.n) / 8
	for i := 0; i < full; i++ {
		if d[i] != p.bits[i] {
			return false
		}
	}
	if r := p.n % 8; r != 0 {
		m := byte(0xff) << (8 - r)
		return d[full]&m == p.bits[full]
	}
	return true
}

// Child returns the prefix of child c (0..3) of the node named by p.
func (p Prefix) Child(c int) Prefix {
	for i := bitQuantum - 1; i >= 0; i-- {
		p = p.appendBit(c >> uint(i) & 1)
	}
	return p
}

// Bytes returns the ⌈Len/8⌉ bytes holding p's bits, unused bits zero.
func (p Prefix) Bytes() []byte { return append([]byte(nil), p.bits[:(int(p.n)+7)/8]...) }

func (p Prefix) appendBit(b int) Prefix {
	if p.n >= digestBits {
		return p
	}
	if b != 0 {
		p.bits[p.n/8] |= 1 << (7 - p.n%8)
	}
	p.n++
	return p
}

// mask clears the bits past p.n.
func (p *Prefix) mask() {
	for i := (int(p.n) + 7) / 8; i < len(p.bits); i++ {
		p.bits[i] = 0
	}
	if r := p.n % 8; r != 0 {
		p.bits[p.n/8] &= byte(0xff) << (8 - r)
	}
}

// childIndex returns which child of a node at the given depth d falls under.
func childIndex(d *[16]byte, depth int) int {
	bit := depth * bitQuantum
	return int(d[bit/8]>>(8-bitQuantum-uint(bit%8))) & (numChildren - 1)
}
