package recon

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/big"
	"reflect"
	"strings"
	"testing"
)

func sampleMessages() []Message {
	d1 := [16]byte{1, 2, 3}
	d2 := [16]byte{0xff, 0xee}
	pfx, _ := ParsePrefix("0110")
	return []Message{
		&ReconRqstPoly{Prefix: pfx, Size: 77, Samples: []*big.Int{big.NewInt(0), big.NewInt(1), new(big.Int).Sub(Prime(), big.NewInt(1)), big.NewInt(5), big.NewInt(6), big.NewInt(7)}},
		&ReconRqstFull{Prefix: Prefix{}, Elements: [][16]byte{d1, d2}},
		&Elements{Elements: [][16]byte{d1}},
		&FullElements{Elements: [][16]byte{}},
		&SyncFail{},
		&Done{},
		&Flush{},
		&ErrorMessage{Text: "boom"},
		&DbRqst{Text: "q"},
		&DbRepl{Text: "r"},
		&Config{Version: "1.1.6", HTTPPort: 11371, BitQuantum: 2, MBar: 5, Filters: DefaultFilters, Extra: map[string]string{"x": "y"}},
	}
}

func TestMessagesRoundTrip(t *testing.T) {
	for _, m := range sampleMessages() {
		t.Run(m.Type().String(), func(t *testing.T) {
			b, err := MarshalMessage(m)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ReadMessage(bytes.NewReader(b), 0)
			if err != nil {
				t.Fatal(err)
			}
			if fe, ok := m.(*FullElements); ok && len(fe.Elements) == 0 {
				m = &FullElements{Elements: [][16]byte{}}
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("round trip = %#v, want %#v", got, m)
			}
		})
	}
}

// TestWireEncodingMatchesSKS pins the byte layout: length covers the type
// byte and body; bitstrings are bits, bytes, data; elements 17 bytes LE.
func TestWireEncodingMatchesSKS(t *testing.T) {
	pfx, _ := ParsePrefix("101")
	pfx = pfx.appendBit(1) // "1011"
	m := &ReconRqstFull{Prefix: pfx, Elements: [][16]byte{{0xaa, 0xbb}}}
	got, err := MarshalMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0, 0, 0, 31, 1, // length 31 (type byte + body), type 1
		0, 0, 0, 4, 0, 0, 0, 1, 0xb0, // 4 bits in 1 byte
		0, 0, 0, 1, // one element
		0xaa, 0xbb, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding =\n%x, want\n%x", got, want)
	}
	c, _ := MarshalMessage(&Config{Version: "1.1.6", HTTPPort: 11371, BitQuantum: 2, MBar: 5, Filters: "f"})
	if !bytes.Contains(c, append(appendString(nil, "http port"), 0, 0, 0, 4, 0, 0, 0x2c, 0x6b)) {
		t.Fatalf("Config does not carry http port as a 4-byte string: %x", c)
	}
}

func TestReadMessageRejectsBadInput(t *testing.T) {
	frame := func(body ...byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	elem := make([]byte, 17)
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty input", nil, "EOF"},
		{"zero length", frame(), "message length 0"},
		{"negative length", []byte{0xff, 0xff, 0xff, 0xff}, "message length -1"},
		{"oversized", []byte{0x7f, 0, 0, 0, 2}, "exceeds the limit"},
		{"body cut short", []byte{0, 0, 0, 10, 2, 0}, "got 2"},
		{"unknown type", frame(11), "unknown message type 11"},
		{"set count too big", frame(2, 0x7f, 0, 0, 0), "does not fit"},
		{"set count negative", frame(2, 0xff, 0xff, 0xff, 0xff), "does not fit"},
		{"element over 128 bits", frame(append([]byte{2, 0, 0, 0, 1}, append(elem[:16:16], 1)...)...), "not a 128-bit digest"},
		{"trailing bytes", frame(5, 0), "trailing"},
		{"bitstring too long", frame(1, 0, 0, 1, 0, 0, 0, 0, 32), "bitstring"},
		{"bitstring byte count wrong", frame(1, 0, 0, 0, 8, 0, 0, 0, 2, 0, 0), "bitstring"},
		{"odd prefix", frame(1, 0, 0, 0, 3, 0, 0, 0, 1, 0xe0, 0, 0, 0, 0), "whole bit quanta"},
		{"string too long", frame(7, 0, 0, 1, 0, 'x'), "does not fit"},
		{"negative node size", frame(0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0), "negative node size"},
		{"config number not a number", frame(append([]byte{10, 0, 0, 0, 1}, append(appendString(nil, "mbar"), appendString(nil, "xy")...)...)...), "not a number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadMessage(bytes.NewReader(tt.in), 1<<20)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ReadMessage = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestReadMessageDoesNotTrustLength(t *testing.T) {
	// A 60 MiB message whose sender stops after the header must fail
	// without allocating the 60 MiB.
	in := io.MultiReader(bytes.NewReader([]byte{0x03, 0xc0, 0, 0, 2}), strings.NewReader("abc"))
	_, err := ReadMessage(in, 0)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("ReadMessage = %v, want unexpected EOF", err)
	}
	var m testingMem
	m.measure(func() {
		in := io.MultiReader(bytes.NewReader([]byte{0x03, 0xc0, 0, 0, 2}), strings.NewReader("abc"))
		ReadMessage(in, 0)
	})
	if m.bytes > 1<<20 {
		t.Fatalf("reading a lying header allocated %d bytes", m.bytes)
	}
}

func FuzzUnmarshalMessage(f *testing.F) {
	for _, m := range sampleMessages() {
		b, err := MarshalMessage(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[4:])
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{10, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := UnmarshalMessage(b)
		if err != nil {
			return
		}
		// Whatever decodes must encode, and its encoding is canonical:
		// decoding and encoding it again gives the same bytes. (The input
		// itself may differ: unused prefix bits are cleared, Config pairs
		// reordered.)
		out, err := MarshalMessage(m)
		if err != nil {
			t.Fatalf("decoded %#v does not encode: %v", m, err)
		}
		m2, err := UnmarshalMessage(out[4:])
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		out2, err := MarshalMessage(m2)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("encoding is not canonical:\n%x\n%x", out, out2)
		}
	})
}
