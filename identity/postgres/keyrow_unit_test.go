package postgres

import (
	"encoding/binary"
	"testing"
	"time"
)

// Bytes PostgreSQL would never send get an error, never a panic: NULLs
// where the columns allow none, truncated arrays and integers, arrays of
// two dimensions, infinite times.
func TestDecodeKeyRowRefusesMalformedBytes(t *testing.T) {
	be32 := func(vs ...int32) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.BigEndian.AppendUint32(b, uint32(v))
		}
		return b
	}
	array := func(elems ...[]byte) []byte {
		b := be32(1, 0, 25, int32(len(elems)), 1)
		for _, e := range elems {
			if e == nil {
				b = append(b, be32(-1)...)
				continue
			}
			b = append(append(b, be32(int32(len(e)))...), e...)
		}
		return b
	}
	ts := binary.BigEndian.AppendUint64(nil, 1_000_000)
	good := func() [][]byte {
		return [][]byte{
			make([]byte, 20), make([]byte, 16), []byte{1}, be32(1), binary.BigEndian.AppendUint64(nil, 1),
			binary.BigEndian.AppendUint64(nil, 7), {0, 4}, {0, 22}, be32(255), []byte("ed25519"),
			ts, nil, {0}, ts, ts,
			array([]byte("A <a@example.org>")), array([]byte("a@example.org")), array(ts), array(nil), array([]byte{0}), array([]byte{1}),
		}
	}
	k, total, err := decodeKeyRow(good(), true)
	if err != nil || total != 1 || k.KeyID != 7 || k.Algorithm != 22 || len(k.UserIDs) != 1 || !k.UserIDs[0].Primary ||
		!k.Created.Equal(time.Date(2000, 1, 1, 0, 0, 1, 0, time.UTC)) || !k.Expires.IsZero() {
		t.Fatalf("a well-formed row: %+v, %d, %v", k, total, err)
	}
	for name, edit := range map[string]func(r [][]byte){
		"NULL fingerprint":       func(r [][]byte) { r[0] = nil },
		"NULL key ID":            func(r [][]byte) { r[5] = nil },
		"integer of 3 bytes":     func(r [][]byte) { r[3] = []byte{0, 0, 1} },
		"NULL creation time":     func(r [][]byte) { r[10] = nil },
		"time of 7 bytes":        func(r [][]byte) { r[13] = ts[:7] },
		"infinite time":          func(r [][]byte) { r[14] = []byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff} },
		"NULL revoked":           func(r [][]byte) { r[12] = nil },
		"array header cut":       func(r [][]byte) { r[15] = r[15][:10] },
		"array element cut":      func(r [][]byte) { r[16] = r[16][:len(r[16])-3] },
		"array length cut":       func(r [][]byte) { r[17] = r[17][:22] },
		"array of 2 dimensions":  func(r [][]byte) { r[15] = append(be32(2, 0, 25, 1, 1, 1, 1), r[15][20:]...) },
		"array of length -1":     func(r [][]byte) { r[19] = be32(1, 0, 16, -1, 1) },
		"NULL user ID text":      func(r [][]byte) { r[15] = array(nil) },
		"user ID's revoked NULL": func(r [][]byte) { r[19] = array(nil) },
	} {
		r := good()
		edit(r)
		if _, _, err := decodeKeyRow(r, true); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// Arrays of unequal lengths, as rows.Scan's reader takes them: no
	// user IDs.
	r := good()
	r[16] = array([]byte("a"), []byte("b"))
	if k, _, err := decodeKeyRow(r, true); err != nil || len(k.UserIDs) != 0 {
		t.Errorf("arrays of unequal lengths: %d user IDs, %v", len(k.UserIDs), err)
	}
}
