// The recon wire format: SKS's message framing and encodings.
//
// All integers are big-endian int32. A message is a length (of the type
// byte plus body), a type byte and a body. A string is a length and bytes; a
// bitstring is a number of bits, a number of bytes and the bytes; a set is a
// count and that many elements of 17 little-endian bytes.
//
// Decoding never trusts a length: every count is checked against the bytes
// actually left in the message before anything is allocated, and the message
// itself is read in chunks as it arrives, so a peer announcing a huge
// message makes a clear error, not a huge allocation.

package recon

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"strconv"
)

// MsgType identifies a recon message on the wire.
type MsgType uint8

// The recon message types, numbered as on the wire.
const (
	MsgReconRqstPoly MsgType = 0  // prefix, size and samples of a node
	MsgReconRqstFull MsgType = 1  // prefix and all elements of a small node
	MsgElements      MsgType = 2  // elements the receiver lacks
	MsgFullElements  MsgType = 3  // all elements of the sender's node
	MsgSyncFail      MsgType = 4  // interpolation failed: descend
	MsgDone          MsgType = 5  // the driver has finished
	MsgFlush         MsgType = 6  // the answerer should send what it has
	MsgError         MsgType = 7  // the sender gives up, with a reason
	MsgDbRqst        MsgType = 8  // SKS internal
	MsgDbRepl        MsgType = 9  // SKS internal
	MsgConfig        MsgType = 10 // handshake settings
)

var msgNames = [...]string{"ReconRqstPoly", "ReconRqstFull", "Elements", "FullElements",
	"SyncFail", "Done", "Flush", "Error", "DbRqst", "DbRepl", "Config"}

// String returns the SKS name of the message type.
func (t MsgType) String() string {
	if int(t) < len(msgNames) {
		return msgNames[t]
	}
	return "MsgType(" + strconv.Itoa(int(t)) + ")"
}

// Message is one recon protocol message. The message types of this package
// are its only implementations.
type Message interface {
	// Type returns the message's wire type.
	Type() MsgType
	appendBody(b []byte) ([]byte, error)
}

// ReconRqstPoly asks the peer to reconcile the node at Prefix from its size
// and sample values.
type ReconRqstPoly struct {
	Prefix  Prefix
	Size    int
	Samples []*big.Int // values mod P, one per sample point, in SKS order
}

// ReconRqstFull sends every element of a small node at Prefix.
type ReconRqstFull struct {
	Prefix   Prefix
	Elements [][16]byte
}

// Elements carries elements the receiver lacks.
type Elements struct{ Elements [][16]byte }

// FullElements carries every element of the sender's node, answering a
// ReconRqstPoly that interpolation could not solve on a small node.
type FullElements struct{ Elements [][16]byte }

// SyncFail says the node could not be reconciled; the driver descends.
type SyncFail struct{}

// Done ends a recon session; the driver sends it.
type Done struct{}

// Flush asks the answerer to send the replies it has queued.
type Flush struct{}

// ErrorMessage is the Error message: the sender gives up, saying why.
type ErrorMessage struct{ Text string }

// DbRqst is an SKS-internal message between its recon and db processes.
type DbRqst struct{ Text string }

// DbRepl is an SKS-internal message between its recon and db processes.
type DbRepl struct{ Text string }

// Config is the handshake message: both sides send it first.
type Config struct {
	Version    string // SKS protocol version, "1.1.6"
	HTTPPort   int    // the sender's HKP port, for /pks/hashquery
	BitQuantum int
	MBar       int
	Filters    string            // comma-separated key filters
	Extra      map[string]string // any other keys, kept verbatim
}

// Type implements Message.
func (*ReconRqstPoly) Type() MsgType { return MsgReconRqstPoly }

// Type implements Message.
func (*ReconRqstFull) Type() MsgType { return MsgReconRqstFull }

// Type implements Message.
func (*Elements) Type() MsgType { return MsgElements }

// Type implements Message.
func (*FullElements) Type() MsgType { return MsgFullElements }

// Type implements Message.
func (*SyncFail) Type() MsgType { return MsgSyncFail }

// Type implements Message.
func (*Done) Type() MsgType { return MsgDone }

// Type implements Message.
func (*Flush) Type() MsgType { return MsgFlush }

// Type implements Message.
func (*ErrorMessage) Type() MsgType { return MsgError }

// Type implements Message.
func (*DbRqst) Type() MsgType { return MsgDbRqst }

// Type implements Message.
func (*DbRepl) Type() MsgType { return MsgDbRepl }

// Type implements Message.
func (*Config) Type() MsgType { return MsgConfig }

// Limits on what a peer may send. A message over MaxMessageSize is refused
// before its body is read.
const (
	// DefaultMaxMessageSize bounds one message: 64 MiB holds a set of almost
	// four million elements, more than one node ever needs to send.
	DefaultMaxMessageSize = 64 << 20
	// maxStringLen bounds a handshake string outside a message.
	maxStringLen = 64 << 10
	// maxSamples bounds the samples in a ReconRqstPoly.
	maxSamples = 64
	// maxConfigPairs bounds the key/value pairs in a Config.
	maxConfigPairs = 256
	// readChunk is how much of a message is allocated ahead of its bytes.
	readChunk = 64 << 10
)

// ErrProtocol is wrapped by every error caused by malformed peer input.
var ErrProtocol = errors.New("recon: protocol error")

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// MarshalMessage returns m framed for the wire: length, type byte, body.
func MarshalMessage(m Message) ([]byte, error) {
	b := make([]byte, 5, 64)
	b[4] = byte(m.Type())
	b, err := m.appendBody(b)
	if err != nil {
		return nil, err
	}
	if len(b)-4 > DefaultMaxMessageSize {
		return nil, fmt.Errorf("recon: %v message of %d bytes exceeds %d", m.Type(), len(b)-4, DefaultMaxMessageSize)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b, nil
}

// WriteMessage writes m to w, framed.
func WriteMessage(w io.Writer, m Message) error {
	b, err := MarshalMessage(m)
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("recon: writing %v: %w", m.Type(), err)
	}
	return nil
}

// ReadMessage reads one framed message of at most maxSize bytes (type byte
// plus body; 0 means DefaultMaxMessageSize) and decodes it.
func ReadMessage(r io.Reader, maxSize int) (Message, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxMessageSize
	}
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("recon: reading message length: %w", err)
	}
	n := int64(int32(binary.BigEndian.Uint32(hdr[:])))
	if n < 1 {
		return nil, protoErr("message length %d", n)
	}
	if n > int64(maxSize) {
		return nil, protoErr("message of %d bytes exceeds the limit of %d", n, maxSize)
	}
	buf := make([]byte, 0, min(n, readChunk))
	for int64(len(buf)) < n {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, int(min(n-int64(len(buf)), int64(cap(buf)))))
		}
		k, err := io.ReadFull(r, buf[len(buf):min(int64(cap(buf)), n)])
		buf = buf[:len(buf)+k]
		if err != nil {
			return nil, fmt.Errorf("recon: reading %d-byte message (got %d): %w", n, len(buf), err)
		}
	}
	return UnmarshalMessage(buf)
}

// UnmarshalMessage decodes a message from its type byte and body (the
// frame without its length).
func UnmarshalMessage(b []byte) (Message, error) {
	if len(b) < 1 {
		return nil, protoErr("empty message")
	}
	d := &decoder{b: b[1:]}
	t := MsgType(b[0])
	var m Message
	switch t {
	case MsgReconRqstPoly:
		p := &ReconRqstPoly{Prefix: d.bitstring(), Size: d.int()}
		if p.Size < 0 {
			d.fail("negative node size %d", p.Size)
		}
		n := d.count(elementWireSize)
		if n > maxSamples {
			d.fail("%d samples", n)
		}
		for i := 0; i < n && d.err == nil; i++ {
			p.Samples = append(p.Samples, d.sample())
		}
		m = p
	case MsgReconRqstFull:
		m = &ReconRqstFull{Prefix: d.bitstring(), Elements: d.set()}
	case MsgElements:
		m = &Elements{Elements: d.set()}
	case MsgFullElements:
		m = &FullElements{Elements: d.set()}
	case MsgSyncFail:
		m = &SyncFail{}
	case MsgDone:
		m = &Done{}
	case MsgFlush:
		m = &Flush{}
	case MsgError:
		m = &ErrorMessage{Text: d.string()}
	case MsgDbRqst:
		m = &DbRqst{Text: d.string()}
	case MsgDbRepl:
		m = &DbRepl{Text: d.string()}
	case MsgConfig:
		m = d.config()
	default:
		return nil, protoErr("unknown message type %d", b[0])
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return nil, fmt.Errorf("decoding %v: %w", t, d.err)
	}
	return m, nil
}

// decoder reads wire encodings from a byte slice; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = protoErr(format, args...)
	}
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail("truncated: need %d bytes, have %d", n, len(d.b))
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int {
	v := d.take(4)
	if v == nil {
		return 0
	}
	return int(int32(binary.BigEndian.Uint32(v)))
}

// count reads a count of items of itemSize bytes each and checks they can
// fit in what is left.
func (d *decoder) count(itemSize int) int {
	n := d.int()
	if d.err != nil {
		return 0
	}
	if n < 0 || n > len(d.b)/itemSize {
		d.fail("truncated: count %d does not fit in %d remaining bytes", n, len(d.b))
		return 0
	}
	return n
}

func (d *decoder) string() string { return string(d.take(d.count(1))) }

func (d *decoder) bitstring() Prefix {
	bits := d.int()
	nbytes := d.int()
	if d.err != nil {
		return Prefix{}
	}
	if bits < 0 || bits > digestBits || nbytes != (bits+7)/8 {
		d.fail("bitstring of %d bits in %d bytes", bits, nbytes)
		return Prefix{}
	}
	if bits%bitQuantum != 0 {
		d.fail("prefix of %d bits is not whole bit quanta", bits)
		return Prefix{}
	}
	var p Prefix
	p.n = uint8(bits)
	copy(p.bits[:], d.take(nbytes))
	p.mask()
	return p
}

func (d *decoder) sample() *big.Int {
	v := d.take(elementWireSize)
	if v == nil {
		return nil
	}
	x, ok := feFromWire((*[elementWireSize]byte)(v))
	if !ok {
		d.fail("sample value not below P")
		return nil
	}
	return x.big()
}

func (d *decoder) set() [][16]byte {
	n := d.count(elementWireSize)
	if d.err != nil {
		return nil
	}
	out := make([][16]byte, n)
	for i := range out {
		v := d.take(elementWireSize)
		if v[16] != 0 {
			d.fail("element %d is not a 128-bit digest", i)
			return nil
		}
		copy(out[i][:], v)
	}
	return out
}

func (d *decoder) config() *Config {
	c := &Config{}
	n := d.count(8)
	if n > maxConfigPairs {
		d.fail("%d config pairs", n)
	}
	num := func(key, v string) int {
		if len(v) == 4 {
			return int(int32(binary.BigEndian.Uint32([]byte(v))))
		}
		if x, err := strconv.Atoi(v); err == nil {
			return x
		}
		d.fail("config %q: not a number", key)
		return 0
	}
	for i := 0; i < n && d.err == nil; i++ {
		k, v := d.string(), d.string()
		switch k {
		case "version":
			c.Version = v
		case "http port":
			c.HTTPPort = num(k, v)
		case "bitquantum":
			c.BitQuantum = num(k, v)
		case "mbar":
			c.MBar = num(k, v)
		case "filters":
			c.Filters = v
		default:
			if c.Extra == nil {
				c.Extra = make(map[string]string)
			}
			c.Extra[k] = v
		}
	}
	return c
}

// Encoding.

func appendInt(b []byte, v int) ([]byte, error) {
	if v < -1<<31 || v > 1<<31-1 {
		return b, fmt.Errorf("recon: %d does not fit in int32", v)
	}
	return binary.BigEndian.AppendUint32(b, uint32(int32(v))), nil
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func appendBitstring(b []byte, p Prefix) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(p.Len()))
	b = binary.BigEndian.AppendUint32(b, uint32((p.Len()+7)/8))
	return append(b, p.bits[:(p.Len()+7)/8]...)
}

func appendSet(b []byte, set [][16]byte) ([]byte, error) {
	b, err := appendInt(b, len(set))
	if err != nil {
		return b, err
	}
	b = slices.Grow(b, len(set)*elementWireSize)
	for i := range set {
		b = append(b, set[i][:]...)
		b = append(b, 0)
	}
	return b, nil
}

func (m *ReconRqstPoly) appendBody(b []byte) ([]byte, error) {
	b = appendBitstring(b, m.Prefix)
	b, err := appendInt(b, m.Size)
	if err != nil {
		return b, err
	}
	b, _ = appendInt(b, len(m.Samples))
	for _, s := range m.Samples {
		x, ok := feFromBig(s)
		if !ok {
			return b, fmt.Errorf("recon: sample %v is not in [0, P)", s)
		}
		w := x.wire()
		b = append(b, w[:]...)
	}
	return b, nil
}

func (m *ReconRqstFull) appendBody(b []byte) ([]byte, error) {
	return appendSet(appendBitstring(b, m.Prefix), m.Elements)
}

func (m *Elements) appendBody(b []byte) ([]byte, error)     { return appendSet(b, m.Elements) }
func (m *FullElements) appendBody(b []byte) ([]byte, error) { return appendSet(b, m.Elements) }
func (*SyncFail) appendBody(b []byte) ([]byte, error)       { return b, nil }
func (*Done) appendBody(b []byte) ([]byte, error)           { return b, nil }
func (*Flush) appendBody(b []byte) ([]byte, error)          { return b, nil }
func (m *ErrorMessage) appendBody(b []byte) ([]byte, error) { return appendString(b, m.Text), nil }
func (m *DbRqst) appendBody(b []byte) ([]byte, error)       { return appendString(b, m.Text), nil }
func (m *DbRepl) appendBody(b []byte) ([]byte, error)       { return appendString(b, m.Text), nil }

func (m *Config) appendBody(b []byte) ([]byte, error) {
	num := func(v int) string {
		var x [4]byte
		binary.BigEndian.PutUint32(x[:], uint32(int32(v)))
		return string(x[:])
	}
	pairs := [][2]string{
		{"version", m.Version},
		{"http port", num(m.HTTPPort)},
		{"bitquantum", num(m.BitQuantum)},
		{"mbar", num(m.MBar)},
		{"filters", m.Filters},
	}
	keys := make([]string, 0, len(m.Extra))
	for k := range m.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		pairs = append(pairs, [2]string{k, m.Extra[k]})
	}
	b, _ = appendInt(b, len(pairs))
	for _, p := range pairs {
		b = appendString(appendString(b, p[0]), p[1])
	}
	return b, nil
}

// writeString and readString carry the handshake's bare strings ("passed",
// "failed" and the reason), which are not framed as messages.
func writeString(w io.Writer, s string) error {
	_, err := w.Write(appendString(nil, s))
	return err
}

func readString(r io.Reader, maxLen int) (string, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return "", err
	}
	n := int64(int32(binary.BigEndian.Uint32(hdr[:])))
	if n < 0 || n > int64(maxLen) {
		return "", protoErr("string of %d bytes (limit %d)", n, maxLen)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}
