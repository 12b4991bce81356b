// store.go: the one interface of the key store (identity/postgres.Store
// implements it), and the small parts of it that frontends take.

package keys

import (
	"context"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/pgp"
)

// Finder finds stored keys.
type Finder interface {
	// FindKeys returns the keys q selects, at most q.Limit of them, and
	// whether more matched. No match is an empty result, not an error.
	FindKeys(ctx context.Context, q Query) (keys []Stored, more bool, err error)
}

// Reader is what a lookup frontend (HKP, the pages) reads of the store.
type Reader interface {
	Finder
	// KeysByDigest returns the stored keys with these SKS digests; digests
	// the store does not hold are left out.
	KeysByDigest(ctx context.Context, digests [][16]byte) ([]Stored, error)
	// StreamPackets calls fn with the packets of each key whose primary
	// fingerprint is in fps, in that order, one key in memory at a time;
	// fn must not keep packets. Keys the store does not hold are skipped.
	StreamPackets(ctx context.Context, fps [][]byte, fn func(fingerprint, packets []byte) error) error
	// KeyStats summarises the store.
	KeyStats(ctx context.Context) (Stats, error)
}

// Listener reports the key changes every node commits.
type Listener interface {
	// ListenKeyChanges calls fn for every key change any node commits,
	// until ctx ends or the listening connection fails. Changes committed
	// while nobody listens are not replayed.
	ListenKeyChanges(ctx context.Context, fn func(DigestChange)) error
	// WatchKeyChanges is ListenKeyChanges that also closes ready (if not
	// nil) once it listens, so that a caller can load its state after
	// that point and miss nothing.
	WatchKeyChanges(ctx context.Context, ready chan<- struct{}, fn func(DigestChange)) error
}

// Lister walks every stored key.
type Lister interface {
	// Digests calls fn with the SKS digest of every stored key.
	Digests(ctx context.Context, fn func([16]byte) error) error
	// DumpKeys calls fn with the packets of every stored key, in the order
	// keys were first stored, from one consistent snapshot.
	DumpKeys(ctx context.Context, fn func(packets []byte) error) error
}

// Refusals remembers the recon digests whose keys were refused, for every
// node and past restarts, so that they are not fetched again every round.
type Refusals interface {
	// RefuseDigest remembers that the key with digest d (fingerprint fp)
	// was refused, and why.
	RefuseDigest(ctx context.Context, d [16]byte, fp []byte, reason string) error
	// RefusedDigests returns which of ds are remembered as refused.
	RefusedDigests(ctx context.Context, ds [][16]byte) (map[[16]byte]bool, error)
}

// Writer is the write side of the store, which only the Service uses.
type Writer interface {
	// AddKey merges key, which has passed the key policy, into the
	// store: a new key is inserted; a known key is merged with the stored
	// one and rewritten only when the merge changed it. It returns once
	// the write has committed and every node has been notified (or the
	// notification has failed and been logged); it calls nothing back.
	AddKey(ctx context.Context, key *pgp.Key) (Written, error)
	// AddKeys is AddKey for a batch, in one transaction: either every key
	// is stored or none is. It returns the outcome of each key in input
	// order.
	AddKeys(ctx context.Context, keys []*pgp.Key) ([]Written, error)
	// IssuerKeys looks up stored keys by key ID for pgp.Policy.Issuers,
	// so that certifications the store can verify outrank unverifiable
	// ones when a cap applies.
	IssuerKeys(ctx context.Context) pgp.IssuerKeys
	// AddBlock adds b to the blocklist and applies it to the stored key,
	// in one transaction; identity.ErrAlreadyBlocked if the same block
	// exists. Every node learns of the change from its notification.
	AddBlock(ctx context.Context, b identity.Block) (identity.BlockOutcome, error)
}

// Store is the key store: everything the Service and the frontends ask of
// it. identity/postgres.Store implements it.
type Store interface {
	Reader
	Listener
	Lister
	Refusals
	ChangeLog
	Writer
}

// Written is what storing one key did: its outcome and, when the store
// wrote anything, the key as it is stored now.
type Written struct {
	Change Change
	// Key is the stored form after the write; nil when nothing was
	// written (Unchanged, Blocked, or Reduced to what was stored).
	Key *pgp.Key
	// Unlinked: the store found, after the write committed, that no
	// identity names the key, so that its links need no refresh (the
	// Service then skips identity.Service.SyncKeys for it). False when
	// the store did not look.
	Unlinked bool
}

// Outcome is what a store's batch write did to one distinct key of the
// batch (WrittenBatch tells it per key of the batch).
type Outcome struct {
	Change Change
	// Key is the key's form after the write; Written says the batch
	// committed it.
	Key     *pgp.Key
	Written bool
	// Reduced says the blocks took something out of what was given.
	Reduced bool
	// Unlinked is Written.Unlinked.
	Unlinked bool
}

// WrittenBatch returns what a batch write did to each key of the batch,
// in the batch's order, as every store answers AddKeys: index[i] is the
// distinct key the i-th one was (copies of one fingerprint are stored
// once, and the later copies changed nothing more), and outcome says what
// storing it did. A key is Reduced when the blocks took something out of
// it, unless it was Blocked whole; its Key is set only when the batch
// committed it.
func WrittenBatch[K comparable](index []K, outcome func(K) Outcome) []Written {
	out := make([]Written, len(index))
	seen := make(map[K]bool, len(index))
	for i, k := range index {
		if seen[k] {
			out[i] = Written{Change: Unchanged}
			continue
		}
		seen[k] = true
		o := outcome(k)
		out[i] = Written{Change: o.Change}
		if o.Written {
			out[i].Key, out[i].Unlinked = o.Key, o.Unlinked
		}
		if o.Reduced && o.Change != Blocked {
			out[i].Change = Reduced
		}
	}
	return out
}
