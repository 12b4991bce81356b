package postgres

// lookups.go: lookups by primary fingerprint, the commonest read (gpg
// --recv-keys), answered together while they wait for a connection
// (batcher).

import (
	"context"
	"fmt"

	"github.com/kith-keyserver/kith/identity/keys"
)

// fingerprintLookup is a lookup by primary fingerprint.
type fingerprintLookup struct {
	fp       []byte
	userIDs  bool  // read the user IDs too
	readUpTo int64 // read the packets when at most this many bytes
}

// sameLookupForm reports whether a and b can share a statement.
func sameLookupForm(a, b fingerprintLookup) bool {
	return a.userIDs == b.userIDs && a.readUpTo == b.readUpTo
}

// lookupAnswer is the key a lookup found, if found.
type lookupAnswer struct {
	key   keys.Stored
	found bool
}

// lookupPrimary reads the one key whose primary fingerprint is fp when no
// other key has fp as a subkey's (primaryFingerprintsSQL), with its user
// IDs or not, with its packets when they are at most readUpTo bytes;
// found is false when fp names no key so (none, or a subkey), for the
// general statement to answer.
func (s *Store) lookupPrimary(ctx context.Context, fp []byte, userIDs bool, readUpTo int64) (key keys.Stored, found bool, err error) {
	a, err := s.lookups.do(ctx, fingerprintLookup{fp: fp, userIDs: userIDs, readUpTo: readUpTo})
	return a.key, a.found, err
}

// runLookups answers a batch of lookups of one form with one statement.
// Lookups of the same fingerprint share the key read.
func (s *Store) runLookups(ctx context.Context, qs []fingerprintLookup) ([]lookupAnswer, error) {
	fps := make([][]byte, 0, len(qs))
	seen := make(map[string]bool, len(qs))
	for _, q := range qs {
		if !seen[string(q.fp)] {
			seen[string(q.fp)] = true
			fps = append(fps, q.fp)
		}
	}
	form := qs[0]
	found, err := s.scanKeys(ctx, keys.Query{NoUserIDs: !form.userIDs}, primaryFingerprintsSQL(form.userIDs), fps, form.readUpTo)
	if err != nil {
		return nil, fmt.Errorf("read keys by fingerprint: %w", err)
	}
	byFP := make(map[string]keys.Stored, len(found))
	for _, k := range found {
		byFP[string(k.Fingerprint)] = k
	}
	answers := make([]lookupAnswer, len(qs))
	for i, q := range qs {
		answers[i].key, answers[i].found = byFP[string(q.fp)]
	}
	return answers, nil
}

// primaryFingerprintsSQL is the statement that reads, for each
// fingerprint of the array $1, the one key whose primary fingerprint it
// is when no other key has it as a subkey's, with its packets when they
// are at most $2 bytes. The array reaches the plan only through an
// InitPlan: PostgreSQL then keeps one generic plan, where it planned
// every call anew for the array as a parameter (~0.5 ms, more than the
// statement's run).
func primaryFingerprintsSQL(userIDs bool) string {
	columns, join := readColumns("octet_length(k.packets)", userIDs)
	return `SELECT ` + columns + `
			FROM unnest((SELECT $1::bytea[])) AS f(fp) JOIN keys k ON k.fingerprint = f.fp ` + join + `
			WHERE NOT EXISTS (SELECT 1 FROM subkeys s WHERE s.fingerprint = f.fp AND s.key_ref <> k.id)`
}
