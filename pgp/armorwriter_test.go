package pgp

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp/armor"
)

// TestArmorWriterMatchesGoCrypto: the armor Kith writes is byte for byte
// go-crypto's, for every body length around the line and group
// boundaries and for bodies written in pieces of random sizes.
func TestArmorWriterMatchesGoCrypto(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	body := make([]byte, 5000)
	for i := range body {
		body[i] = byte(rng.Uint32())
	}
	lengths := []int{0, 1, 2, 3, 47, 48, 49, 95, 96, 97, 143, 144, 145, 4999}
	for range 50 {
		lengths = append(lengths, rng.IntN(len(body)))
	}
	for _, n := range lengths {
		var want bytes.Buffer
		gw, err := armor.Encode(&want, publicKeyBlockType, nil)
		if err != nil {
			t.Fatal(err)
		}
		gw.Write(body[:n])
		gw.Close()

		var got bytes.Buffer
		aw := NewArmorWriter(&got)
		for rest := body[:n]; len(rest) > 0; {
			k := min(len(rest), 1+rng.IntN(130))
			if _, err := aw.Write(rest[:k]); err != nil {
				t.Fatal(err)
			}
			rest = rest[k:]
		}
		if err := aw.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("%d bytes: armor differs\ngot:\n%s\nwant:\n%s", n, got.Bytes(), want.Bytes())
		}
		if n > 0 {
			// What Kith writes reads back as the same body.
			blk, err := armor.Decode(bytes.NewReader(got.Bytes()))
			if err != nil {
				t.Fatalf("%d bytes: %v", n, err)
			}
			var back bytes.Buffer
			if _, err := back.ReadFrom(blk.Body); err != nil {
				t.Fatalf("%d bytes: reading back (checksum?): %v", n, err)
			}
			if !bytes.Equal(back.Bytes(), body[:n]) {
				t.Fatalf("%d bytes: read back differently", n)
			}
		}
	}
}

// BenchmarkArmor compares Kith's armor writer with go-crypto's on a
// typical key.
func BenchmarkArmor(b *testing.B) {
	body := make([]byte, 2500)
	for name, open := range map[string]func(*bytes.Buffer) io.WriteCloser{
		"kith": func(out *bytes.Buffer) io.WriteCloser { return NewArmorWriter(out) },
		"go-crypto": func(out *bytes.Buffer) io.WriteCloser {
			w, _ := armor.Encode(out, publicKeyBlockType, nil)
			return w
		},
	} {
		b.Run(name, func(b *testing.B) {
			var out bytes.Buffer
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				out.Reset()
				w := open(&out)
				w.Write(body)
				w.Close()
			}
		})
	}
}

func BenchmarkCRC24(b *testing.B) {
	body := make([]byte, 2500)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		crc24(0xb704ce, body)
	}
}
