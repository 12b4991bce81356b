package pgp

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// twoKeys returns two small distinct keys' bytes.
func twoKeys(t testing.TB) (a, b []byte) {
	return entityBytes(t, genEntity(t, "Alice", "alice@example.org", 1)),
		entityBytes(t, genEntity(t, "Bob", "bob@example.org", 2))
}

// oldFormat re-frames a key's packets with old-format headers.
func oldFormat(t testing.TB, b []byte) []byte {
	var out []byte
	for _, p := range mustParse(t, b).Packets() {
		n := len(p.Body)
		switch {
		case n < 256:
			out = append(out, 0x80|byte(p.Tag)<<2, byte(n))
		case n < 65536:
			out = append(out, 0x81|byte(p.Tag)<<2, byte(n>>8), byte(n))
		default:
			out = append(out, 0x82|byte(p.Tag)<<2, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
		}
		out = append(out, p.Body...)
	}
	return out
}

func armored(t testing.TB, b ...[]byte) []byte {
	var keys []*Key
	for _, x := range b {
		keys = append(keys, mustParse(t, x))
	}
	var buf bytes.Buffer
	if err := WriteArmored(&buf, keys...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReaderFormats(t *testing.T) {
	a, b := twoKeys(t)
	tests := []struct {
		name  string
		input []byte
	}{
		{"binary new-format", slices2(a, b)},
		{"binary old-format", slices2(oldFormat(t, a), oldFormat(t, b))},
		{"one armor block", armored(t, a, b)},
		{"two armor blocks with text around", slices2([]byte("Hello\r\n\r\n"), armored(t, a), []byte("-- \nsig\n"), armored(t, b), []byte("bye"))},
		{"armor with headers and no CRC", []byte(regexp.MustCompile(`\n=[^\n]{4}\n`).ReplaceAllString(strings.Replace(string(armored(t, a, b)), "-----\n\n", "-----\nComment: test\nVersion: x\n\n", 1), "\n"))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keys, errs := readAllKeys(t, NewReader(bytes.NewReader(tc.input)))
			if len(errs) != 0 || len(keys) != 2 {
				t.Fatalf("got %d keys, errors %v", len(keys), errs)
			}
			if !bytes.Equal(keys[0].Bytes(), a) || !bytes.Equal(keys[1].Bytes(), b) {
				t.Errorf("keys do not round-trip to their new-format bytes")
			}
		})
	}
}

// slices2 concatenates byte slices.
func slices2(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestReaderDamage(t *testing.T) {
	a, b := twoKeys(t)
	lyingLen := bytes.Clone(a)
	// The user ID packet's one-byte length claims 60 bytes more than it has.
	uidAt := bytes.Index(lyingLen, []byte("Alice <")) - 2
	lyingLen[uidAt+1] += 60
	partial := bytes.Clone(a)
	partial[1] = 0xe0 // partial length on the primary key packet
	huge := slices2([]byte{0xc6, 0xff, 0x7f, 0xff, 0xff, 0xff}, a[2:40])

	tests := []struct {
		name     string
		input    []byte
		wantErr  error
		wantKeys int   // good keys read
		lastIsB  bool  // the last good key is b
		errOff   int64 // offset of the first error (-1: anywhere)
	}{
		{"truncated at end", slices2(b, a[:len(a)-10]), ErrTruncated, 1, true, int64(len(b))},
		{"truncated header", slices2(b, []byte{0xc2}), ErrTruncated, 1, true, int64(len(b))},
		{"length that lies, then good keys", slices2(lyingLen, b, b), nil, 1, true, -1},
		{"partial length in key material", slices2(partial, b), ErrPartialLength, 1, true, 0},
		{"absurd length", slices2(huge, b), ErrPacketTooLarge, 1, true, 0},
		{"junk before a key", slices2([]byte{0xff, 0x00, 0x13, 0x37}, b), nil, 1, true, 0},
		{"secret key block skipped", slices2([]byte{0xc5, 3, 4, 0, 0}, b), ErrNotPublicKey, 1, true, 0},
		{"compressed data is never opened", slices2(bytes.Repeat([]byte{0xc8, 2, 1, 0x78}, 1000), b), ErrNotPublicKey, 1, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keys, errs := readAllKeys(t, NewReader(bytes.NewReader(tc.input)))
			if len(errs) == 0 {
				t.Fatalf("no error")
			}
			var re *ReadError
			if !errors.As(errs[0], &re) {
				t.Fatalf("error %v is not a *ReadError", errs[0])
			}
			if tc.wantErr != nil && !errors.Is(errs[0], tc.wantErr) {
				t.Errorf("error %v, want %v", errs[0], tc.wantErr)
			}
			if tc.errOff >= 0 && re.Offset != tc.errOff {
				t.Errorf("error offset %d, want %d", re.Offset, tc.errOff)
			}
			if len(keys) < tc.wantKeys {
				t.Fatalf("read %d good keys, want at least %d (errors %v)", len(keys), tc.wantKeys, errs)
			}
			if tc.lastIsB && !bytes.Equal(keys[len(keys)-1].Bytes(), b) {
				t.Errorf("last key is not the intact one")
			}
		})
	}
}

// repeatReader yields unit n times, streamed.
type repeatReader struct {
	unit []byte
	n    int
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	c := copy(p, r.unit[r.off:])
	r.off += c
	if r.off == len(r.unit) {
		r.off, r.n = 0, r.n-1
	}
	return c, nil
}

func TestReaderSkipsHugeKeyWithoutBufferingIt(t *testing.T) {
	a, b := twoKeys(t)
	// 20 MiB of 1 KiB signature packets after a valid key head.
	sig := slices2([]byte{0xc2, 0xff, 0, 0, 4, 0}, bytes.Repeat([]byte{4}, 1024))
	input := io.MultiReader(bytes.NewReader(a), &repeatReader{unit: sig, n: 20 << 10}, bytes.NewReader(b))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	keys, errs := readAllKeys(t, NewReader(input))
	runtime.ReadMemStats(&after)
	if len(errs) != 1 || !errors.Is(errs[0], ErrKeyTooLarge) {
		t.Fatalf("errors %v, want one ErrKeyTooLarge", errs)
	}
	if len(keys) != 1 || !bytes.Equal(keys[0].Bytes(), b) {
		t.Fatalf("the key after the huge one was not read")
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("allocated %d MiB reading a 20 MiB key; the reader must not buffer it", alloc>>20)
	}
}

// junkReader is an endless stream of random bytes.
type junkReader struct{ r *rand.ChaCha8 }

func (j junkReader) Read(p []byte) (int, error) { return j.r.Read(p) }

func TestReaderTerminatesOnEndlessJunk(t *testing.T) {
	tests := []struct {
		name  string
		input io.Reader
		opts  ReaderOptions
		want  error
		// maxRead bounds the input read before the Reader gives up (the
		// junk is seeded, so the figure is the same on every run: about
		// 0.98 GiB of binary junk before MaxErrors packets failed, 1.1
		// MB of text past MaxResyncBytes).
		maxRead int64
	}{
		{"binary junk", io.MultiReader(bytes.NewReader([]byte{0x99}), junkReader{rand.NewChaCha8([32]byte{1})}), ReaderOptions{}, ErrTooManyErrors, 1200 << 20},
		{"text junk", junkText{}, ReaderOptions{MaxResyncBytes: 1 << 20}, ErrResyncLimit, 2 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := &countingReader{r: tc.input}
			r := NewReaderOptions(in, tc.opts)
			var err error
			for i := 0; i < 1e6; i++ {
				_, err = r.Next()
				var re *ReadError
				if err != nil && !errors.As(err, &re) {
					break
				}
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("ended with %v, want %v", err, tc.want)
			}
			if _, again := r.Next(); !errors.Is(again, tc.want) {
				t.Errorf("error is not sticky: %v", again)
			}
			// Termination is measured in input read, not in time, so a
			// busy machine cannot fail it.
			if in.n > tc.maxRead {
				t.Errorf("read %d bytes of junk before stopping, want at most %d", in.n, tc.maxRead)
			}
		})
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// junkText is an endless stream of text lines.
type junkText struct{}

func (junkText) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = "lorem ipsum\n"[i%12]
	}
	return len(p), nil
}

func TestReadKeysReturnsGoodKeysAndJoinedErrors(t *testing.T) {
	a, b := twoKeys(t)
	keys, err := ReadKeys(bytes.NewReader(slices2(a, []byte{0xc5, 1, 4}, b)))
	var re *ReadError
	if len(keys) != 2 || !errors.As(err, &re) || !errors.Is(err, ErrNotPublicKey) {
		t.Errorf("%d keys, err %v", len(keys), err)
	}
}
