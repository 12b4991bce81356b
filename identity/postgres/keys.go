package postgres

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/pgp"
)

// KeyChangesChannel is the NOTIFY channel of key changes. Each payload is
// "OLD:NEW:FINGERPRINT" in hex, OLD empty for a new key.
const KeyChangesChannel = "kith_key_changes"

// keyColumns are the columns of keys that StoredKey is read from.
const keyColumns = `k.id, k.fingerprint, k.digest, k.packets, k.version, k.algorithm, k.bits, k.curve,
	k.created_at, k.expires_at, k.revoked, k.first_seen, k.modified_at`

// AddKey merges key, which has been through the policy, into the store:
// a new key is inserted; a known key is merged with the stored one
// (Policy.Merge) and rewritten only when the merge changed it. Key,
// user IDs, subkeys and the change notification go in one transaction.
func (s *Store) AddKey(ctx context.Context, key *pgp.Key) (identity.KeyChange, error) {
	changes, err := s.AddKeys(ctx, []*pgp.Key{key})
	if err != nil {
		return 0, err
	}
	return changes[0], nil
}

// AddKeys stores a batch of keys in one transaction, as AddKey does for
// one: either every key of the batch is stored or none is. Keys with the
// same fingerprint within the batch are merged first. It returns the
// outcome for each key in input order.
func (s *Store) AddKeys(ctx context.Context, keys []*pgp.Key) ([]identity.KeyChange, error) {
	for _, k := range keys {
		if len(k.Fingerprint()) == 0 {
			return nil, fmt.Errorf("postgres: add keys: a key has no primary key packet")
		}
	}
	var changes []identity.KeyChange
	var err error
	// A concurrent writer may insert the same new key first, or two
	// batches may deadlock on shared keys; both are retried with fresh
	// reads.
	for attempt := 0; attempt < 5; attempt++ {
		changes, err = s.addKeysOnce(ctx, keys)
		if !retryable(err) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: add keys: %w", err)
	}
	return changes, nil
}

// errInsertRace marks a batch that lost an insert race and must rerun.
var errInsertRace = errors.New("a key was inserted concurrently")

func retryable(err error) bool {
	if errors.Is(err, errInsertRace) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40P01", "40001": // deadlock, serialization failure
			return true
		}
	}
	return false
}

// pendingKey is one distinct key of a batch and what becomes of it.
type pendingKey struct {
	fp     []byte
	key    *pgp.Key
	id     int64
	old    []byte // stored digest, nil when new
	change identity.KeyChange
	// tomb: the key is a tombstone, merged by pgp.Policy.Tombstone;
	// reduced: the blocks took something out of what was given.
	tomb, reduced bool
}

func (s *Store) addKeysOnce(ctx context.Context, keys []*pgp.Key) ([]identity.KeyChange, error) {
	// Merge duplicates within the batch.
	byFP := map[string]*pendingKey{}
	var order []*pendingKey
	index := make([]*pendingKey, len(keys))
	for i, k := range keys {
		fp := string(k.Fingerprint())
		if p, ok := byFP[fp]; ok {
			merged, _, err := s.policy.Merge(p.key, k)
			if err != nil {
				return nil, fmt.Errorf("merge duplicate %X in batch: %w", fp, err)
			}
			p.key = merged
		} else {
			p = &pendingKey{fp: []byte(fp), key: k}
			byFP[fp] = p
			order = append(order, p)
		}
		index[i] = byFP[fp]
	}
	// Lock in a fixed order so that concurrent batches cannot deadlock.
	sort.Slice(order, func(i, j int) bool { return bytes.Compare(order[i].fp, order[j].fp) < 0 })
	fps := make([][]byte, len(order))
	for i, p := range order {
		fps[i] = p.fp
	}

	var changed []*pendingKey
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		blocks, err := readBlocks(ctx, tx, fps)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT id, fingerprint, digest, packets FROM keys
			WHERE fingerprint = ANY($1) ORDER BY fingerprint FOR UPDATE`, fps)
		if err != nil {
			return fmt.Errorf("lock stored keys: %w", err)
		}
		type stored struct {
			id      int64
			digest  []byte
			packets []byte
		}
		found := map[string]stored{}
		for rows.Next() {
			var st stored
			var fp []byte
			if err := rows.Scan(&st.id, &fp, &st.digest, &st.packets); err != nil {
				rows.Close()
				return fmt.Errorf("read stored key: %w", err)
			}
			found[string(fp)] = st
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read stored keys: %w", err)
		}

		var inserts, updates []*pendingKey
		for _, p := range order {
			if kb := blocks[string(p.fp)]; kb != nil {
				if err := s.applyBlocks(p, kb); err != nil {
					return err
				}
				if p.change == identity.KeyBlocked {
					continue
				}
			}
			st, ok := found[string(p.fp)]
			if !ok {
				p.change = identity.KeyInserted
				inserts = append(inserts, p)
				continue
			}
			// Both sides are canonical policy output: an equal digest means
			// equal packets, and the merge would change nothing.
			if d := p.key.Digest(); bytes.Equal(d[:], st.digest) {
				p.change = identity.KeyUnchanged
				continue
			}
			storedKey, err := pgp.ParseKey(st.packets)
			if err != nil {
				return fmt.Errorf("parse stored key %X: %w", p.fp, err)
			}
			var merged *pgp.Key
			if p.tomb {
				merged, err = s.policy.Tombstone(storedKey, p.key)
			} else {
				merged, _, err = s.policy.Merge(storedKey, p.key)
			}
			if err != nil {
				return fmt.Errorf("merge %X: %w", p.fp, err)
			}
			d := merged.Digest()
			if bytes.Equal(d[:], st.digest) {
				p.change = identity.KeyUnchanged
				continue
			}
			p.key, p.id, p.old, p.change = merged, st.id, st.digest, identity.KeyUpdated
			updates = append(updates, p)
		}
		if err := insertKeys(ctx, tx, inserts); err != nil {
			return err
		}
		if err := updateKeys(ctx, tx, updates); err != nil {
			return err
		}
		changed = append(inserts, updates...)
		if err := writeComponents(ctx, tx, changed); err != nil {
			return err
		}
		return notifyChanges(ctx, tx, changed)
	})
	if err != nil {
		return nil, err
	}
	if len(changed) > 0 {
		keys := make([]*pgp.Key, len(changed))
		for i, p := range changed {
			keys[i] = p.key
		}
		s.keysChanged(ctx, keys)
	}
	out := make([]identity.KeyChange, len(keys))
	seen := map[*pendingKey]bool{}
	for i, p := range index {
		// A fingerprint repeated in the batch was stored once; its later
		// copies changed nothing more.
		if seen[p] {
			out[i] = identity.KeyUnchanged
			continue
		}
		seen[p] = true
		out[i] = p.change
		if p.reduced && p.change != identity.KeyBlocked {
			out[i] = identity.KeyReduced
		}
	}
	return out, nil
}

// insertKeys inserts new keys through COPY into a staging table, so that a
// batch costs a few round trips whatever its size, and fills in their ids.
func insertKeys(ctx context.Context, tx pgx.Tx, ps []*pendingKey) error {
	if len(ps) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS stage_keys
		(LIKE keys INCLUDING DEFAULTS) ON COMMIT DELETE ROWS`); err != nil {
		return fmt.Errorf("staging table: %w", err)
	}
	cols := []string{"id", "fingerprint", "version", "long_id", "short_id", "digest", "algorithm", "bits", "curve",
		"created_at", "expires_at", "revoked", "packets"}
	rows := make([][]any, len(ps))
	for i, p := range ps {
		d := p.key.Describe()
		digest := p.key.Digest()
		rows[i] = []any{int64(i), p.fp, int16(d.Version), int64(d.KeyID), int32(d.KeyID32()), digest[:],
			int16(d.Algorithm), int32(d.Bits), d.Curve, d.Created, nullTime(d.Expires), d.Revoked, p.key.Bytes()}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"stage_keys"}, cols, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("copy keys: %w", err)
	}
	res, err := tx.Query(ctx, `INSERT INTO keys (fingerprint, version, long_id, short_id, digest, algorithm, bits, curve,
			created_at, expires_at, revoked, packets)
		SELECT fingerprint, version, long_id, short_id, digest, algorithm, bits, curve,
			created_at, expires_at, revoked, packets FROM stage_keys ORDER BY id
		ON CONFLICT DO NOTHING RETURNING id, fingerprint`)
	if err != nil {
		return fmt.Errorf("insert keys: %w", err)
	}
	ids := map[string]int64{}
	for res.Next() {
		var id int64
		var fp []byte
		if err := res.Scan(&id, &fp); err != nil {
			res.Close()
			return fmt.Errorf("insert keys: %w", err)
		}
		ids[string(fp)] = id
	}
	res.Close()
	if err := res.Err(); err != nil {
		return fmt.Errorf("insert keys: %w", err)
	}
	for _, p := range ps {
		id, ok := ids[string(p.fp)]
		if !ok {
			return errInsertRace
		}
		p.id = id
	}
	if _, err := tx.Exec(ctx, "TRUNCATE stage_keys"); err != nil {
		return fmt.Errorf("clear staging table: %w", err)
	}
	return nil
}

// updateKeys rewrites changed keys and drops their old user IDs and
// subkeys, which writeComponents writes anew.
func updateKeys(ctx context.Context, tx pgx.Tx, ps []*pendingKey) error {
	if len(ps) == 0 {
		return nil
	}
	batch := &pgx.Batch{}
	ids := make([]int64, len(ps))
	for i, p := range ps {
		d := p.key.Describe()
		digest := p.key.Digest()
		ids[i] = p.id
		batch.Queue(`UPDATE keys SET digest = $2, packets = $3, version = $4, algorithm = $5, bits = $6, curve = $7,
				created_at = $8, expires_at = $9, revoked = $10, modified_at = now() WHERE id = $1`,
			p.id, digest[:], p.key.Bytes(), int16(d.Version), int16(d.Algorithm), int32(d.Bits), d.Curve,
			d.Created, nullTime(d.Expires), d.Revoked)
	}
	batch.Queue("DELETE FROM user_ids WHERE key_ref = ANY($1)", ids)
	batch.Queue("DELETE FROM subkeys WHERE key_ref = ANY($1)", ids)
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("update keys: %w", err)
	}
	return nil
}

// writeComponents writes the user IDs and subkeys of keys through COPY.
func writeComponents(ctx context.Context, tx pgx.Tx, ps []*pendingKey) error {
	var uids, subs [][]any
	for _, p := range ps {
		d := p.key.Describe()
		for i, u := range d.UserIDs {
			uids = append(uids, []any{p.id, int32(i), cleanText(u.Text), cleanText(u.Email),
				nullTime(u.Created), nullTime(u.Expires), u.Revoked, u.Primary})
		}
		for _, sk := range d.Subkeys {
			subs = append(subs, []any{p.id, sk.Fingerprint, int64(sk.KeyID), int32(sk.KeyID32()),
				int16(sk.Algorithm), int32(sk.Bits), sk.Curve, sk.Created, nullTime(sk.Expires), sk.Revoked,
				sk.Capabilities.Sign, sk.Capabilities.Encrypt, sk.Capabilities.Authenticate})
		}
	}
	if len(uids) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"user_ids"},
			[]string{"key_ref", "position", "uid", "email", "created_at", "expires_at", "revoked", "is_primary"},
			pgx.CopyFromRows(uids)); err != nil {
			return fmt.Errorf("copy user IDs: %w", err)
		}
	}
	if len(subs) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"subkeys"},
			[]string{"key_ref", "fingerprint", "long_id", "short_id", "algorithm", "bits", "curve",
				"created_at", "expires_at", "revoked", "can_sign", "can_encrypt", "can_authenticate"},
			pgx.CopyFromRows(dedupeSubkeys(subs))); err != nil {
			return fmt.Errorf("copy subkeys: %w", err)
		}
	}
	return nil
}

// dedupeSubkeys drops a repeated (key, subkey fingerprint) pair: a key may
// carry the same subkey packet twice under different bindings only in
// malformed input, and the index needs it once.
func dedupeSubkeys(rows [][]any) [][]any {
	seen := map[string]bool{}
	out := rows[:0]
	for _, r := range rows {
		k := fmt.Sprint(r[0]) + ":" + string(r[1].([]byte))
		if !seen[k] {
			seen[k] = true
			out = append(out, r)
		}
	}
	return out
}

// notifyChanges queues one notification per changed key; PostgreSQL
// delivers them when the transaction commits.
func notifyChanges(ctx context.Context, tx pgx.Tx, ps []*pendingKey) error {
	if len(ps) == 0 {
		return nil
	}
	payloads := make([]string, len(ps))
	for i, p := range ps {
		d := p.key.Digest()
		payloads[i] = hex.EncodeToString(p.old) + ":" + hex.EncodeToString(d[:]) + ":" + hex.EncodeToString(p.fp)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", KeyChangesChannel, payloads); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// FindKeys returns the keys matching q, at most q.Limit of them, and
// whether more matched.
func (s *Store) FindKeys(ctx context.Context, q identity.KeyQuery) ([]identity.StoredKey, bool, error) {
	var ids []int64
	var more bool
	var err error
	switch {
	case len(q.Fingerprint) > 0:
		ids, more, err = s.keyIDs(ctx, `SELECT id FROM keys WHERE fingerprint = $1
			UNION SELECT key_ref FROM subkeys WHERE fingerprint = $1`, q.Limit, q.Fingerprint)
	case q.KeyID != 0:
		ids, more, err = s.keyIDs(ctx, `SELECT id FROM keys WHERE long_id = $1
			UNION SELECT key_ref FROM subkeys WHERE long_id = $1`, q.Limit, int64(q.KeyID))
	case q.HasShortKeyID:
		ids, more, err = s.keyIDs(ctx, `SELECT id FROM keys WHERE short_id = $1
			UNION SELECT key_ref FROM subkeys WHERE short_id = $1`, q.Limit, int32(q.ShortKeyID))
	case q.Email != "":
		ids, more, err = s.keyIDs(ctx, `SELECT DISTINCT key_ref FROM user_ids WHERE email = $1`,
			q.Limit, strings.ToLower(q.Email))
	case len(q.Words) > 0:
		ids, more, err = s.keyIDs(ctx, `SELECT DISTINCT key_ref FROM user_ids
			WHERE words @@ plainto_tsquery('simple', regexp_replace(lower($1), '[^[:alnum:]]+', ' ', 'g'))`,
			q.Limit, strings.Join(q.Words, " "))
	default:
		return nil, false, errors.New("postgres: find keys: empty query")
	}
	if err != nil {
		return nil, false, fmt.Errorf("postgres: find keys: %w", err)
	}
	keys, err := s.keysByID(ctx, ids)
	if err != nil {
		return nil, false, fmt.Errorf("postgres: find keys: %w", err)
	}
	return keys, more, nil
}

// keyIDs runs a query yielding key ids, capped at limit (0: no cap), and
// reports whether more matched.
func (s *Store) keyIDs(ctx context.Context, query string, limit int, arg any) ([]int64, bool, error) {
	if limit > 0 {
		query = fmt.Sprintf("SELECT id FROM (%s) AS m(id) ORDER BY id LIMIT %d", query, limit+1)
	}
	rows, err := s.pool.Query(ctx, query, arg)
	if err != nil {
		return nil, false, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, false, err
	}
	if limit > 0 && len(ids) > limit {
		return ids[:limit], true, nil
	}
	return ids, false, nil
}

// KeysByDigest returns the stored keys with the given SKS digests; digests
// the store does not hold are skipped.
func (s *Store) KeysByDigest(ctx context.Context, digests [][16]byte) ([]identity.StoredKey, error) {
	ds := make([][]byte, len(digests))
	for i := range digests {
		ds[i] = digests[i][:]
	}
	rows, err := s.pool.Query(ctx, "SELECT id FROM keys WHERE digest = ANY($1) ORDER BY id", ds)
	if err != nil {
		return nil, fmt.Errorf("postgres: keys by digest: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("postgres: keys by digest: %w", err)
	}
	keys, err := s.keysByID(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("postgres: keys by digest: %w", err)
	}
	return keys, nil
}

// keysByID loads keys with their user IDs, in the order of ids.
func (s *Store) keysByID(ctx context.Context, ids []int64) ([]identity.StoredKey, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, "SELECT "+keyColumns+" FROM keys k WHERE k.id = ANY($1)", ids)
	if err != nil {
		return nil, err
	}
	byID := map[int64]*identity.StoredKey{}
	for rows.Next() {
		var k identity.StoredKey
		var id int64
		var digest []byte
		var version, algo int16
		var bits int32
		var expires *time.Time
		if err := rows.Scan(&id, &k.Fingerprint, &digest, &k.Packets, &version, &algo, &bits, &k.Curve,
			&k.Created, &expires, &k.Revoked, &k.FirstSeen, &k.Modified); err != nil {
			rows.Close()
			return nil, err
		}
		copy(k.Digest[:], digest)
		k.Version, k.Algorithm, k.Bits = int(version), int(algo), int(bits)
		if expires != nil {
			k.Expires = *expires
		}
		byID[id] = &k
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	urows, err := s.pool.Query(ctx, `SELECT key_ref, uid, email, created_at, expires_at, revoked, is_primary
		FROM user_ids WHERE key_ref = ANY($1) ORDER BY key_ref, position`, ids)
	if err != nil {
		return nil, err
	}
	for urows.Next() {
		var ref int64
		var u identity.StoredUserID
		var created, expires *time.Time
		if err := urows.Scan(&ref, &u.Text, &u.Email, &created, &expires, &u.Revoked, &u.Primary); err != nil {
			urows.Close()
			return nil, err
		}
		if created != nil {
			u.Created = *created
		}
		if expires != nil {
			u.Expires = *expires
		}
		if k := byID[ref]; k != nil {
			k.UserIDs = append(k.UserIDs, u)
		}
	}
	urows.Close()
	if err := urows.Err(); err != nil {
		return nil, err
	}
	out := make([]identity.StoredKey, 0, len(ids))
	for _, id := range ids {
		if k := byID[id]; k != nil {
			out = append(out, *k)
		}
	}
	return out, nil
}

// KeyStats counts the stored keys and the keys added and changed on each
// of the last seven days. The total is exact up to a million keys and
// PostgreSQL's planner estimate above, where counting every row would
// cost seconds for a figure that changes all the time.
func (s *Store) KeyStats(ctx context.Context) (identity.KeyStats, error) {
	var st identity.KeyStats
	if err := s.pool.QueryRow(ctx, `SELECT CASE WHEN reltuples > 1000000 THEN reltuples::bigint
			ELSE (SELECT count(*) FROM keys) END
		FROM pg_class WHERE oid = 'keys'::regclass`).Scan(&st.Keys); err != nil {
		return st, fmt.Errorf("postgres: key stats: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT d.day,
			(SELECT count(*) FROM keys WHERE first_seen >= d.day AND first_seen < d.day + interval '1 day'),
			(SELECT count(*) FROM keys WHERE modified_at >= d.day AND modified_at < d.day + interval '1 day'
				AND first_seen < d.day)
		FROM generate_series(date_trunc('day', now()), date_trunc('day', now()) - interval '6 days', interval '-1 day') AS d(day)`)
	if err != nil {
		return st, fmt.Errorf("postgres: key stats: %w", err)
	}
	for rows.Next() {
		var d identity.DailyKeys
		if err := rows.Scan(&d.Day, &d.New, &d.Updated); err != nil {
			rows.Close()
			return st, fmt.Errorf("postgres: key stats: %w", err)
		}
		st.Daily = append(st.Daily, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("postgres: key stats: %w", err)
	}
	return st, nil
}

// DumpKeys calls fn with the packets of every stored key, in the order
// keys were first stored, from one consistent snapshot: keys written
// while the dump runs are either wholly in it or not at all.
func (s *Store) DumpKeys(ctx context.Context, fn func(packets []byte) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("postgres: dump: %w", err)
	}
	defer tx.Rollback(context.Background())
	rows, err := tx.Query(ctx, "SELECT packets FROM keys ORDER BY id")
	if err != nil {
		return fmt.Errorf("postgres: dump: %w", err)
	}
	defer rows.Close()
	var packets []byte
	for rows.Next() {
		if err := rows.Scan(&packets); err != nil {
			return fmt.Errorf("postgres: dump: %w", err)
		}
		if err := fn(packets); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres: dump: %w", err)
	}
	return nil
}

// Digests calls fn with the SKS digest of every stored key, streaming.
func (s *Store) Digests(ctx context.Context, fn func([16]byte) error) error {
	rows, err := s.pool.Query(ctx, "SELECT digest FROM keys")
	if err != nil {
		return fmt.Errorf("postgres: digests: %w", err)
	}
	defer rows.Close()
	var d [16]byte
	var raw []byte
	for rows.Next() {
		if err := rows.Scan(&raw); err != nil {
			return fmt.Errorf("postgres: digests: %w", err)
		}
		copy(d[:], raw)
		if err := fn(d); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres: digests: %w", err)
	}
	return nil
}

// ListenKeyChanges calls fn, from one goroutine, for every key change any
// node commits, until ctx ends or the connection fails; then it returns the
// error. Changes committed while nobody listens are not replayed: callers
// that keep state should reload it after an error.
func (s *Store) ListenKeyChanges(ctx context.Context, fn func(identity.KeyDigestChange)) error {
	return s.WatchKeyChanges(ctx, nil, fn)
}

// WatchKeyChanges is ListenKeyChanges that also closes ready (if not nil)
// once it is listening, so that a caller can load its state after that
// point and miss nothing.
func (s *Store) WatchKeyChanges(ctx context.Context, ready chan<- struct{}, fn func(identity.KeyDigestChange)) error {
	return s.listen(ctx, KeyChangesChannel, ready, func(payload string) {
		// A payload that is not ours to understand never stops listening.
		if c, err := parseKeyChange(payload); err == nil {
			fn(c)
		}
	})
}

func parseKeyChange(payload string) (identity.KeyDigestChange, error) {
	var c identity.KeyDigestChange
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

// nullTime maps the zero time ("never") to SQL NULL.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// cleanText makes a user ID storable as PostgreSQL text: valid UTF-8 and
// no NUL bytes. The packets keep the original bytes.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}
