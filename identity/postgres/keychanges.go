// keychanges.go: the notification every key change sends to every node
// (KeyChangesChannel), and listening to them.

package postgres

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"

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

// notifyCommitted tells every node of keys a write has committed. It runs
// after the commit, in a transaction of its own: PostgreSQL serialises
// the commits of notifying transactions, WAL flush included, so a NOTIFY
// inside the write would make concurrent uploads wait for each other's
// fsync. A notification lost to a crash between the two leaves other
// nodes' caches stale until their answers expire and their recon trees
// short of the change until they resynchronise from the store (at their
// next reconnect); the store itself is whole either way.
func (s *Store) notifyCommitted(ctx context.Context, ps []*pendingKey) {
	sql, args := notification(ps)
	if _, err := s.pool.Exec(context.WithoutCancel(ctx), sql, args...); err != nil {
		s.log.Warn("postgres: notifying key changes", "keys", len(ps), "err", err)
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
