// blocks.go: the blocklist (keys, user IDs and certifications that are not
// stored or served), the log of operator actions on it, and the recon
// digests refused because of it.

package postgres

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
)

// blockLockSpace is the first key of the advisory locks that order key
// writes after blocklist changes of the same fingerprint ("blok").
const blockLockSpace = 0x626c6f6b

// keyBlocks are the blocks of one fingerprint.
type keyBlocks struct {
	whole   bool // the whole key
	tomb    bool // ... kept as a tombstone
	packets map[[32]byte]bool
}

// blocklistLock is the statement taking the shared blocklist lock of
// every fingerprint in $2 (so that a block committed meanwhile is seen);
// blocksQuery reads their blocks.
const (
	blocklistLock = `SELECT pg_advisory_xact_lock_shared($1, hashtext(encode(f, 'hex')))
		FROM unnest($2::bytea[]) WITH ORDINALITY AS u(f, n) ORDER BY n`
	blocksQuery = `SELECT fingerprint, packet_hash, keep_revocations FROM blocks WHERE fingerprint = ANY($1)`
)

// queryBlocks returns the blocks of fps.
func queryBlocks(ctx context.Context, tx pgx.Tx, fps [][]byte) (map[string]*keyBlocks, error) {
	rows, err := tx.Query(ctx, blocksQuery, fps)
	if err != nil {
		return nil, fmt.Errorf("read blocklist: %w", err)
	}
	return scanBlocks(rows)
}

// scanBlocks reads the rows of blocksQuery, closing them.
func scanBlocks(rows pgx.Rows) (map[string]*keyBlocks, error) {
	defer rows.Close()
	out := map[string]*keyBlocks{}
	for rows.Next() {
		var fp, hash []byte
		var keep bool
		if err := rows.Scan(&fp, &hash, &keep); err != nil {
			return nil, fmt.Errorf("read blocklist: %w", err)
		}
		kb := out[string(fp)]
		if kb == nil {
			kb = &keyBlocks{packets: map[[32]byte]bool{}}
			out[string(fp)] = kb
		}
		if len(hash) == 0 {
			kb.whole, kb.tomb = true, keep
		} else if len(hash) == 32 {
			kb.packets[[32]byte(hash)] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read blocklist: %w", err)
	}
	return out, nil
}

// applyBlocks reduces a key of a write to what its blocks allow: nothing
// (change keys.Blocked), its tombstone, or the key without its blocked
// packets.
func (s *Store) applyBlocks(p *pendingKey, kb *keyBlocks) error {
	switch {
	case kb.whole && !kb.tomb:
		p.change = keys.Blocked
		return nil
	case kb.whole:
		t, err := s.policy.Tombstone(p.key)
		if err != nil {
			return fmt.Errorf("tombstone %X: %w", p.fp, err)
		}
		p.reduced = t.Digest() != p.key.Digest()
		p.key, p.tomb = t, true
		return nil
	}
	k, removed, err := s.policy.WithoutPackets(p.key, func(h [32]byte) bool { return kb.packets[h] })
	if errors.Is(err, pgp.ErrBlockedAway) {
		p.change, p.reduced = keys.Blocked, true
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove blocked packets of %X: %w", p.fp, err)
	}
	p.key, p.reduced = k, removed
	return nil
}

// AddBlock adds b to the blocklist, records the action (who, when, why)
// and applies it to the stored key, all in one transaction: a key blocked
// whole is deleted (or, with KeepRevocations, rewritten as its
// tombstone), a blocked packet is taken out of it. Every node learns of
// the change through the key-change notification, sent in the same
// transaction. A block that exists already is ErrAlreadyBlocked.
func (s *Store) AddBlock(ctx context.Context, b identity.Block) (identity.BlockOutcome, error) {
	if len(b.Fingerprint) == 0 {
		return "", errors.New("postgres: add block: no fingerprint")
	}
	if len(b.PacketHash) != 0 && len(b.PacketHash) != 32 {
		return "", fmt.Errorf("postgres: add block: a packet hash is 32 bytes, not %d", len(b.PacketHash))
	}
	if b.Origin == "" {
		b.Origin = identity.BlockByOperator
	}
	action := "block"
	if b.Origin == identity.BlockByOwner {
		action = "owner-delete"
	}
	var outcome identity.BlockOutcome
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext(encode($2::bytea, 'hex')))",
			blockLockSpace, b.Fingerprint); err != nil {
			return fmt.Errorf("lock blocklist: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO blocks (fingerprint, packet_hash, keep_revocations, origin, reason, actor)
			VALUES ($1, $2, $3, $4, $5, $6)`, b.Fingerprint, nilIfEmpty(b.PacketHash), b.KeepRevocations,
			string(b.Origin), b.Reason, b.Actor); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "23505" {
				return identity.ErrAlreadyBlocked
			}
			return fmt.Errorf("insert block: %w", err)
		}
		if err := logAction(ctx, tx, action, b); err != nil {
			return err
		}
		var id int64
		var digest, packets []byte
		err := tx.QueryRow(ctx, "SELECT id, digest, packets FROM keys WHERE fingerprint = $1 FOR UPDATE",
			b.Fingerprint).Scan(&id, &digest, &packets)
		if errors.Is(err, pgx.ErrNoRows) {
			outcome = identity.BlockKeyNotStored
			return nil
		}
		if err != nil {
			return fmt.Errorf("read stored key: %w", err)
		}
		stored, err := pgp.ParseKey(packets)
		if err != nil {
			return fmt.Errorf("parse stored key %X: %w", b.Fingerprint, err)
		}
		all, err := queryBlocks(ctx, tx, [][]byte{b.Fingerprint})
		if err != nil {
			return err
		}
		p := &pendingKey{fp: b.Fingerprint, key: stored, id: id, old: digest}
		if err := s.applyBlocks(p, all[string(b.Fingerprint)]); err != nil {
			return err
		}
		switch {
		case p.change == keys.Blocked:
			// A key's user IDs (with their words) and subkeys go with it
			// (no foreign key cascades: migration 0013).
			for _, q := range []string{deleteKeyWords, "DELETE FROM user_ids WHERE key_ref = ANY($1)", "DELETE FROM subkeys WHERE key_ref = ANY($1)", "DELETE FROM keys WHERE id = ANY($1)"} {
				if _, err := tx.Exec(ctx, q, []int64{id}); err != nil {
					return fmt.Errorf("delete key: %w", err)
				}
			}
			payload := hex.EncodeToString(digest) + "::" + hex.EncodeToString(b.Fingerprint)
			if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", KeyChangesChannel, payload); err != nil {
				return fmt.Errorf("notify: %w", err)
			}
			outcome = identity.BlockKeyRemoved
			return nil
		case !p.reduced:
			outcome = identity.BlockKeyUnchanged
			return nil
		}
		// An operator's action is rare: notified inside its transaction.
		batch := &pgx.Batch{}
		queueKeyUpdates(batch, []*pendingKey{p})
		queueComponents(batch, []*pendingKey{p})
		sql, args := notification([]*pendingKey{p})
		batch.Queue(sql, args...)
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return fmt.Errorf("rewrite key: %w", err)
		}
		outcome = identity.BlockKeyCleaned
		if p.tomb {
			outcome = identity.BlockKeyTombstoned
		}
		return nil
	})
	if errors.Is(err, identity.ErrAlreadyBlocked) {
		return "", err
	}
	if err != nil {
		return "", fmt.Errorf("postgres: add block %X: %w", b.Fingerprint, err)
	}
	return outcome, nil
}

// RemoveBlock takes the block of fp (of its packet with hash, if not
// empty) off the blocklist and records who did it and why. The key does
// not come back by itself: the next upload or recon fetch of it is
// stored, and recon peers' digests refused for it may be fetched again.
// ErrNotBlocked when there is no such block.
func (s *Store) RemoveBlock(ctx context.Context, fp, hash []byte, actor, reason string) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext(encode($2::bytea, 'hex')))",
			blockLockSpace, fp); err != nil {
			return fmt.Errorf("lock blocklist: %w", err)
		}
		var keep bool
		err := tx.QueryRow(ctx, `DELETE FROM blocks WHERE fingerprint = $1
			AND coalesce(packet_hash, '\x'::bytea) = coalesce($2, '\x'::bytea) RETURNING keep_revocations`,
			fp, nilIfEmpty(hash)).Scan(&keep)
		if errors.Is(err, pgx.ErrNoRows) {
			return identity.ErrNotBlocked
		}
		if err != nil {
			return fmt.Errorf("delete block: %w", err)
		}
		b := identity.Block{Fingerprint: fp, PacketHash: hash, KeepRevocations: keep, Reason: reason, Actor: actor}
		if err := logAction(ctx, tx, "unblock", b); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM recon_refused WHERE fingerprint = $1", fp); err != nil {
			return fmt.Errorf("forget refused digests: %w", err)
		}
		return nil
	})
	if errors.Is(err, identity.ErrNotBlocked) {
		return err
	}
	if err != nil {
		return fmt.Errorf("postgres: remove block %X: %w", fp, err)
	}
	return nil
}

// Blocks returns the blocklist, oldest first.
func (s *Store) Blocks(ctx context.Context) ([]identity.Block, error) {
	rows, err := s.pool.Query(ctx, `SELECT fingerprint, packet_hash, keep_revocations, origin, reason, actor, created_at
		FROM blocks ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("postgres: blocks: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (identity.Block, error) {
		var b identity.Block
		var origin string
		err := r.Scan(&b.Fingerprint, &b.PacketHash, &b.KeepRevocations, &origin, &b.Reason, &b.Actor, &b.Created)
		b.Origin = identity.BlockOrigin(origin)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: blocks: %w", err)
	}
	return out, nil
}

// OperatorActions returns the log of blocklist changes, oldest first;
// with fp set, only those of that key.
func (s *Store) OperatorActions(ctx context.Context, fp []byte) ([]identity.OperatorAction, error) {
	rows, err := s.pool.Query(ctx, `SELECT action, fingerprint, packet_hash, keep_revocations, reason, actor, created_at
		FROM operator_actions WHERE $1::bytea IS NULL OR fingerprint = $1 ORDER BY id`, nilIfEmpty(fp))
	if err != nil {
		return nil, fmt.Errorf("postgres: operator actions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (identity.OperatorAction, error) {
		var a identity.OperatorAction
		err := r.Scan(&a.Action, &a.Fingerprint, &a.PacketHash, &a.KeepRevocations, &a.Reason, &a.Actor, &a.Created)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: operator actions: %w", err)
	}
	return out, nil
}

// logAction appends one operator action.
func logAction(ctx context.Context, tx pgx.Tx, action string, b identity.Block) error {
	if _, err := tx.Exec(ctx, `INSERT INTO operator_actions (action, fingerprint, packet_hash, keep_revocations, reason, actor)
		VALUES ($1, $2, $3, $4, $5, $6)`, action, b.Fingerprint, nilIfEmpty(b.PacketHash), b.KeepRevocations,
		b.Reason, b.Actor); err != nil {
		return fmt.Errorf("log operator action: %w", err)
	}
	return nil
}

// RefuseDigest remembers that the recon digest d, which a peer served for
// the key fp, was refused or stored only in part, and why; RemoveBlock of
// fp forgets it again.
func (s *Store) RefuseDigest(ctx context.Context, d [16]byte, fp []byte, reason string) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO recon_refused (digest, fingerprint, reason) VALUES ($1, $2, $3)
		ON CONFLICT (digest) DO UPDATE SET reason = excluded.reason, refused_at = now()`,
		d[:], nilIfEmpty(fp), reason); err != nil {
		return fmt.Errorf("postgres: refuse digest: %w", err)
	}
	return nil
}

// RefusedDigests returns which of ds were refused (RefuseDigest).
func (s *Store) RefusedDigests(ctx context.Context, ds [][16]byte) (map[[16]byte]bool, error) {
	raw := make([][]byte, len(ds))
	for i := range ds {
		raw[i] = ds[i][:]
	}
	rows, err := s.pool.Query(ctx, "SELECT digest FROM recon_refused WHERE digest = ANY($1)", raw)
	if err != nil {
		return nil, fmt.Errorf("postgres: refused digests: %w", err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("postgres: refused digests: %w", err)
	}
	out := make(map[[16]byte]bool, len(got))
	for _, d := range got {
		if len(d) == 16 {
			out[[16]byte(d)] = true
		}
	}
	return out, nil
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}
