// blocks.go: keys, user IDs and certifications the server must not store
// or serve, because an operator blocked them or the key's owner deleted
// the key.

package identity

import (
	"context"
	"errors"
	"time"
)

// BlockOrigin says who made a block.
type BlockOrigin string

// The origins of a block.
const (
	// BlockByOperator: `kith block add`.
	BlockByOperator BlockOrigin = "operator"
	// BlockByOwner: the key's holder signed a deletion statement.
	BlockByOwner BlockOrigin = "owner"
)

// Block is one entry of the blocklist. A block with no PacketHash covers
// the whole key with Fingerprint: it is removed from the store and refused
// on every write, or, with KeepRevocations, kept as a tombstone (the
// primary key and its revocations) that accepts nothing but revocations.
// A block with a PacketHash covers one user ID, user attribute or
// signature packet of that key (pgp.PacketHash): the key is stored and
// served without it.
type Block struct {
	Fingerprint     []byte
	PacketHash      []byte
	KeepRevocations bool
	Origin          BlockOrigin
	Reason          string
	// Actor names who made the block: an operator's name, or the
	// identity or key that signed a deletion.
	Actor   string
	Created time.Time
}

// WholeKey reports whether b covers the whole key.
func (b Block) WholeKey() bool { return len(b.PacketHash) == 0 }

// OperatorAction is one record of the log of blocklist changes: who did
// what to which key, when and why.
type OperatorAction struct {
	// Action is "block", "unblock" or "owner-delete".
	Action          string
	Fingerprint     []byte
	PacketHash      []byte
	KeepRevocations bool
	Reason          string
	Actor           string
	Created         time.Time
}

// BlockOutcome says what adding a block did to the stored key.
type BlockOutcome string

// The outcomes of adding a block.
const (
	BlockKeyNotStored  BlockOutcome = "the key is not stored; it will be refused"
	BlockKeyRemoved    BlockOutcome = "the key was removed from the store"
	BlockKeyTombstoned BlockOutcome = "the key was reduced to its primary key and revocations"
	BlockKeyCleaned    BlockOutcome = "the key is stored without the blocked packet"
	BlockKeyUnchanged  BlockOutcome = "the stored key does not carry the blocked packet"
	// BlockKeyAlreadyGone: a deletion of a key blocked or deleted before.
	BlockKeyAlreadyGone BlockOutcome = "the key was deleted or blocked before"
)

// Blocklist is the store of blocks (identity/postgres.Store is one).
type Blocklist interface {
	// AddBlock adds b and applies it to the stored key in one
	// transaction; ErrAlreadyBlocked if the same block exists.
	AddBlock(ctx context.Context, b Block) (BlockOutcome, error)
}

// Errors of blocklist changes.
var (
	// ErrAlreadyBlocked: the key or packet is blocked already.
	ErrAlreadyBlocked = errors.New("already blocked")
	// ErrNotBlocked: there is no such block to remove.
	ErrNotBlocked = errors.New("not blocked")
)
