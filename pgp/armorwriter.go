// armorwriter.go: writing one armored public-key block (RFC 9580 section
// 6.2) as a stream, with a table-driven CRC24: the armor of every op=get
// answer, where go-crypto's bit-at-a-time checksum cost more CPU than the
// rest of the encoding.

package pgp

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"slices"
)

// Armor framing of a public-key block, as gpg and go-crypto write it.
const (
	armorHeader = "-----BEGIN " + publicKeyBlockType + "-----\n\n"
	armorFooter = "-----END " + publicKeyBlockType + "-----"
)

// armorLineInput is how many binary bytes make one 64-column base64 line.
const armorLineInput = 48

// crc24Tables are RFC 9580's CRC24 (generator 0x864CFB) for slicing by
// eight: the checksum is kept in the top 24 bits of a uint32, table k
// advances it over a byte followed by k zero bytes. They are computed
// once and only read.
var crc24Tables = makeCRC24Tables()

func makeCRC24Tables() *[8][256]uint32 {
	var t [8][256]uint32
	for i := range t[0] {
		crc := uint32(i) << 24
		for range 8 {
			if crc&0x80000000 != 0 {
				crc = crc<<1 ^ 0x864cfb00
			} else {
				crc <<= 1
			}
		}
		t[0][i] = crc
	}
	for k := 1; k < 8; k++ {
		for i := range t[k] {
			prev := t[k-1][i]
			t[k][i] = prev<<8 ^ t[0][prev>>24]
		}
	}
	return &t
}

// crc24 continues the checksum crc (24 bits) over p.
func crc24(crc uint32, p []byte) uint32 {
	t := crc24Tables
	c := crc << 8
	for len(p) >= 8 {
		c ^= binary.BigEndian.Uint32(p)
		c = t[7][c>>24] ^ t[6][byte(c>>16)] ^ t[5][byte(c>>8)] ^ t[4][byte(c)] ^
			t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]]
		p = p[8:]
	}
	for _, b := range p {
		c = c<<8 ^ t[0][byte(c>>24)^b]
	}
	return c >> 8
}

// ArmorWriter writes an armored public-key block whose binary body is
// what is written to it: the header line at the first Write (or at
// Close), base64 in 64-column lines, the CRC24 line and the footer line
// at Close. Its output is byte for byte what go-crypto's armor.Encode
// writes without headers; like that, it writes no newline after the
// footer.
type ArmorWriter struct {
	w       io.Writer
	crc     uint32
	begun   bool
	closed  bool
	pending [armorLineInput]byte // input not yet a whole line
	n       int                  // bytes in pending
	line    []byte               // the encoded lines of one Write
	err     error
}

// NewArmorWriter returns an ArmorWriter that writes to w.
func NewArmorWriter(w io.Writer) *ArmorWriter {
	return &ArmorWriter{w: w, crc: 0xb704ce}
}

// Write adds p to the block's body.
func (a *ArmorWriter) Write(p []byte) (int, error) {
	if a.closed {
		return 0, errors.New("pgp: armor: write after close")
	}
	if a.err != nil {
		return 0, a.err
	}
	n := len(p)
	a.crc = crc24(a.crc, p)
	out := slices.Grow(a.line[:0], len(armorHeader)+(a.n+len(p))/armorLineInput*65)
	if !a.begun {
		out = append(out, armorHeader...)
		a.begun = true
	}
	if a.n > 0 {
		c := copy(a.pending[a.n:], p)
		a.n += c
		p = p[c:]
		if a.n < armorLineInput {
			return n, nil
		}
		out = appendArmorLine(out, a.pending[:])
		a.n = 0
	}
	for len(p) >= armorLineInput {
		out = appendArmorLine(out, p[:armorLineInput])
		p = p[armorLineInput:]
	}
	a.n = copy(a.pending[:], p)
	a.line = out
	if len(out) > 0 {
		if _, err := a.w.Write(out); err != nil {
			a.err = err
			return 0, err
		}
	}
	return n, nil
}

// appendArmorLine appends the base64 of in and a newline to out.
func appendArmorLine(out, in []byte) []byte {
	out = base64.StdEncoding.AppendEncode(out, in)
	return append(out, '\n')
}

// Close writes the last line, the checksum and the footer. It does not
// close the underlying writer.
func (a *ArmorWriter) Close() error {
	if a.closed {
		return nil
	}
	if a.err != nil {
		return a.err
	}
	a.closed = true
	out := a.line[:0]
	if !a.begun {
		// An empty body: go-crypto still ends the (absent) last line.
		out = append(out, armorHeader+"\n"...)
	}
	if a.n > 0 {
		out = appendArmorLine(out, a.pending[:a.n])
	}
	sum := [3]byte{byte(a.crc >> 16), byte(a.crc >> 8), byte(a.crc)}
	out = append(out, '=')
	out = base64.StdEncoding.AppendEncode(out, sum[:])
	out = append(out, '\n')
	out = append(out, armorFooter...)
	_, err := a.w.Write(out)
	return err
}
