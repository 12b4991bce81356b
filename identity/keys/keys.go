package keys

import (
	"errors"
	"time"
)

// Query selects stored OpenPGP keys. Exactly one selector is set.
type Query struct {
	// Fingerprint matches a primary key or a subkey (20 bytes for v4, 32
	// for v6); a subkey resolves to its primary key.
	Fingerprint []byte
	// KeyID matches the 64-bit key ID of a primary key or subkey.
	KeyID uint64
	// ShortKeyID matches the 32-bit key ID (set HasShortKeyID).
	ShortKeyID    uint32
	HasShortKeyID bool
	// Email matches a user ID's address exactly (lower-cased).
	Email string
	// Words matches keys with a user ID holding every word (lower-cased).
	Words []string
	// Digests matches keys by their SKS digests (op=hget).
	Digests [][16]byte
	// Fingerprints matches primary keys by their exact fingerprints.
	Fingerprints [][]byte
	// PrimaryKeyIDs matches primary keys (not subkeys) by their 64-bit
	// key IDs, in one lookup: e.g. the issuers of a key's certifications.
	PrimaryKeyIDs []uint64
	// Limit caps the result; the store returns at most Limit keys and
	// reports whether more matched. Zero means no limit.
	Limit int
	// MaxBytes, when positive, refuses the result (ErrAnswerTooLarge) if
	// the selected keys' packets together exceed it. The store checks the
	// sizes it keeps beside the packets, so a refused query reads none.
	MaxBytes int
	// InlineBytes bounds the packets the store reads into the result:
	// zero reads every key's packets; positive reads them only when they
	// total at most InlineBytes (otherwise Stored.Packets is nil and the
	// caller streams them with StreamPackets); negative reads none.
	// Stored.Size is set either way.
	InlineBytes int
	// NoUserIDs leaves Stored.UserIDs empty, for a caller that needs
	// only the packets (op=get).
	NoUserIDs bool
}

// Stored is a key as the store holds it: the packets Kith serves and
// what the index shows of them.
type Stored struct {
	// Fingerprint of the primary key.
	Fingerprint []byte
	// Digest is the SKS digest of Packets, the key's recon element.
	Digest [16]byte
	// Packets are the key's packets in canonical binary form (nil when
	// the query's InlineBytes left them out).
	Packets []byte
	// Size is len(Packets) as stored, whether or not they were read.
	Size int
	// KeyID is the primary key's 64-bit key ID.
	KeyID uint64
	// Version, Algorithm, Bits, Curve, Created, Expires and Revoked
	// describe the primary key; Expires is zero when it never expires.
	Version   int
	Algorithm int
	Bits      int
	Curve     string
	Created   time.Time
	Expires   time.Time
	Revoked   bool
	// UserIDs are the key's user IDs in canonical order.
	UserIDs []StoredUserID
	// FirstSeen is when the key first reached this store, Modified when it
	// last changed.
	FirstSeen time.Time
	Modified  time.Time
}

// StoredUserID is a user ID as the index shows it.
type StoredUserID struct {
	Text    string
	Email   string
	Created time.Time
	Expires time.Time
	Revoked bool
	Primary bool
}

// Change says what storing a key did.
type Change int

// The outcomes of storing a key.
const (
	// Inserted: the key was new.
	Inserted Change = iota + 1
	// Updated: the key was known and the upload added packets.
	Updated
	// Unchanged: the key was known and the upload added nothing;
	// nothing was written.
	Unchanged
	// Blocked: the key is on the blocklist; nothing was written.
	Blocked
	// Reduced: the key is a tombstone (deleted by its owner or blocked
	// with its revocations kept) or carries blocked packets, so the store
	// kept less than it was given: only the revocations of a tombstone
	// merge, blocked user IDs and certifications never do. The store was
	// written only if what it kept changed.
	Reduced
)

// String returns the outcome as HKP answers and logs name it.
func (c Change) String() string {
	switch c {
	case Inserted:
		return "inserted"
	case Updated:
		return "updated"
	case Unchanged:
		return "unchanged"
	case Blocked:
		return "blocked"
	case Reduced:
		return "reduced"
	}
	return "unknown"
}

// Stats summarises the key store.
type Stats struct {
	// Keys is the number of stored keys.
	Keys int64
	// Daily counts keys first seen (New) and changed (Updated) per day,
	// newest day first, for the last days.
	Daily []Daily
}

// Daily is one day's additions.
type Daily struct {
	Day     time.Time
	New     int64
	Updated int64
}

// DigestChange is the notification every key change emits, so that
// every node's recon tree and caches learn it: the digest the key had
// (zero when it was new) and the digest it has now (zero when it was
// deleted).
type DigestChange struct {
	Old, New [16]byte
	// Fingerprint of the key that changed.
	Fingerprint []byte
}

// ErrTooMany is returned when a query matches more keys than the
// caller may receive.
var ErrTooMany = errors.New("too many keys match")

// ErrAnswerTooLarge is returned when the keys a query selects are larger
// together than its MaxBytes.
var ErrAnswerTooLarge = errors.New("the matching keys are too large together")
