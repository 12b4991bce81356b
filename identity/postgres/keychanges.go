// keychanges.go: the notification every key change sends to every node
// (KeyChangesChannel), and listening to them.

package postgres

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
)

// KeyChangesChannel is the NOTIFY channel of key changes. Each payload is
// "OLD:NEW:FINGERPRINT" in hex, OLD empty for a new key.
const KeyChangesChannel = "kith_key_changes"

// notification is the statement sending one notification per changed
// key, with its arguments.
func notification(ps []*pendingKey) (string, []any) {
	payloads := make([]string, len(ps))
	for i, p := range ps {
		d := p.key.Digest()
		payloads[i] = hex.EncodeToString(p.old) + ":" + hex.EncodeToString(d[:]) + ":" + hex.EncodeToString(p.fp)
	}
	return "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", []any{KeyChangesChannel, payloads}
}

// afterKeyWrite is what follows a key write's COMMIT in the same round
// trip (writeTxn.commit), in a transaction of its own and only when the
// write committed: it tells every node of the keys the write changed, and
// reads which of them an identity names, so that the keys Service
// refreshes the links of those only, without a query of its own (which,
// beside many lookups, waited for a connection longer than the write
// took). readAfterKeyWrite reads the answers.
//
// The notification runs after the commit, in a transaction of its own:
// PostgreSQL serialises the commits of notifying transactions, WAL flush
// included, so a NOTIFY inside the write would make concurrent uploads
// wait for each other's fsync. A notification lost to a crash between the
// two leaves other nodes' caches stale until their answers expire and
// their recon trees short of the change until they resynchronise from the
// store (at their next reconnect); the store itself is whole either way.
// The links are read after the commit too, as identity.Service.SyncKeys
// reads them: a link made meanwhile either is seen here or sees the key.
func afterKeyWrite(ps []*pendingKey) *pgx.Batch {
	sql, args := notification(ps)
	values := make([]string, len(ps))
	for i, p := range ps {
		values[i] = identity.PGPFactor(p.fp).Value
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	b.Queue(linkedKeysSQL, values)
	return b
}

// readAfterKeyWrite reads the answers of afterKeyWrite's statements and
// marks the keys no identity names (pendingKey.unlinked). A failure is
// logged, never returned: the write has committed.
func (s *Store) readAfterKeyWrite(br pgx.BatchResults, ps []*pendingKey) {
	if _, err := br.Exec(); err != nil {
		s.log.Warn("postgres: notifying key changes", "keys", len(ps), "err", err)
	}
	rows, err := br.Query()
	if err != nil {
		return // the Service refreshes every key's links
	}
	linked, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	named := make(map[string]bool, len(linked))
	for _, v := range linked {
		named[v] = true
	}
	for _, p := range ps {
		p.unlinked = !named[identity.PGPFactor(p.fp).Value]
	}
}

// ListenKeyChanges calls fn, from one goroutine, for every key change any
// node commits, until ctx ends or the connection fails; then it returns the
// error. Changes committed while nobody listens are not replayed: callers
// that keep state should reload it after an error.
func (s *Store) ListenKeyChanges(ctx context.Context, fn func(keys.DigestChange)) error {
	return s.WatchKeyChanges(ctx, nil, fn)
}

// WatchKeyChanges is ListenKeyChanges that also closes ready (if not nil)
// once it is listening, so that a caller can load its state after that
// point and miss nothing.
func (s *Store) WatchKeyChanges(ctx context.Context, ready chan<- struct{}, fn func(keys.DigestChange)) error {
	return s.listen(ctx, KeyChangesChannel, ready, func(payload string) {
		// A payload that is not ours to understand never stops listening.
		if c, err := parseKeyChange(payload); err == nil {
			fn(c)
		}
	})
}

func parseKeyChange(payload string) (keys.DigestChange, error) {
	var c keys.DigestChange
	parts := strings.Split(payload, ":")
	if len(parts) != 3 {
		return c, fmt.Errorf("bad key change %q", payload)
	}
	for i, dst := range []*[16]byte{&c.Old, &c.New} {
		if parts[i] == "" {
			continue
		}
		b, err := hex.DecodeString(parts[i])
		if err != nil || len(b) != 16 {
			return c, fmt.Errorf("bad key change %q", payload)
		}
		copy(dst[:], b)
	}
	fp, err := hex.DecodeString(parts[2])
	if err != nil {
		return c, fmt.Errorf("bad key change %q", payload)
	}
	c.Fingerprint = fp
	return c, nil
}
