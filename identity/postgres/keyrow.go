package postgres

// keyrow.go: the rows of readColumns, read from PostgreSQL's binary form.
// rows.Scan plans the scan of every column again for every statement (pgx
// keeps the plans with one result, not with the statement), and a lookup
// reads one row of 21 columns, six of them arrays: planning cost more
// than reading, about a tenth of a search's CPU in Go. decodeKeyRow reads
// the row's bytes itself; scanKeyRow, the plain rows.Scan, remains for a
// result in another form and as the reference of the tests.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kith-keyserver/kith/identity/keys"
)

// keyRowColumns is how many columns readColumns lists without the user
// IDs; with them, six arrays follow.
const keyRowColumns = 15

// keyRowDecodable reports whether decodeKeyRow reads rows described by
// fields: readColumns' columns, with the user IDs or not, in binary form,
// of the types keyRowType lists.
func keyRowDecodable(fields []pgconn.FieldDescription, userIDs bool) bool {
	want := keyRowColumns
	if userIDs {
		want += 6
	}
	if len(fields) != want {
		return false
	}
	for i, f := range fields {
		// A text is the same bytes in both forms, and pgx asks for it
		// in the text form.
		binaryForm := f.Format == pgtype.BinaryFormatCode || f.DataTypeOID == pgtype.TextOID
		if !binaryForm || !keyRowType(i, f.DataTypeOID) {
			return false
		}
	}
	return true
}

// keyRowType reports whether oid is the type of readColumns' column i.
func keyRowType(i int, oid uint32) bool {
	switch i {
	case 0, 1, 2: // fingerprint, digest, packets
		return oid == pgtype.ByteaOID
	case 3, 8: // size, bits
		return oid == pgtype.Int4OID
	case 4: // the answer's size: a key's own, or a sum over the keys
		return oid == pgtype.Int4OID || oid == pgtype.Int8OID
	case 5: // long_id
		return oid == pgtype.Int8OID
	case 6, 7: // version, algorithm
		return oid == pgtype.Int2OID
	case 9: // curve
		return oid == pgtype.TextOID
	case 10, 11, 13, 14: // created_at, expires_at, first_seen, modified_at
		return oid == pgtype.TimestamptzOID
	case 12: // revoked
		return oid == pgtype.BoolOID
	case 15, 16: // user IDs' texts, emails
		return oid == pgtype.TextArrayOID
	case 17, 18: // their created_at, expires_at
		return oid == pgtype.TimestamptzArrayOID
	case 19, 20: // revoked, is_primary
		return oid == pgtype.BoolArrayOID
	}
	return false
}

// decodeKeyRow reads a row of readColumns that keyRowDecodable accepts,
// as scanKeyRow reads it: the key and the answer's total size.
func decodeKeyRow(raw [][]byte, userIDs bool) (keys.Stored, int64, error) {
	var k keys.Stored
	if raw[0] == nil || raw[1] == nil {
		return k, 0, errors.New("read key: NULL fingerprint or digest")
	}
	k.Fingerprint = bytes.Clone(raw[0])
	copy(k.Digest[:], raw[1])
	k.Packets = bytes.Clone(raw[2])
	ints := [...]int{3, 4, 5, 6, 7, 8}
	var n [len(ints)]int64
	for j, i := range ints {
		var err error
		if n[j], err = rawInt(raw[i]); err != nil {
			return k, 0, fmt.Errorf("read key: column %d: %w", i, err)
		}
	}
	k.Size, k.KeyID, k.Version, k.Algorithm, k.Bits = int(n[0]), uint64(n[2]), int(n[3]), int(n[4]), int(n[5])
	total := n[1]
	if raw[9] == nil || len(raw[12]) != 1 {
		return k, 0, errors.New("read key: NULL curve or revoked")
	}
	k.Curve, k.Revoked = string(raw[9]), raw[12][0] != 0
	for _, t := range []struct {
		col      int
		dst      *time.Time
		nullable bool
	}{{10, &k.Created, false}, {11, &k.Expires, true}, {13, &k.FirstSeen, false}, {14, &k.Modified, false}} {
		if raw[t.col] == nil && !t.nullable {
			return k, 0, fmt.Errorf("read key: column %d: NULL", t.col)
		}
		var err error
		if *t.dst, err = rawTime(raw[t.col]); err != nil {
			return k, 0, fmt.Errorf("read key: column %d: %w", t.col, err)
		}
	}
	if userIDs {
		uids, err := decodeUserIDs(raw[keyRowColumns:])
		if err != nil {
			return k, 0, fmt.Errorf("read key: user IDs: %w", err)
		}
		k.UserIDs = uids
	}
	return k, total, nil
}

// decodeUserIDs reads the six parallel arrays of the user IDs; none when
// they are NULL (a key without user IDs) or of unequal lengths.
func decodeUserIDs(raw [][]byte) ([]keys.StoredUserID, error) {
	var arrays [6]rawArray
	for i := range arrays {
		var err error
		if arrays[i], err = parseArray(raw[i]); err != nil {
			return nil, err
		}
	}
	n := arrays[0].n
	if n == 0 {
		return nil, nil
	}
	for _, a := range arrays[1:] {
		if a.n != n {
			return nil, nil
		}
	}
	uids := make([]keys.StoredUserID, n)
	for i := range uids {
		var v [6][]byte
		for j := range arrays {
			var err error
			if v[j], err = arrays[j].next(); err != nil {
				return nil, err
			}
		}
		if v[0] == nil || v[1] == nil || len(v[4]) != 1 || len(v[5]) != 1 {
			return nil, errors.New("NULL text, email, revoked or primary")
		}
		u := keys.StoredUserID{Text: string(v[0]), Email: string(v[1]), Revoked: v[4][0] != 0, Primary: v[5][0] != 0}
		var err error
		if u.Created, err = rawTime(v[2]); err != nil {
			return nil, err
		}
		if u.Expires, err = rawTime(v[3]); err != nil {
			return nil, err
		}
		uids[i] = u
	}
	return uids, nil
}

// rawInt reads a binary smallint, integer or bigint.
func rawInt(src []byte) (int64, error) {
	switch len(src) {
	case 2:
		return int64(int16(binary.BigEndian.Uint16(src))), nil
	case 4:
		return int64(int32(binary.BigEndian.Uint32(src))), nil
	case 8:
		return int64(binary.BigEndian.Uint64(src)), nil
	}
	if src == nil {
		return 0, errors.New("NULL integer")
	}
	return 0, fmt.Errorf("integer of %d bytes", len(src))
}

// Binary timestamptz: microseconds since 2000-01-01 UTC, and the two
// values that stand for ±infinity.
const (
	microsecondsToY2K    = 946_684_800 * 1_000_000
	infinityTime         = int64(^uint64(0) >> 1)
	negativeInfinityTime = -infinityTime - 1
)

// rawTime reads a binary timestamptz as pgx does (time.Unix, in the local
// zone); NULL is the zero time.
func rawTime(src []byte) (time.Time, error) {
	if src == nil {
		return time.Time{}, nil
	}
	if len(src) != 8 {
		return time.Time{}, fmt.Errorf("timestamptz of %d bytes", len(src))
	}
	us := int64(binary.BigEndian.Uint64(src))
	if us == infinityTime || us == negativeInfinityTime {
		return time.Time{}, errors.New("infinite timestamptz")
	}
	return time.Unix(microsecondsToY2K/1_000_000+us/1_000_000, (microsecondsToY2K%1_000_000+us%1_000_000)*1_000), nil
}

// rawArray is a one-dimensional array in binary form, read element by
// element.
type rawArray struct {
	n    int    // elements
	rest []byte // the elements not read yet
}

// parseArray reads the header of a binary array; a NULL array has no
// elements.
func parseArray(src []byte) (rawArray, error) {
	if src == nil {
		return rawArray{}, nil
	}
	if len(src) < 12 {
		return rawArray{}, errors.New("short array")
	}
	switch dims := binary.BigEndian.Uint32(src); dims {
	case 0:
		return rawArray{}, nil
	case 1:
	default:
		return rawArray{}, fmt.Errorf("array of %d dimensions", dims)
	}
	if len(src) < 20 {
		return rawArray{}, errors.New("short array")
	}
	n := int32(binary.BigEndian.Uint32(src[12:]))
	if n < 0 {
		return rawArray{}, errors.New("array of negative length")
	}
	return rawArray{n: int(n), rest: src[20:]}, nil
}

// next returns the next element, nil when it is NULL.
func (a *rawArray) next() ([]byte, error) {
	if len(a.rest) < 4 {
		return nil, errors.New("short array")
	}
	l := int32(binary.BigEndian.Uint32(a.rest))
	a.rest = a.rest[4:]
	if l < 0 {
		return nil, nil
	}
	if int(l) > len(a.rest) {
		return nil, errors.New("short array")
	}
	v := a.rest[:l:l]
	a.rest = a.rest[l:]
	return v, nil
}

// scanKeyRow reads a row of readColumns with rows.Scan, and the columns
// after them into extra.
func scanKeyRow(rows pgx.Rows, userIDs bool, extra ...any) (keys.Stored, int64, error) {
	var k keys.Stored
	var digest []byte
	var version, algo int16
	var bits int32
	var expires *time.Time
	var total, longID int64
	var texts, emails []string
	var uCreated, uExpires []*time.Time
	var uRevoked, uPrimary []bool
	dest := []any{&k.Fingerprint, &digest, &k.Packets, &k.Size, &total, &longID, &version, &algo, &bits, &k.Curve,
		&k.Created, &expires, &k.Revoked, &k.FirstSeen, &k.Modified}
	if userIDs {
		dest = append(dest, &texts, &emails, &uCreated, &uExpires, &uRevoked, &uPrimary)
	}
	if err := rows.Scan(append(dest, extra...)...); err != nil {
		return k, 0, err
	}
	copy(k.Digest[:], digest)
	k.KeyID = uint64(longID)
	k.Version, k.Algorithm, k.Bits = int(version), int(algo), int(bits)
	if expires != nil {
		k.Expires = *expires
	}
	if n := len(texts); n > 0 && len(emails) == n && len(uCreated) == n && len(uExpires) == n && len(uRevoked) == n && len(uPrimary) == n {
		k.UserIDs = make([]keys.StoredUserID, n)
		for i := range n {
			u := keys.StoredUserID{Text: texts[i], Email: emails[i], Revoked: uRevoked[i], Primary: uPrimary[i]}
			if uCreated[i] != nil {
				u.Created = *uCreated[i]
			}
			if uExpires[i] != nil {
				u.Expires = *uExpires[i]
			}
			k.UserIDs[i] = u
		}
	}
	return k, total, nil
}
