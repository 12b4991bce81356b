// tombstone.go: what remains of a key that its owner deleted or the
// operator blocked while keeping revocations (a tombstone), and keys with
// single blocked user IDs or certifications taken out.

package pgp

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
)

// ErrBlockedAway: every self-signed part of a key is blocked, so nothing
// of it may be stored.
var ErrBlockedAway = errors.New("nothing of the key remains once its blocked packets are removed")

// Tombstone returns the tombstone of keys, which must all have the same
// primary key (else ErrFingerprintMismatch): the primary key packet and
// the key revocation signatures it made itself that verify, in canonical
// order, and nothing else (no user IDs, subkeys, direct-key signatures or
// third-party signatures). Tombstone of tombstones is the tombstone of
// their union, so merging a revocation into a tombstone is
// Tombstone(stored, upload). The result is canonical (Describe and Digest
// are computed) even when it holds no revocation at all, which Apply
// would refuse.
func (p Policy) Tombstone(keys ...*Key) (*Key, error) {
	p = p.withDefaults()
	if len(keys) == 0 {
		return nil, fmt.Errorf("pgp: tombstone: no key")
	}
	var primary Packet
	var direct []Packet
	for i, k := range keys {
		st, err := structure(k.packets)
		if err != nil {
			return nil, fmt.Errorf("pgp: tombstone: %w", err)
		}
		if i == 0 {
			primary = st.primary
		} else if !bytes.Equal(primary.Body, st.primary.Body) {
			return nil, fmt.Errorf("pgp: tombstone: %X and %X: %w", keys[0].Fingerprint(), k.Fingerprint(), ErrFingerprintMismatch)
		}
		direct = append(direct, st.direct...)
	}
	if n := len(primary.Body); n > p.MaxPacketSize {
		return nil, fmt.Errorf("pgp: tombstone: primary key packet of %d bytes: %w", n, ErrPacketTooLarge)
	}
	prim, err := parseKeyMaterial(primary.Body, false)
	if err != nil {
		return nil, fmt.Errorf("pgp: tombstone: %w", err)
	}
	if prim.pub == nil {
		return nil, fmt.Errorf("pgp: tombstone: %X: %w: %v", prim.fpr, ErrUnsupportedKey, prim.pubErr)
	}
	var rep Report
	var revs []keptSig
	for _, s := range p.filterSigs(prim, kindDirect, nil, nil, direct, 0, p.newKeyBudget(), &rep) {
		if s.self != nil && s.info.sigType == sigTypeKeyRevoke {
			revs = append(revs, s)
		}
	}
	sortSigs(revs)
	out := &Key{packets: buildPackets(primary, revs)}
	out.applied = &analysis{desc: describe(prim, revs, nil, nil, nil)}
	out.applied.digest = digestPackets(out.packets)
	return out, nil
}

// PacketHash is how an operator names one user ID or signature packet of
// a key to block: the SHA-256 of its body (for a user ID, of the user ID
// text's bytes).
func PacketHash(body []byte) [32]byte { return sha256.Sum256(body) }

// BlockablePacket is a user ID or signature of a key, as the block
// commands list them.
type BlockablePacket struct {
	Hash [32]byte
	// Tag is TagUserID, TagUserAttribute or TagSignature.
	Tag Tag
	// UserID is the user ID text (for a signature, of the user ID it
	// follows; empty for signatures on the primary key or a subkey).
	UserID string
	// Issuer is a signature's issuer key ID (0 when it names none), and
	// SigType its type.
	Issuer  uint64
	SigType uint8
}

// BlockablePackets lists the user IDs, user attributes and signatures of
// k with their PacketHash, in the key's order.
func BlockablePackets(k *Key) []BlockablePacket {
	var out []BlockablePacket
	uid := ""
	for _, pk := range k.packets[min(1, len(k.packets)):] {
		switch pk.Tag {
		case TagUserID:
			uid = string(pk.Body)
			out = append(out, BlockablePacket{Hash: PacketHash(pk.Body), Tag: pk.Tag, UserID: uid})
		case TagUserAttribute:
			uid = ""
			out = append(out, BlockablePacket{Hash: PacketHash(pk.Body), Tag: pk.Tag})
		case TagPublicSubkey:
			uid = ""
		case TagSignature:
			bp := BlockablePacket{Hash: PacketHash(pk.Body), Tag: pk.Tag, UserID: uid}
			if info, err := parseSigInfo(pk.Body); err == nil {
				bp.Issuer, bp.SigType = info.issuerKeyID(), info.sigType
			}
			out = append(out, bp)
		}
	}
	return out
}

// keyIDOfFingerprint returns the key ID an issuer fingerprint implies:
// the last 8 bytes for v4, the first 8 for v6.
func keyIDOfFingerprint(fpr []byte) uint64 {
	var b []byte
	if len(fpr) == 32 {
		b = fpr[:8]
	} else {
		b = fpr[len(fpr)-8:]
	}
	var id uint64
	for _, c := range b {
		id = id<<8 | uint64(c)
	}
	return id
}

// WithoutPackets returns k with the user IDs, user attributes and
// signatures whose PacketHash blocked reports taken out (a user ID with
// every signature on it), the policy applied again, and whether anything
// was taken out. When nothing self-signed remains it fails with
// ErrBlockedAway.
func (p Policy) WithoutPackets(k *Key, blocked func([32]byte) bool) (*Key, bool, error) {
	if len(k.packets) == 0 {
		return nil, false, fmt.Errorf("pgp: without packets: %w", ErrNotPublicKey)
	}
	kept := make([]Packet, 0, len(k.packets))
	kept = append(kept, k.packets[0])
	skipping := false
	removed := false
	for _, pk := range k.packets[1:] {
		switch pk.Tag {
		case TagUserID, TagUserAttribute:
			skipping = blocked(PacketHash(pk.Body))
		case TagPublicSubkey:
			skipping = false
		case TagSignature:
			if !skipping && blocked(PacketHash(pk.Body)) {
				removed = true
				continue
			}
		}
		if skipping {
			removed = true
			continue
		}
		kept = append(kept, pk)
	}
	if !removed {
		return k, false, nil
	}
	out, _, err := p.Apply(&Key{packets: slices.Clip(kept)})
	if errors.Is(err, ErrNoSelfSignature) {
		return nil, true, fmt.Errorf("pgp: without packets: %X: %w", k.Fingerprint(), ErrBlockedAway)
	}
	if err != nil {
		return nil, true, fmt.Errorf("pgp: without packets: %w", err)
	}
	return out, true, nil
}
