// reader.go: streaming reader of transferable public keys, one key's packets
// in memory at a time, with resynchronisation after damage.

package pgp

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// Reader errors that end the stream (returned by every later Next).
var (
	// ErrTooManyErrors: ReaderOptions.MaxConsecutiveErrors bad keys in a
	// row; the input is taken to be junk.
	ErrTooManyErrors = errors.New("too many consecutive bad keys")
	// ErrResyncLimit: no plausible public-key packet within
	// ReaderOptions.MaxResyncBytes after an error.
	ErrResyncLimit = errors.New("no public key found within the resync limit")
)

// ReaderOptions bound what a Reader buffers and how long it searches.
// A zero field means its default.
type ReaderOptions struct {
	// MaxKeySize caps the bytes (headers included) of one input key. A
	// larger key is skipped without being buffered and reported as a
	// ReadError wrapping ErrKeyTooLarge. Default 2 MiB: twice the policy's
	// whole-key limit, so a key that the policy can trim (it sheds
	// third-party certifications) still gets through.
	MaxKeySize int64
	// MaxResyncBytes caps how far the Reader scans for the next public-key
	// packet after a framing error. Default 64 MiB.
	MaxResyncBytes int64
	// MaxConsecutiveErrors is how many bad keys in a row end the stream
	// with ErrTooManyErrors. Default 100.
	MaxConsecutiveErrors int
}

// Default reader limits.
const (
	DefaultReaderMaxKeySize           = 2 * DefaultMaxKeySize
	DefaultReaderMaxResyncBytes       = 64 << 20
	DefaultReaderMaxConsecutiveErrors = 100
)

// ReadError reports one bad key in the input. The Reader has skipped it and
// can go on.
type ReadError struct {
	// Index is the 0-based position of the key in the input, counting good
	// and bad keys.
	Index int
	// Offset is the byte offset where the key starts (for armored input:
	// in the decoded binary stream).
	Offset int64
	// Err says what was wrong (ErrTruncated, ErrBadHeader,
	// ErrPartialLength, ErrPacketTooLarge, ErrKeyTooLarge, ErrNotPublicKey, ...).
	Err error
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("pgp: key %d at offset %d: %v", e.Index, e.Offset, e.Err)
}

// Unwrap returns the underlying error.
func (e *ReadError) Unwrap() error { return e.Err }

// Reader reads transferable public keys from binary or ASCII-armored input
// (detected from the first byte; armored input may hold several armor blocks
// and text between them).
type Reader struct {
	src    io.Reader
	opts   ReaderOptions
	br     *bufio.Reader
	off    int64 // bytes consumed from the (decoded) stream
	index  int   // keys seen
	errs   int   // consecutive bad keys
	errOff int64 // offset where the last bad key started
	resync bool  // the next Next must first scan for a key
	fatal  error
}

// NewReader returns a Reader with the default limits.
func NewReader(r io.Reader) *Reader { return NewReaderOptions(r, ReaderOptions{}) }

// NewReaderOptions returns a Reader with the given limits.
func NewReaderOptions(r io.Reader, opts ReaderOptions) *Reader {
	if opts.MaxKeySize <= 0 {
		opts.MaxKeySize = DefaultReaderMaxKeySize
	}
	if opts.MaxResyncBytes <= 0 {
		opts.MaxResyncBytes = DefaultReaderMaxResyncBytes
	}
	if opts.MaxConsecutiveErrors <= 0 {
		opts.MaxConsecutiveErrors = DefaultReaderMaxConsecutiveErrors
	}
	return &Reader{src: r, opts: opts}
}

// Next returns the next key, exactly as read (see Key). At the end of the
// input it returns io.EOF. A bad key yields a *ReadError and the Reader
// resynchronises on the next call; any other error (an I/O error,
// ErrTooManyErrors, ErrResyncLimit) ends the stream.
func (r *Reader) Next() (*Key, error) {
	if r.fatal != nil {
		return nil, r.fatal
	}
	if r.br == nil {
		r.init()
	}
	if r.resync {
		if err := r.skipToKey(); err != nil {
			return nil, r.end(err)
		}
		r.resync = false
	}
	start := r.off
	h, err := peekHeader(r.br)
	if err == io.EOF {
		return nil, r.end(io.EOF)
	}
	if err != nil {
		if streamError(err) {
			return nil, r.end(err)
		}
		return nil, r.bad(start, err, true)
	}
	if h.tag != TagPublicKey {
		// Skip this block (e.g. a secret key) packet by packet; scan bytes
		// only if its framing is broken.
		ferr := r.skipPackets()
		if ferr != nil && streamError(ferr) {
			return nil, r.end(ferr)
		}
		return nil, r.bad(start, fmt.Errorf("%w: block starts with a %v packet", ErrNotPublicKey, h.tag), ferr != nil)
	}
	k, err, framing := r.readKey()
	if err != nil {
		if streamError(err) {
			return nil, r.end(err)
		}
		return nil, r.bad(start, err, framing)
	}
	r.index++
	if !framing {
		// Only a key that ends cleanly (at the next key or the end of the
		// input) proves the stream is back in step.
		r.errs = 0
	}
	return k, nil
}

// streamError reports whether err ends the stream (an I/O error or a
// reader limit) rather than spoiling one key.
func streamError(err error) bool {
	for _, e := range []error{ErrTruncated, ErrBadHeader, ErrPartialLength, ErrIndeterminateLength,
		ErrPacketTooLarge, ErrKeyTooLarge, ErrNotPublicKey, ErrBadArmor} {
		if errors.Is(err, e) {
			return false
		}
	}
	return true
}

// init detects the input format.
func (r *Reader) init() {
	size := readBufferSize(r.src)
	br := bufio.NewReaderSize(r.src, size)
	b, _ := br.Peek(1)
	if len(b) == 1 && b[0]&0x80 == 0 {
		br = bufio.NewReaderSize(newDearmorer(br, r.opts.MaxResyncBytes), size)
	}
	r.br = br
}

// readBufferSize is the size of a Reader's buffers: 64 KiB, or less for
// an input that says it is shorter (a bytes.Reader: an upload, a stored
// key), but never under 8 KiB, above the most any read peeks at once
// (skipToKey's 4 KiB). Two 64 KiB buffers for a 3 KB upload were most of
// what an upload allocated.
func readBufferSize(src io.Reader) int {
	const most, least = 64 << 10, 8 << 10
	if l, ok := src.(interface{ Len() int }); ok {
		return min(most, max(least, l.Len()+1))
	}
	return most
}

// end records a stream-ending error.
func (r *Reader) end(err error) error {
	if err == ErrResyncLimit || err == ErrTooManyErrors {
		err = fmt.Errorf("pgp: read keys at offset %d: %w", r.off, err)
	} else if err != io.EOF {
		err = fmt.Errorf("pgp: read keys at offset %d: %w", r.off, err)
	}
	r.fatal = err
	return err
}

// bad reports a bad key starting at start.
func (r *Reader) bad(start int64, err error, framing bool) error {
	e := &ReadError{Index: r.index, Offset: start, Err: err}
	r.index++
	r.errs++
	r.errOff = start
	r.resync = framing
	if r.errs >= r.opts.MaxConsecutiveErrors {
		r.fatal = fmt.Errorf("pgp: read keys at offset %d: %w", r.off, ErrTooManyErrors)
	}
	return e
}

func (r *Reader) discard(n int64) error {
	for n > 0 {
		step := n
		if step > 1<<30 {
			step = 1 << 30
		}
		d, err := r.br.Discard(int(step))
		r.off += int64(d)
		n -= int64(d)
		if err != nil {
			if err == io.EOF {
				return ErrTruncated
			}
			return err
		}
	}
	return nil
}

// readKey reads one key's packets: the public-key packet at the current
// position and everything up to the next public or secret key packet. The
// packets' bodies share one buffer. framing reports whether the error left
// the stream misaligned; with a nil error, that the key ended at a bad
// header rather than cleanly.
func (r *Reader) readKey() (k *Key, err error, framing bool) {
	type span struct {
		tag    Tag
		off, n int
	}
	var spans []span
	buf := make([]byte, 0, 4096)
	var total int64
	tooBig, dirty := false, false
	for first := true; ; first = false {
		h, err := peekHeader(r.br)
		if err == io.EOF {
			break
		}
		if err != nil {
			if !first && !tooBig && !streamError(err) {
				// The packets so far framed well: they are this key. The
				// bad header is reported by the next call, at its offset.
				dirty = true
				break
			}
			return nil, err, true
		}
		if !first && (h.tag == TagPublicKey || h.tag == TagSecretKey) {
			break
		}
		size := int64(h.hdrLen) + h.bodyLen
		if size > r.opts.MaxKeySize {
			// No acceptable key holds this packet: treat the length as a
			// lie rather than skipping gigabytes.
			_ = r.discard(int64(h.hdrLen))
			return nil, fmt.Errorf("%w: %v packet of %d bytes", ErrPacketTooLarge, h.tag, h.bodyLen), true
		}
		if tooBig || total+size > r.opts.MaxKeySize {
			tooBig = true
			total += size
			if err := r.discard(size); err != nil {
				return nil, err, true
			}
			continue
		}
		total += size
		if err := r.discard(int64(h.hdrLen)); err != nil {
			return nil, err, true
		}
		off := len(buf)
		buf = growTo(buf, off+int(h.bodyLen))
		n, err := io.ReadFull(r.br, buf[off:])
		r.off += int64(n)
		if err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil, fmt.Errorf("%w: %v packet body wants %d bytes, input has %d", ErrTruncated, h.tag, h.bodyLen, n), true
			}
			return nil, err, true
		}
		spans = append(spans, span{h.tag, off, int(h.bodyLen)})
	}
	if tooBig {
		return nil, fmt.Errorf("%w: more than %d bytes (%d)", ErrKeyTooLarge, r.opts.MaxKeySize, total), false
	}
	packets := make([]Packet, len(spans))
	for i, s := range spans {
		packets[i] = Packet{Tag: s.tag, Body: buf[s.off : s.off+s.n : s.off+s.n]}
	}
	return &Key{packets: packets}, nil, dirty
}

// growTo extends b to length n, reallocating with headroom when needed.
func growTo(b []byte, n int) []byte {
	if n <= cap(b) {
		return b[:n]
	}
	nb := make([]byte, n, max(n, 2*cap(b)))
	copy(nb, b)
	return nb
}

// skipPackets consumes well-framed packets up to the next public-key packet.
func (r *Reader) skipPackets() error {
	var skipped int64
	for {
		h, err := peekHeader(r.br)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h.tag == TagPublicKey {
			return nil
		}
		size := int64(h.hdrLen) + h.bodyLen
		if skipped += size; size > r.opts.MaxKeySize || skipped > r.opts.MaxResyncBytes {
			return ErrPacketTooLarge
		}
		if err := r.discard(size); err != nil {
			return err
		}
	}
}

// skipToKey scans forward to the next plausible public-key packet header.
func (r *Reader) skipToKey() error {
	if r.off == r.errOff {
		if err := r.discard(1); err != nil {
			return io.EOF
		}
	}
	const look = 12
	var scanned int64
	for {
		b, err := r.br.Peek(4096)
		if len(b) == 0 {
			if err == nil || err == io.EOF {
				return io.EOF
			}
			return err
		}
		atEOF := err != nil
		for i := range b {
			if len(b)-i < look && !atEOF {
				break
			}
			if plausibleKeyHeader(b[i:]) {
				return r.discard(int64(i))
			}
		}
		step := len(b) - look + 1
		if atEOF || step < 1 {
			step = len(b)
		}
		scanned += int64(step)
		if scanned > r.opts.MaxResyncBytes {
			return ErrResyncLimit
		}
		if err := r.discard(int64(step)); err != nil {
			return io.EOF
		}
	}
}

// plausibleKeyHeader reports whether b starts with what looks like a
// public-key packet: a tag-6 header with a sane length, then a known key
// version and algorithm.
func plausibleKeyHeader(b []byte) bool {
	if len(b) == 0 || (b[0] != 0xc6 && b[0]&0xfc != 0x98) {
		return false
	}
	h, err := parseHeader(b)
	if err != nil || h.tag != TagPublicKey || h.bodyLen < 8 || h.bodyLen > DefaultMaxSignatureSize {
		return false
	}
	body := b[h.hdrLen:]
	if len(body) < 8 {
		return false
	}
	algo := body[5]
	switch body[0] {
	case 3:
		algo = body[7]
	case 4, 6:
	default:
		return false
	}
	return knownAlgorithm(packet.PublicKeyAlgorithm(algo))
}

// knownAlgorithm reports whether a is a public-key algorithm RFC 9580 or
// RFC 9980 lists.
func knownAlgorithm(a packet.PublicKeyAlgorithm) bool {
	switch a {
	case packet.PubKeyAlgoRSA, packet.PubKeyAlgoRSAEncryptOnly, packet.PubKeyAlgoRSASignOnly,
		packet.PubKeyAlgoElGamal, packet.PubKeyAlgoDSA, packet.PubKeyAlgoECDH, packet.PubKeyAlgoECDSA,
		20, packet.PubKeyAlgoEdDSA, packet.PubKeyAlgoX25519, packet.PubKeyAlgoX448,
		packet.PubKeyAlgoEd25519, packet.PubKeyAlgoEd448:
		return true
	}
	_, pqc := pqcSizes[byte(a)]
	return pqc
}

// ReadKeys reads every key from r with the default limits (see Reader). It
// returns the good keys and, when some were bad, an error joining their
// *ReadError values (and any error that ended the stream). It holds all keys
// in memory: for dumps use a Reader or Policy.ProcessParallel.
func ReadKeys(r io.Reader) ([]*Key, error) {
	rd := NewReader(r)
	var keys []*Key
	var errs []error
	for {
		k, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			errs = append(errs, err)
			var re *ReadError
			if !errors.As(err, &re) {
				break
			}
			continue
		}
		keys = append(keys, k)
	}
	return keys, errors.Join(errs...)
}
