// packet.go: OpenPGP packet framing (RFC 9580 section 4.2). Kith reads packet
// headers itself, in both the old and the new format, and hands go-crypto only
// single packet bodies; it always writes new-format headers, as gpg and SKS do.

package pgp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// Tag is an OpenPGP packet tag (RFC 9580 section 5).
type Tag uint8

// The packet tags a transferable public key is made of, and those a keyserver
// must recognise in order to drop them.
const (
	TagSignature     Tag = 2
	TagSecretKey     Tag = 5
	TagPublicKey     Tag = 6
	TagSecretSubkey  Tag = 7
	TagMarker        Tag = 10
	TagTrust         Tag = 12
	TagUserID        Tag = 13
	TagPublicSubkey  Tag = 14
	TagUserAttribute Tag = 17
	TagPadding       Tag = 21
)

// String returns the tag's name as RFC 9580 spells it, or "tag N".
func (t Tag) String() string {
	switch t {
	case TagSignature:
		return "signature"
	case TagSecretKey:
		return "secret-key"
	case TagPublicKey:
		return "public-key"
	case TagSecretSubkey:
		return "secret-subkey"
	case TagMarker:
		return "marker"
	case TagTrust:
		return "trust"
	case TagUserID:
		return "user-id"
	case TagPublicSubkey:
		return "public-subkey"
	case TagUserAttribute:
		return "user-attribute"
	case TagPadding:
		return "padding"
	}
	return fmt.Sprintf("tag %d", uint8(t))
}

// Packet is one OpenPGP packet: its tag and its body exactly as it was read
// (the header is not kept: Kith re-frames every packet with a new-format
// header when it writes).
type Packet struct {
	Tag  Tag
	Body []byte
}

// Framing errors. A ReadError wraps one of these (or ErrKeyTooLarge).
var (
	// ErrBadHeader: a byte where a packet header was expected is not one.
	ErrBadHeader = errors.New("invalid packet header")
	// ErrPartialLength: a partial (streamed) body length, which RFC 9580
	// allows only for data packets, never in a transferable public key.
	ErrPartialLength = errors.New("partial body length in key material")
	// ErrIndeterminateLength: an old-format header with no length.
	ErrIndeterminateLength = errors.New("indeterminate packet length")
	// ErrTruncated: the input ended inside a packet header or body.
	ErrTruncated = errors.New("truncated packet")
	// ErrPacketTooLarge: a packet is larger than the limit that applies to it.
	ErrPacketTooLarge = errors.New("packet too large")
)

// header is a parsed packet header.
type header struct {
	tag     Tag
	hdrLen  int   // bytes of the header itself
	bodyLen int64 // bytes of the body
}

// parseHeader parses the packet header at the start of b. b may be shorter
// than a full header only at the end of the input; then ErrTruncated.
func parseHeader(b []byte) (header, error) {
	if len(b) == 0 {
		return header{}, ErrTruncated
	}
	c := b[0]
	if c&0x80 == 0 {
		return header{}, fmt.Errorf("%w: byte %#02x", ErrBadHeader, c)
	}
	if c&0x40 == 0 { // old format: 10TTTTLL
		h := header{tag: Tag((c >> 2) & 0x0f)}
		switch c & 3 {
		case 0:
			if len(b) < 2 {
				return header{}, ErrTruncated
			}
			h.hdrLen, h.bodyLen = 2, int64(b[1])
		case 1:
			if len(b) < 3 {
				return header{}, ErrTruncated
			}
			h.hdrLen, h.bodyLen = 3, int64(b[1])<<8|int64(b[2])
		case 2:
			if len(b) < 5 {
				return header{}, ErrTruncated
			}
			h.hdrLen = 5
			h.bodyLen = int64(b[1])<<24 | int64(b[2])<<16 | int64(b[3])<<8 | int64(b[4])
		default:
			return header{}, ErrIndeterminateLength
		}
		return h, nil
	}
	h := header{tag: Tag(c & 0x3f)} // new format: 11TTTTTT
	if len(b) < 2 {
		return header{}, ErrTruncated
	}
	switch l := b[1]; {
	case l < 192:
		h.hdrLen, h.bodyLen = 2, int64(l)
	case l < 224:
		if len(b) < 3 {
			return header{}, ErrTruncated
		}
		h.hdrLen, h.bodyLen = 3, (int64(l)-192)<<8+int64(b[2])+192
	case l == 255:
		if len(b) < 6 {
			return header{}, ErrTruncated
		}
		h.hdrLen = 6
		h.bodyLen = int64(b[2])<<24 | int64(b[3])<<16 | int64(b[4])<<8 | int64(b[5])
	default:
		return header{}, ErrPartialLength
	}
	return h, nil
}

// peekHeader parses the next packet header without consuming it. It returns
// io.EOF when the input is exhausted at a packet boundary.
func peekHeader(br *bufio.Reader) (header, error) {
	b, err := br.Peek(6)
	if len(b) == 0 {
		if err == nil || err == io.EOF {
			return header{}, io.EOF
		}
		return header{}, err
	}
	h, herr := parseHeader(b)
	if herr == ErrTruncated && err != nil && err != io.EOF {
		return header{}, err // a real read error, not the end of input
	}
	return h, herr
}

// appendHeader appends a new-format header for a body of n bytes.
func appendHeader(dst []byte, tag Tag, n int) []byte {
	dst = append(dst, 0xc0|byte(tag))
	switch {
	case n < 192:
		return append(dst, byte(n))
	case n < 8384:
		n -= 192
		return append(dst, byte(n>>8)+192, byte(n))
	default:
		return append(dst, 255, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

// headerLen is the length of the new-format header appendHeader writes.
func headerLen(n int) int {
	switch {
	case n < 192:
		return 2
	case n < 8384:
		return 3
	default:
		return 6
	}
}

// appendPacket appends p with a new-format header.
func appendPacket(dst []byte, p Packet) []byte {
	dst = appendHeader(dst, p.Tag, len(p.Body))
	return append(dst, p.Body...)
}
