// armor.go: ASCII armor (RFC 9580 section 6). Reading is streaming and
// accepts any number of public-key armor blocks with text around them; the
// CRC24 line is ignored on input, as RFC 9580 requires. Writing produces one
// block with a CRC24 line, which every gpg version accepts.

package pgp

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
)

// ErrBadArmor: an armor block's body is not valid base64.
var ErrBadArmor = errors.New("invalid armor")

// The armor type of transferable public keys.
const publicKeyBlockType = "PGP PUBLIC KEY BLOCK"

var (
	armorBegin = []byte("-----BEGIN " + publicKeyBlockType + "-----")
	armorEnd   = []byte("-----END " + publicKeyBlockType)
)

// WriteArmored writes keys as one armored public-key block (binary packets
// in each key's order, base64 in 64-column lines, CRC24 line).
func WriteArmored(w io.Writer, keys ...*Key) error {
	aw := NewArmorWriter(w)
	for _, k := range keys {
		if _, err := aw.Write(k.Bytes()); err != nil {
			return fmt.Errorf("pgp: write armor: %w", err)
		}
	}
	if err := aw.Close(); err != nil {
		return fmt.Errorf("pgp: write armor: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("pgp: write armor: %w", err)
	}
	return nil
}

// dearmorer turns a text stream holding armored public-key blocks into the
// concatenation of their binary contents.
type dearmorer struct {
	br      *bufio.Reader
	state   int // outside, headers or body
	out     []byte
	carry   []byte // base64 characters not yet a multiple of 4
	skipped int64  // bytes of text outside blocks since the last block
	maxSkip int64
	scratch []byte
}

const (
	armorOutside = iota
	armorHeaders
	armorBody
)

func newDearmorer(br *bufio.Reader, maxSkip int64) *dearmorer {
	return &dearmorer{br: br, maxSkip: maxSkip}
}

// Read implements io.Reader.
func (d *dearmorer) Read(p []byte) (int, error) {
	for len(d.out) == 0 {
		line, err := d.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// An over-long line: never part of a well-formed block.
			d.skipped += int64(len(line))
			if d.state != armorOutside {
				d.state, d.carry = armorOutside, d.carry[:0]
				return 0, fmt.Errorf("%w: line too long", ErrBadArmor)
			}
			if d.skipped > d.maxSkip {
				return 0, ErrResyncLimit
			}
			continue
		}
		if len(line) > 0 {
			if perr := d.line(bytes.TrimSpace(line)); perr != nil {
				return 0, perr
			}
		}
		if err != nil {
			if len(d.out) > 0 {
				break
			}
			if err == io.EOF && d.state == armorBody {
				d.state = armorOutside
				return 0, fmt.Errorf("%w: missing END line", ErrBadArmor)
			}
			return 0, err
		}
	}
	n := copy(p, d.out)
	d.out = d.out[n:]
	return n, nil
}

// line processes one input line (trimmed).
func (d *dearmorer) line(l []byte) error {
	switch d.state {
	case armorOutside:
		if bytes.Equal(l, armorBegin) {
			d.state, d.skipped = armorHeaders, 0
			return nil
		}
		d.skipped += int64(len(l)) + 1
		if d.skipped > d.maxSkip {
			return ErrResyncLimit
		}
		return nil
	case armorHeaders:
		if len(l) == 0 {
			d.state = armorBody
			return nil
		}
		if bytes.Contains(l, []byte(": ")) {
			return nil
		}
		d.state = armorBody // no blank line after the headers: be lenient
	}
	// armorBody
	if bytes.HasPrefix(l, armorEnd) {
		d.state = armorOutside
		return d.flush(true)
	}
	if len(l) == 5 && l[0] == '=' {
		return nil // CRC24 line
	}
	d.carry = append(d.carry, l...)
	return d.flush(false)
}

// flush decodes the complete 4-character groups in carry (all of it at the
// end of a block).
func (d *dearmorer) flush(final bool) error {
	n := len(d.carry)
	if !final {
		n -= n % 4
	}
	if n == 0 {
		return nil
	}
	enc := d.carry[:n]
	if final && n%4 != 0 {
		enc = append(enc, bytes.Repeat([]byte{'='}, 4-n%4)...)
	}
	need := base64.StdEncoding.DecodedLen(len(enc))
	if cap(d.scratch) < need {
		d.scratch = make([]byte, need)
	}
	m, err := base64.StdEncoding.Decode(d.scratch[:need], enc)
	d.carry = append(d.carry[:0], d.carry[n:]...)
	if err != nil {
		d.state, d.carry = armorOutside, d.carry[:0]
		return fmt.Errorf("%w: %v", ErrBadArmor, err)
	}
	d.out = d.scratch[:m]
	return nil
}
