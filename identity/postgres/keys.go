package postgres

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
)

// KeyChangesChannel is the NOTIFY channel of key changes. Each payload is
// "OLD:NEW:FINGERPRINT" in hex, OLD empty for a new key.
const KeyChangesChannel = "kith_key_changes"

// AddKeys stores a batch of keys in one transaction, as AddKey does for
// one: either every key of the batch is stored or none is. Keys with the
// same fingerprint within the batch are merged first. It returns, for
// each key in input order, the outcome and the key as stored when it was
// written.
func (s *Store) AddKeys(ctx context.Context, ks []*pgp.Key) ([]keys.Written, error) {
	for _, k := range ks {
		if len(k.Fingerprint()) == 0 {
			return nil, fmt.Errorf("postgres: add keys: a key has no primary key packet")
		}
	}
	var changes []keys.Written
	var err error
	// A concurrent writer may insert the same new key first, or two
	// batches may deadlock on shared keys; both are retried with fresh
	// reads.
	for attempt := 0; attempt < 5; attempt++ {
		changes, err = s.addKeysOnce(ctx, ks)
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
	change keys.Change
	// tomb: the key is a tombstone, merged by pgp.Policy.Tombstone;
	// reduced: the blocks took something out of what was given;
	// written: the batch committed a new form of the key.
	tomb, reduced, written bool
}

func (s *Store) addKeysOnce(ctx context.Context, ks []*pgp.Key) ([]keys.Written, error) {
	// Merge duplicates within the batch.
	byFP := map[string]*pendingKey{}
	var order []*pendingKey
	index := make([]*pendingKey, len(ks))
	for i, k := range ks {
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
		policy := s.policy
		policy.Issuers = issuerKeys(ctx, tx)
		// One round trip: the blocklist lock, the blocks, and the stored
		// keys, locked for the merge.
		batch := &pgx.Batch{}
		batch.Queue(blocklistLock, blockLockSpace, fps)
		batch.Queue(blocksQuery, fps)
		batch.Queue(`SELECT id, fingerprint, digest, packets FROM keys
			WHERE fingerprint = ANY($1) ORDER BY fingerprint FOR UPDATE`, fps)
		br := tx.SendBatch(ctx, batch)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("lock blocklist: %w", err)
		}
		brows, err := br.Query()
		if err != nil {
			return fmt.Errorf("read blocklist: %w", err)
		}
		blocks, err := scanBlocks(brows)
		if err != nil {
			return err
		}
		rows, err := br.Query()
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
		if err := br.Close(); err != nil {
			return fmt.Errorf("read stored keys: %w", err)
		}

		var inserts, updates []*pendingKey
		for _, p := range order {
			if kb := blocks[string(p.fp)]; kb != nil {
				if err := s.applyBlocks(p, kb); err != nil {
					return err
				}
				if p.change == keys.Blocked {
					continue
				}
			}
			st, ok := found[string(p.fp)]
			if !ok {
				p.change = keys.Inserted
				inserts = append(inserts, p)
				continue
			}
			// Both sides are canonical policy output: an equal digest means
			// equal packets, and the merge would change nothing.
			if d := p.key.Digest(); bytes.Equal(d[:], st.digest) {
				p.change = keys.Unchanged
				continue
			}
			storedKey, err := pgp.ParseKey(st.packets)
			if err != nil {
				return fmt.Errorf("parse stored key %X: %w", p.fp, err)
			}
			var merged *pgp.Key
			if p.tomb {
				merged, err = policy.Tombstone(storedKey, p.key)
			} else {
				merged, _, err = policy.Merge(storedKey, p.key)
			}
			if err != nil {
				return fmt.Errorf("merge %X: %w", p.fp, err)
			}
			d := merged.Digest()
			if bytes.Equal(d[:], st.digest) {
				p.change = keys.Unchanged
				continue
			}
			p.key, p.id, p.old, p.change = merged, st.id, st.digest, keys.Updated
			updates = append(updates, p)
		}
		if err := insertKeys(ctx, tx, inserts); err != nil {
			return err
		}
		if err := updateKeys(ctx, tx, updates); err != nil {
			return err
		}
		changed = append(inserts, updates...)
		return writeComponents(ctx, tx, changed)
	})
	if err != nil {
		return nil, err
	}
	for _, p := range changed {
		p.written = true
	}
	if len(changed) > 0 {
		s.notifyCommitted(ctx, changed)
	}
	out := make([]keys.Written, len(ks))
	seen := map[*pendingKey]bool{}
	for i, p := range index {
		// A fingerprint repeated in the batch was stored once; its later
		// copies changed nothing more.
		if seen[p] {
			out[i] = keys.Written{Change: keys.Unchanged}
			continue
		}
		seen[p] = true
		out[i] = keys.Written{Change: p.change}
		if p.written {
			out[i].Key = p.key
		}
		if p.reduced && p.change != keys.Blocked {
			out[i].Change = keys.Reduced
		}
	}
	return out, nil
}

// smallBatch is the most keys a write sends as INSERTs of unnested
// arrays, in one round trip per table; larger batches (bulk loads) go
// through COPY, whose staging and type lookups cost more round trips but
// less per key.
const smallBatch = 64

// keyColumns are the columns insertKeys writes, and keyColumnTypes their
// types.
var (
	keyColumns = []string{"fingerprint", "version", "long_id", "short_id", "digest", "algorithm", "bits", "curve",
		"created_at", "expires_at", "revoked", "packets"}
	keyColumnTypes = []string{"bytea", "int2", "int8", "int4", "bytea", "int2", "int4", "text",
		"timestamptz", "timestamptz", "bool", "bytea"}
)

// keyRow is a pending key as a keys row, in keyColumns order.
func keyRow(p *pendingKey) []any {
	d := p.key.Describe()
	digest := p.key.Digest()
	return []any{p.fp, int16(d.Version), int64(d.KeyID), int32(d.KeyID32()), digest[:],
		int16(d.Algorithm), int32(d.Bits), d.Curve, d.Created, nullTime(d.Expires), d.Revoked, p.key.Bytes()}
}

// unnestInsert is an INSERT of rows into table as unnested column
// arrays, with its arguments.
func unnestInsert(table string, cols, types []string, rows [][]any, suffix string) (string, []any) {
	args := make([]any, len(cols))
	casts := make([]string, len(cols))
	for c := range cols {
		col := make([]any, len(rows))
		for r := range rows {
			col[r] = rows[r][c]
		}
		args[c] = col
		casts[c] = fmt.Sprintf("$%d::%s[]", c+1, types[c])
	}
	return "INSERT INTO " + table + " (" + strings.Join(cols, ", ") + ") SELECT * FROM unnest(" +
		strings.Join(casts, ", ") + ") " + suffix, args
}

// insertKeys inserts new keys and fills in their ids: a small batch as
// one INSERT, a large one through COPY, so that a batch costs a few
// round trips whatever its size.
func insertKeys(ctx context.Context, tx pgx.Tx, ps []*pendingKey) error {
	if len(ps) == 0 {
		return nil
	}
	if len(ps) <= smallBatch {
		rows := make([][]any, len(ps))
		for i, p := range ps {
			rows[i] = keyRow(p)
		}
		sql, args := unnestInsert("keys", keyColumns, keyColumnTypes, rows, "ON CONFLICT DO NOTHING RETURNING id, fingerprint")
		res, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return fmt.Errorf("insert keys: %w", err)
		}
		return readInsertedIDs(res, ps)
	}
	// A large batch takes its ids from the sequence first and is copied
	// straight into keys: one pass over the packets, no staging table. A
	// key another writer inserted meanwhile violates the unique index,
	// which fails the copy and reruns the batch with fresh reads.
	res, err := tx.Query(ctx, `SELECT nextval(pg_get_serial_sequence('keys', 'id')) FROM generate_series(1, $1)`, len(ps))
	if err != nil {
		return fmt.Errorf("allocate key ids: %w", err)
	}
	i := 0
	for res.Next() {
		if i < len(ps) {
			if err := res.Scan(&ps[i].id); err != nil {
				res.Close()
				return fmt.Errorf("allocate key ids: %w", err)
			}
		}
		i++
	}
	res.Close()
	if err := res.Err(); err != nil {
		return fmt.Errorf("allocate key ids: %w", err)
	}
	if i != len(ps) {
		return fmt.Errorf("allocate key ids: got %d of %d", i, len(ps))
	}
	rows := make([][]any, len(ps))
	for i, p := range ps {
		rows[i] = append([]any{p.id}, keyRow(p)...)
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"keys"}, append([]string{"id"}, keyColumns...), pgx.CopyFromRows(rows)); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation
			return errInsertRace
		}
		return fmt.Errorf("copy keys: %w", err)
	}
	return nil
}

// readInsertedIDs reads an INSERT's RETURNING id, fingerprint into ps; a
// key it did not insert lost a race with another writer.
func readInsertedIDs(res pgx.Rows, ps []*pendingKey) error {
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

// writeComponents writes the user IDs and subkeys of changed keys: for a
// small batch as one round trip of INSERTs, for a large one through COPY.
func writeComponents(ctx context.Context, tx pgx.Tx, ps []*pendingKey) error {
	if len(ps) == 0 {
		return nil
	}
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
	subs = dedupeSubkeys(subs)
	uidCols := []string{"key_ref", "position", "uid", "email", "created_at", "expires_at", "revoked", "is_primary"}
	subCols := []string{"key_ref", "fingerprint", "long_id", "short_id", "algorithm", "bits", "curve",
		"created_at", "expires_at", "revoked", "can_sign", "can_encrypt", "can_authenticate"}
	if len(ps) <= smallBatch {
		batch := &pgx.Batch{}
		if len(uids) > 0 {
			sql, args := unnestInsert("user_ids", uidCols,
				[]string{"int8", "int4", "text", "text", "timestamptz", "timestamptz", "bool", "bool"}, uids, "")
			batch.Queue(sql, args...)
		}
		if len(subs) > 0 {
			sql, args := unnestInsert("subkeys", subCols,
				[]string{"int8", "bytea", "int8", "int4", "int2", "int4", "text", "timestamptz", "timestamptz", "bool", "bool", "bool", "bool"}, subs, "")
			batch.Queue(sql, args...)
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return fmt.Errorf("insert user IDs and subkeys: %w", err)
		}
		return nil
	}
	if len(uids) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"user_ids"}, uidCols, pgx.CopyFromRows(uids)); err != nil {
			return fmt.Errorf("copy user IDs: %w", err)
		}
	}
	if len(subs) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"subkeys"}, subCols, pgx.CopyFromRows(subs)); err != nil {
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

// byFingerprint selects the ids of the keys whose primary key or a
// subkey has the fingerprint $1 (readKeys reads such keys more directly).
const byFingerprint = `SELECT id FROM keys WHERE fingerprint = $1
			UNION SELECT key_ref FROM subkeys WHERE fingerprint = $1`

// FindKeys returns the keys matching q, at most q.Limit of them, and
// whether more matched, in one round trip to the server.
func (s *Store) FindKeys(ctx context.Context, q keys.Query) ([]keys.Stored, bool, error) {
	var sel string
	var arg any
	switch {
	case len(q.Fingerprint) > 0:
		sel, arg = byFingerprint, q.Fingerprint
	case q.KeyID != 0:
		sel, arg = `SELECT id FROM keys WHERE long_id = $1
			UNION SELECT key_ref FROM subkeys WHERE long_id = $1`, int64(q.KeyID)
	case q.HasShortKeyID:
		sel, arg = `SELECT id FROM keys WHERE short_id = $1
			UNION SELECT key_ref FROM subkeys WHERE short_id = $1`, int32(q.ShortKeyID)
	case q.Email != "":
		sel, arg = `SELECT DISTINCT key_ref FROM user_ids WHERE email = $1`, strings.ToLower(q.Email)
	case len(q.Words) > 0:
		sel, arg = `SELECT DISTINCT key_ref FROM user_ids
			WHERE words @@ plainto_tsquery('simple', regexp_replace(lower($1), '[^[:alnum:]]+', ' ', 'g'))`,
			strings.Join(q.Words, " ")
	case len(q.Digests) > 0:
		ds := make([][]byte, len(q.Digests))
		for i := range q.Digests {
			ds[i] = q.Digests[i][:]
		}
		sel, arg = `SELECT id FROM keys WHERE digest = ANY($1)`, ds
	case len(q.Fingerprints) > 0:
		sel, arg = `SELECT id FROM keys WHERE fingerprint = ANY($1)`, q.Fingerprints
	default:
		return nil, false, errors.New("postgres: find keys: empty query")
	}
	keys, err := s.readKeys(ctx, sel, arg, q)
	if err != nil {
		return nil, false, fmt.Errorf("postgres: find keys: %w", err)
	}
	if q.Limit > 0 && len(keys) > q.Limit {
		return keys[:q.Limit], true, nil
	}
	return keys, false, nil
}

// KeysByDigest returns the stored keys with the given SKS digests; digests
// the store does not hold are skipped.
func (s *Store) KeysByDigest(ctx context.Context, digests [][16]byte) ([]keys.Stored, error) {
	keys, _, err := s.FindKeys(ctx, keys.Query{Digests: digests})
	return keys, err
}

// StreamPackets calls fn with the stored packets of each key whose
// primary fingerprint is in fps, in the order of fps, reading one key at
// a time from the server. fn must not keep packets after it returns. Keys
// the store does not hold are skipped.
func (s *Store) StreamPackets(ctx context.Context, fps [][]byte, fn func(fingerprint, packets []byte) error) error {
	rows, err := s.pool.Query(ctx, `SELECT k.fingerprint, k.packets
		FROM unnest($1::bytea[]) WITH ORDINALITY AS f(fp, n) JOIN keys k ON k.fingerprint = f.fp
		ORDER BY f.n`, fps)
	if err != nil {
		return fmt.Errorf("postgres: stream packets: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		raw := rows.RawValues()
		if err := fn(raw[0], raw[1]); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres: stream packets: %w", err)
	}
	return nil
}

// readKeys reads the keys whose ids the query sel (over $1 = arg)
// yields, at most q.Limit+1 of them, in id order, with their user IDs
// (unless q.NoUserIDs), in one statement. q.MaxBytes and
// q.InlineBytes are applied to the keys' total size, computed beside the
// rows, so packets are read only when wanted.
func (s *Store) readKeys(ctx context.Context, sel string, arg any, q keys.Query) ([]keys.Stored, error) {
	limit := "ALL"
	if q.Limit > 0 {
		limit = strconv.Itoa(q.Limit + 1)
	}
	// readUpTo: the largest total whose packets are read (-1: none).
	readUpTo := int64(math.MaxInt64)
	switch {
	case q.InlineBytes < 0:
		readUpTo = -1
	case q.InlineBytes > 0:
		readUpTo = int64(q.InlineBytes)
	}
	if q.MaxBytes > 0 {
		readUpTo = min(readUpTo, int64(q.MaxBytes))
	}
	if sel == byFingerprint {
		// The commonest lookup (gpg --recv-keys) names one key by its
		// primary fingerprint that no other key carries as a subkey: one
		// index probe each, a statement as cheap to plan as to run. Any
		// other outcome (a subkey's fingerprint, a fingerprint two keys
		// share, none) takes the general statement below.
		keys, err := s.scanKeys(ctx, q, primaryFingerprintSQL(!q.NoUserIDs), arg, readUpTo)
		if err != nil || len(keys) == 1 {
			return keys, err
		}
	}
	// The matching keys: the ids sel yields, each key row read by its id;
	// a lookup by fingerprint reads the rows its index scans find instead,
	// without a second lookup by id.
	from := `(SELECT k.* FROM keys k JOIN (SELECT id FROM (` + sel + `) AS s(id) ORDER BY id LIMIT ` + limit + `) m ON k.id = m.id) k`
	if sel == byFingerprint {
		from = `(SELECT * FROM (SELECT * FROM keys WHERE fingerprint = $1
			UNION ALL SELECT k.* FROM subkeys s JOIN keys k ON k.id = s.key_ref WHERE s.fingerprint = $1 AND k.fingerprint <> $1) u
			ORDER BY id LIMIT ` + limit + `) k`
	}
	columns, uidJoin := readColumns("sum(octet_length(k.packets)) OVER ()", !q.NoUserIDs)
	return s.scanKeys(ctx, q, `SELECT `+columns+`
		FROM `+from+` `+uidJoin+` ORDER BY k.id`, arg, readUpTo)
}

// readColumns lists what scanKeys reads of each key k, with total the
// expression of the answer's size, and, with userIDs, the join that
// brings the user IDs into the same row (as parallel arrays in position
// order).
func readColumns(total string, userIDs bool) (columns, join string) {
	columns = `k.fingerprint, k.digest, CASE WHEN ` + total + ` <= $2::bigint THEN k.packets END,
			octet_length(k.packets), ` + total + `, k.long_id,
			k.version, k.algorithm, k.bits, k.curve, k.created_at, k.expires_at, k.revoked, k.first_seen, k.modified_at`
	if userIDs {
		columns += ", u.texts, u.emails, u.created, u.expires, u.revoked, u.is_primary"
		join = `LEFT JOIN LATERAL (SELECT array_agg(uid ORDER BY position) AS texts,
				array_agg(email ORDER BY position) AS emails, array_agg(created_at ORDER BY position) AS created,
				array_agg(expires_at ORDER BY position) AS expires, array_agg(revoked ORDER BY position) AS revoked,
				array_agg(is_primary ORDER BY position) AS is_primary
			FROM user_ids WHERE key_ref = k.id) u ON true`
	}
	return columns, join
}

// primaryFingerprintSQL is the statement that reads the one key whose
// primary fingerprint is $1 when no other key has it as a subkey, with
// its packets when they are at most $2 bytes.
func primaryFingerprintSQL(userIDs bool) string {
	columns, join := readColumns("octet_length(k.packets)", userIDs)
	return `SELECT ` + columns + `
			FROM keys k ` + join + ` WHERE k.fingerprint = $1
				AND NOT EXISTS (SELECT 1 FROM subkeys s WHERE s.fingerprint = $1 AND s.key_ref <> k.id)`
}

// warm prepares the fingerprint lookups on n of the pool's connections
// (held at once, so that they are distinct), so that the first
// gpg --recv-keys on each does not pay for parsing, planning and its
// backend's first catalog reads. It runs after the migrations, and is
// best effort: a connection that fails is left as it is.
func (s *Store) warm(ctx context.Context, n int) {
	var conns []*pgxpool.Conn
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			return
		}
		conns = append(conns, c)
		for _, userIDs := range []bool{false, true} {
			if rows, err := c.Query(ctx, primaryFingerprintSQL(userIDs), []byte{}, int64(-1)); err == nil {
				rows.Close()
			}
		}
	}
}

// scanKeys runs sql, a statement over $1 = arg and $2 = readUpTo whose
// columns readKeys lists, and reads its rows as stored keys.
func (s *Store) scanKeys(ctx context.Context, q keys.Query, sql string, arg any, readUpTo int64) ([]keys.Stored, error) {
	rows, err := s.pool.Query(ctx, sql, arg, readUpTo)
	if err != nil {
		return nil, err
	}
	var ks []keys.Stored
	for rows.Next() {
		var k keys.Stored
		var digest []byte
		var version, algo int16
		var bits int32
		var expires *time.Time
		var total, longID int64
		var texts, emails []string
		var uCreated, uExpires []*time.Time
		var uRevoked, uPrimary []bool
		dest := []any{&k.Fingerprint, &digest, &k.Packets, &k.Size, &total, &longID, &version, &algo, &bits, &k.Curve,
			&k.Created, &expires, &k.Revoked, &k.FirstSeen, &k.Modified}
		if !q.NoUserIDs {
			dest = append(dest, &texts, &emails, &uCreated, &uExpires, &uRevoked, &uPrimary)
		}
		if err := rows.Scan(dest...); err != nil {
			rows.Close()
			return nil, err
		}
		if q.MaxBytes > 0 && total > int64(q.MaxBytes) {
			rows.Close()
			return nil, fmt.Errorf("%w: %d bytes, limit %d", keys.ErrAnswerTooLarge, total, q.MaxBytes)
		}
		copy(k.Digest[:], digest)
		k.KeyID = uint64(longID)
		k.Version, k.Algorithm, k.Bits = int(version), int(algo), int(bits)
		if expires != nil {
			k.Expires = *expires
		}
		if n := len(texts); n > 0 && len(emails) == n && len(uCreated) == n && len(uExpires) == n && len(uRevoked) == n && len(uPrimary) == n {
			k.UserIDs = make([]keys.StoredUserID, n)
			for i := range n {
				u := keys.StoredUserID{Text: texts[i], Email: emails[i], Revoked: uRevoked[i], Primary: uPrimary[i]}
				if uCreated[i] != nil {
					u.Created = *uCreated[i]
				}
				if uExpires[i] != nil {
					u.Expires = *uExpires[i]
				}
				k.UserIDs[i] = u
			}
		}
		ks = append(ks, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return ks, nil
}

// KeyStats counts the stored keys and the keys added and changed on each
// of the last seven days. The total is exact up to a million keys and
// PostgreSQL's planner estimate above, where counting every row would
// cost seconds for a figure that changes all the time.
func (s *Store) KeyStats(ctx context.Context) (keys.Stats, error) {
	var st keys.Stats
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
		var d keys.Daily
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

// IssuerKeys returns a lookup of stored primary keys by 64-bit key ID, for
// pgp.Policy.Issuers: upload paths set it so that certifications by keys
// the store holds outrank unverifiable ones when a cap applies.
func (s *Store) IssuerKeys(ctx context.Context) pgp.IssuerKeys {
	return issuerKeys(ctx, s.pool)
}

// queryer is a pool or a transaction.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// maxIssuerCandidates bounds the stored keys one key ID lookup returns (a
// 64-bit key ID collides only when someone made it collide).
const maxIssuerCandidates = 8

func issuerKeys(ctx context.Context, q queryer) pgp.IssuerKeys {
	return func(id uint64) [][]byte {
		rows, err := q.Query(ctx, `SELECT packets FROM keys WHERE long_id = $1 LIMIT $2`, int64(id), maxIssuerCandidates)
		if err != nil {
			return nil
		}
		defer rows.Close()
		var out [][]byte
		for rows.Next() {
			var packets []byte
			if rows.Scan(&packets) != nil {
				return out
			}
			if k, err := pgp.ParseKey(packets); err == nil && len(k.Packets()) > 0 {
				out = append(out, k.Packets()[0].Body)
			}
		}
		return out
	}
}
