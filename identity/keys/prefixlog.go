// prefixlog.go: the fingerprint prefix log of draft-ietf-openpgp-hkp
// (which fingerprint prefixes changed in a span of time): what the store
// answers (ChangeLog) and how long a prefix is (PrefixDigits).

package keys

import (
	"context"
	"time"
)

// ChangeLog is what the prefix log reads of the key store: when each
// stored key last changed, and how many keys there are.
//
// A key's change time is set by the one write path (AddKeys, AddBlock),
// whoever writes: an upload, a recon fetch, kith load, kith repair, an
// owner's deletion or an operator's block. It is the time the key was
// inserted, or last rewritten because a merge or a block changed it; a
// write that changes nothing leaves it. A key deleted whole has no row
// and so is in no log (a client holding it has nothing to fetch).
type ChangeLog interface {
	// ChangedPrefixes returns the first digits hexadecimal digits (lower
	// case) of the primary fingerprints of the stored keys whose last
	// change falls in [from, to), each prefix once, sorted. A key changed
	// again later is only in the span of its last change.
	ChangedPrefixes(ctx context.Context, from, to time.Time, digits int) ([]string, error)
	// CountKeys returns the number of stored keys: exact for small
	// stores, PostgreSQL's estimate (within a few percent) for large ones,
	// where counting would cost seconds.
	CountKeys(ctx context.Context) (int64, error)
}

// DefaultPrefixKeys is the fewest stored keys each prefix of the prefix
// log names on average, unless configured otherwise (PrefixDigits).
const DefaultPrefixKeys = 16

// PrefixDigits returns the length, in hexadecimal digits, of the prefixes
// a prefix log over a store of stored keys serves: the longest length at
// which each prefix still names at least minKeys stored keys on average
// (stored / 16^digits >= minKeys), and never less than one digit. minKeys
// below 1 counts as 1.
//
// The log is public, and a fingerprint with the time its key changed is
// a fact about a person; a prefix that many keys share says only that
// one of them changed. Shorter is not free: a client fetches every key it
// holds whose prefix is in the log, so each prefix that names more keys
// makes clients download (and so reveal to the server) more keys that did
// not change. With the default of 16: a store of 100,000 keys serves 3
// digits (4,096 prefixes of about 24 keys each), one of 1,048,576 to 16
// million keys 4 digits (65,536 prefixes), and a client holding 1,000
// keys on a day when 2,000 of those prefixes changed fetches about 30.
func PrefixDigits(stored int64, minKeys int) int {
	if minKeys < 1 {
		minKeys = 1
	}
	if uint64(minKeys) > 1<<55 {
		return 1
	}
	digits := 1
	// next is minKeys * 16^(digits+1), the keys one digit more needs;
	// past 2^63 no int64 store reaches it.
	for next := uint64(minKeys) * 256; stored > 0 && uint64(stored) >= next; next *= 16 {
		digits++
		if next > 1<<59 {
			break
		}
	}
	return digits
}
