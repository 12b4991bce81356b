// key.go: the Key type, its structure (primary, direct signatures, user IDs,
// user attributes, subkeys) and its canonical binary form.

package pgp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrNotPublicKey: the data does not start with a public-key packet.
var ErrNotPublicKey = errors.New("not a public key")

// ErrMultipleKeys: ParseKey was given more than one key.
var ErrMultipleKeys = errors.New("more than one key")

// Key is one transferable public key as a list of packets, each with its
// original body bytes.
//
// A Key returned by a Reader or ParseKey holds the packets as read (only
// framed and split, nothing verified). A Key returned by Policy.Apply or
// Policy.Merge holds only the packets that passed the policy, in canonical
// order, with its Description and Digest computed; that is the form to store
// and serve. Keys are immutable: no method changes one.
type Key struct {
	packets []Packet
	// applied is set on keys produced by a Policy.
	applied *analysis
}

// analysis is what a Policy computed about a key it produced.
type analysis struct {
	desc   Description
	digest [16]byte
}

// Packets returns the key's packets (shared with the Key: do not modify).
func (k *Key) Packets() []Packet { return k.packets }

// Canonical reports whether the key is the output of a Policy (verified,
// filtered and in canonical order).
func (k *Key) Canonical() bool { return k.applied != nil }

// Bytes returns the key in binary form: every packet with a new-format
// header, in the key's order (canonical order for keys a Policy produced).
func (k *Key) Bytes() []byte {
	n := 0
	for _, p := range k.packets {
		n += headerLen(len(p.Body)) + len(p.Body)
	}
	b := make([]byte, 0, n)
	for _, p := range k.packets {
		b = appendPacket(b, p)
	}
	return b
}

// Size returns len(k.Bytes()) without building it.
func (k *Key) Size() int { return packetsSize(k.packets) }

func packetsSize(ps []Packet) int {
	n := 0
	for _, p := range ps {
		n += headerLen(len(p.Body)) + len(p.Body)
	}
	return n
}

// Fingerprint returns the primary key's fingerprint (20 bytes for v4, 32 for
// v6, 16 for v3), or nil if the primary key packet cannot be parsed.
func (k *Key) Fingerprint() []byte {
	if k.applied != nil {
		return k.applied.desc.Fingerprint
	}
	if len(k.packets) == 0 || k.packets[0].Tag != TagPublicKey {
		return nil
	}
	km, err := parseKeyMaterial(k.packets[0].Body, false)
	if err != nil {
		return nil
	}
	return km.fpr
}

// Version returns the version of the primary key packet (3, 4 or 6), or
// 0 if k has none: what pgp.LegacyReadable and ForLegacyClients decide by.
func (k *Key) Version() int {
	if len(k.packets) == 0 || k.packets[0].Tag != TagPublicKey || len(k.packets[0].Body) == 0 {
		return 0
	}
	return int(k.packets[0].Body[0])
}

// ParseKey reads exactly one key from b (binary or armored) with the
// default reader limits. It does not apply a policy.
func ParseKey(b []byte) (*Key, error) {
	r := NewReader(bytes.NewReader(b))
	k, err := r.Next()
	if err == io.EOF {
		return nil, fmt.Errorf("pgp: parse key: %w", ErrNotPublicKey)
	}
	if err != nil {
		return nil, fmt.Errorf("pgp: parse key: %w", err)
	}
	if _, err := r.Next(); err != io.EOF {
		return nil, fmt.Errorf("pgp: parse key: %w", ErrMultipleKeys)
	}
	return k, nil
}

// NewKey builds a Key from packets (e.g. from a database row). It does not
// apply a policy; the packets are not copied.
func NewKey(packets []Packet) *Key { return &Key{packets: packets} }

// component is a user ID, user attribute or subkey with its signatures.
type component struct {
	kind componentKind
	pkt  Packet
	sigs []Packet
	// stored is how many of sigs, from the first, come from a stored key
	// (Merge): they are checked before the upload's.
	stored int
}

// structured is a key's packets placed by position: the direct signatures
// follow the primary, every other signature follows its component.
type structured struct {
	primary Packet
	direct  []Packet
	comps   []*component
	stray   Report // packets that belong nowhere, by reason
	// storedDirect is how many of direct, from the first, come from a
	// stored key (Merge).
	storedDirect int
}

// structure places a key's packets. It fails only when the first packet is
// not a public key.
func structure(packets []Packet) (*structured, error) {
	if len(packets) == 0 || packets[0].Tag != TagPublicKey {
		return nil, ErrNotPublicKey
	}
	st := &structured{primary: packets[0]}
	var cur *component
	orphaned := false // signatures after a dropped packet belong to nothing
	for i, p := range packets[1:] {
		if p.Tag == TagPublicKey { // a second primary: the rest is another key's
			st.stray.add(DropMisplacedPacket, len(packets)-1-i)
			break
		}
		switch p.Tag {
		case TagSignature:
			switch {
			case orphaned:
				st.stray.add(DropOrphanSignature, 1)
			case cur == nil:
				st.direct = append(st.direct, p)
			default:
				cur.sigs = append(cur.sigs, p)
			}
			continue
		case TagUserID:
			cur = &component{kind: kindUserID, pkt: p}
		case TagUserAttribute:
			cur = &component{kind: kindUserAttribute, pkt: p}
		case TagPublicSubkey:
			cur = &component{kind: kindSubkey, pkt: p}
		case TagTrust:
			st.stray.add(DropTrustPacket, 1)
			continue // trust packets follow a packet without ending it
		case TagSecretKey, TagSecretSubkey:
			st.stray.add(DropSecretKey, 1)
			orphaned = true
			continue
		default: // marker, padding, data or unknown packets: skipped in place
			st.stray.add(DropMisplacedPacket, 1)
			continue
		}
		orphaned = false
		st.comps = append(st.comps, cur)
	}
	return st, nil
}
