// digest.go: the SKS key digest, the element set reconciliation compares and
// the key of /pks/hashquery.

package pgp

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
)

// ErrBadDigest: a string is not a 32-digit hex digest.
var ErrBadDigest = errors.New("invalid key digest")

// Digest returns the key's SKS digest: its packets sorted by tag, then by
// body bytes compared lexicographically (a proper prefix first); for each, the tag and the body length as big-endian 32-bit
// integers, then the body; the MD5 of all that. It covers exactly the packets
// the key holds, so for a key a Policy produced it is the digest of what Kith
// serves.
func (k *Key) Digest() [16]byte {
	if k.applied != nil {
		return k.applied.digest
	}
	return digestPackets(k.packets)
}

// DigestHex returns Digest in the hex form SKS prints (lower case).
func (k *Key) DigestHex() string {
	d := k.Digest()
	return hex.EncodeToString(d[:])
}

// FormatDigest returns d as 32 lower-case hex digits.
func FormatDigest(d [16]byte) string { return hex.EncodeToString(d[:]) }

// ParseDigest parses 32 hex digits (either case).
func ParseDigest(s string) ([16]byte, error) {
	var d [16]byte
	if len(s) != 32 {
		return d, fmt.Errorf("pgp: parse digest %q: %w", s, ErrBadDigest)
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return d, fmt.Errorf("pgp: parse digest %q: %w", s, ErrBadDigest)
	}
	return d, nil
}

// comparePacketsSKS is the digest's packet order. Checked against SKS 1.1.6
// (TestDigestMatchesSKS): ordering by body length before bytes gives
// digests SKS does not know.
func comparePacketsSKS(a, b Packet) int {
	if a.Tag != b.Tag {
		return int(a.Tag) - int(b.Tag)
	}
	return bytes.Compare(a.Body, b.Body)
}

func digestPackets(ps []Packet) [16]byte {
	sorted := slices.Clone(ps)
	slices.SortFunc(sorted, comparePacketsSKS)
	h := md5.New()
	var hdr [8]byte
	for _, p := range sorted {
		binary.BigEndian.PutUint32(hdr[:4], uint32(p.Tag))
		binary.BigEndian.PutUint32(hdr[4:], uint32(len(p.Body)))
		h.Write(hdr[:])
		h.Write(p.Body)
	}
	var d [16]byte
	h.Sum(d[:0])
	return d
}
