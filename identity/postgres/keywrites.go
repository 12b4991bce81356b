// keywrites.go: storing OpenPGP keys: a batch merged with the stored keys
// in one transaction (AddKeys; AddKey in group.go queues single keys into
// such batches), the rows it writes, and what each key became.

package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
)

// AddKeys stores a batch of keys in one transaction, as AddKey does for
// one: either every key of the batch is stored or none is. Keys with the
// same fingerprint within the batch are merged first. It returns, for
// each key in input order, the outcome and the key as stored when it was
// written. A batch that merges with stored keys while this Store's
// indexes are deferred (DeferIndexes) builds them first.
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
		if errors.Is(err, errNeedIndexes) {
			if err = s.buildDeferredNow(ctx); err == nil {
				changes, err = s.addKeysOnce(ctx, ks)
			}
		}
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

// insertRace reports whether err is the unique violation of a keys row
// another writer inserted first (by fingerprint): the batch reruns with
// fresh reads.
func insertRace(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.TableName == "keys" // unique_violation
}

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
	// written: the batch committed a new form of the key; unlinked: after
	// the commit, no identity named it (afterKeyWrite).
	tomb, reduced, written, unlinked bool
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
	small := len(order) <= smallBatch
	err := s.writeTx(ctx, func(ctx context.Context, tx *writeTxn) error {
		policy := s.policy
		policy.Issuers = issuerKeys(ctx, tx)
		policy.Budget = keys.VerifyBudgetOf(ctx)
		// One round trip with the BEGIN: the blocklist lock, the blocks,
		// the stored keys, locked for the merge, and for a small batch an
		// id for each key that may be new, so that its rows can be
		// written without waiting for the keys row's id.
		batch := &pgx.Batch{}
		batch.Queue(blocklistLock, blockLockSpace, fps)
		batch.Queue(blocksQuery, fps)
		batch.Queue(`SELECT id, fingerprint, digest, packets FROM keys
			WHERE fingerprint = ANY($1) ORDER BY fingerprint FOR UPDATE`, fps)
		if small {
			batch.Queue(allocateKeyIDs, len(order))
		}
		br, err := tx.SendBatch(ctx, batch)
		if err != nil {
			return err
		}
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
		var ids []int64
		if small {
			rows, err := br.Query()
			if ids, err = readKeyIDs(rows, err, len(order)); err != nil {
				return err
			}
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
			if s.deferred.Load() != nil {
				// The merge reads through the deferred indexes (the
				// issuers of certifications, the words to delete).
				return errNeedIndexes
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
		changed = append(inserts, updates...)
		writes := &pgx.Batch{}
		if small {
			// One more round trip: every row, the COMMIT, and what follows
			// the commit.
			for i, p := range inserts {
				p.id = ids[i]
			}
			queueKeyInserts(writes, inserts)
			queueKeyUpdates(writes, updates)
			queueComponents(writes, changed)
		} else {
			// COPY is a protocol exchange of its own; the updates drop the
			// old rows before the new ones are copied.
			if err := copyKeys(ctx, tx, inserts); err != nil {
				return err
			}
			if len(updates) > 0 {
				ub := &pgx.Batch{}
				queueKeyUpdates(ub, updates)
				ubr, err := tx.SendBatch(ctx, ub)
				if err != nil {
					return err
				}
				if err := ubr.Close(); err != nil {
					return fmt.Errorf("update keys: %w", err)
				}
			}
			if err := copyComponents(ctx, tx, writes, changed, s.goLexemes); err != nil {
				return err
			}
		}
		var after *pgx.Batch
		if len(changed) > 0 {
			after = afterKeyWrite(changed)
		}
		res, err := tx.commit(ctx, writes, after)
		if err != nil {
			if insertRace(err) {
				return errInsertRace
			}
			return fmt.Errorf("write keys: %w", err)
		}
		defer res.Close()
		if after != nil {
			s.readAfterKeyWrite(res, changed)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, p := range changed {
		p.written = true
	}
	return keys.WrittenBatch(index, func(p *pendingKey) keys.Outcome {
		return keys.Outcome{Change: p.change, Key: p.key, Written: p.written, Reduced: p.reduced, Unlinked: p.unlinked}
	}), nil
}

// smallBatch is the most keys a write sends as INSERTs of unnested
// arrays, all in the round trip of its COMMIT; larger batches (bulk
// loads) go through COPY, which costs more round trips but less per key.
const smallBatch = 64

// keyColumns are the columns of a keys row (keyRow), and keyColumnTypes their
// types.
var (
	keyColumns = []string{"id", "fingerprint", "version", "long_id", "short_id", "digest", "algorithm", "bits", "curve",
		"created_at", "expires_at", "revoked", "packets"}
	keyColumnTypes = []string{"int8", "bytea", "int2", "int8", "int4", "bytea", "int2", "int4", "text",
		"timestamptz", "timestamptz", "bool", "bytea"}
)

// keyRow is a pending key, whose id is set, as a keys row, in keyColumns
// order.
func keyRow(p *pendingKey) []any {
	d := p.key.Describe()
	digest := p.key.Digest()
	return []any{p.id, p.fp, int16(d.Version), int64(d.KeyID), int32(d.KeyID32()), digest[:],
		int16(d.Algorithm), int32(d.Bits), d.Curve, d.Created, nullTime(d.Expires), d.Revoked, p.key.Bytes()}
}

// unnestInsert is an INSERT of rows into table as unnested column
// arrays, with its arguments. computed, when set, is one more column:
// its name and the SQL that makes it from the row's columns (u.<name>).
func unnestInsert(table string, cols, types []string, rows [][]any, computed *[2]string) (string, []any) {
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
	names := strings.Join(cols, ", ")
	target, values := names, "u.*"
	if computed != nil {
		target, values = target+", "+computed[0], values+", "+computed[1]
	}
	return "INSERT INTO " + table + " (" + target + ") SELECT " + values + " FROM unnest(" +
		strings.Join(casts, ", ") + ") AS u(" + names + ")", args
}

// allocateKeyIDs takes $1 ids from the keys' sequence, for the keys of a
// small batch that turn out to be new (those that do not leave a gap) or
// of a bulk load's batch. The sequence is named once, in an InitPlan: as
// the argument of nextval, pg_get_serial_sequence and the name's lookup
// ran for every id, 7 ms of the 8 ms that 1,000 ids took.
const allocateKeyIDs = `SELECT nextval((SELECT pg_get_serial_sequence('keys', 'id')::regclass)) FROM generate_series(1, $1)`

// readKeyIDs reads the n ids of allocateKeyIDs from its rows, or the
// error of running it.
func readKeyIDs(rows pgx.Rows, err error, n int) ([]int64, error) {
	if err != nil {
		return nil, fmt.Errorf("allocate key ids: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("allocate key ids: %w", err)
	}
	if len(ids) != n {
		return nil, fmt.Errorf("allocate key ids: got %d of %d", len(ids), n)
	}
	return ids, nil
}

// queueKeyInserts queues the INSERT of new keys, whose ids are set. A key
// another writer inserted meanwhile violates the unique index on the
// fingerprint, which fails the transaction and reruns the batch with
// fresh reads.
func queueKeyInserts(b *pgx.Batch, ps []*pendingKey) {
	if len(ps) == 0 {
		return
	}
	rows := make([][]any, len(ps))
	for i, p := range ps {
		rows[i] = keyRow(p)
	}
	sql, args := unnestInsert("keys", keyColumns, keyColumnTypes, rows, nil)
	b.Queue(sql, args...)
}

// copyKeys copies new keys into keys, taking their ids from the sequence
// first: one pass over the packets, no staging table. A key another
// writer inserted meanwhile violates the unique index, which fails the
// copy and reruns the batch with fresh reads.
func copyKeys(ctx context.Context, tx *writeTxn, ps []*pendingKey) error {
	if len(ps) == 0 {
		return nil
	}
	res, err := tx.Query(ctx, allocateKeyIDs, len(ps))
	ids, err := readKeyIDs(res, err, len(ps))
	if err != nil {
		return err
	}
	rows := make([][]any, len(ps))
	for i, p := range ps {
		p.id = ids[i]
		rows[i] = keyRow(p)
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"keys"}, keyColumns, pgx.CopyFromRows(rows)); err != nil {
		if insertRace(err) {
			return errInsertRace
		}
		return fmt.Errorf("copy keys: %w", err)
	}
	return nil
}

// insertKeyWords writes the key_words rows (migration 0019) of the keys
// $1 from their user_ids rows, written just before in the same
// transaction: the lexemes of user_ids.words, the very tsvector a search
// by words checks, so that no key a search matches lacks the row of one of
// its words.
const insertKeyWords = `INSERT INTO key_words (word, key_ref)
	SELECT DISTINCT w.word, u.key_ref FROM user_ids u, unnest(tsvector_to_array(u.words)) AS w(word)
	WHERE u.key_ref = ANY($1)`

// deleteKeyWords removes the key_words rows of the keys $1, found from
// their user_ids rows, which must still be there (it runs before they
// go): the rows insertKeyWords wrote from them. This takes the table's
// one index, and no index by key that every upload would also write.
const deleteKeyWords = `DELETE FROM key_words k
	USING user_ids u, unnest(tsvector_to_array(u.words)) AS w(word)
	WHERE u.key_ref = ANY($1) AND k.word = w.word AND k.key_ref = u.key_ref`

// queueKeyUpdates queues the rewrite of changed keys and the removal of
// their old user IDs (with their words) and subkeys, which the
// components written after them replace.
func queueKeyUpdates(b *pgx.Batch, ps []*pendingKey) {
	if len(ps) == 0 {
		return
	}
	ids := make([]int64, len(ps))
	for i, p := range ps {
		d := p.key.Describe()
		digest := p.key.Digest()
		ids[i] = p.id
		b.Queue(`UPDATE keys SET digest = $2, packets = $3, version = $4, algorithm = $5, bits = $6, curve = $7,
				created_at = $8, expires_at = $9, revoked = $10, modified_at = now() WHERE id = $1`,
			p.id, digest[:], p.key.Bytes(), int16(d.Version), int16(d.Algorithm), int32(d.Bits), d.Curve,
			d.Created, nullTime(d.Expires), d.Revoked)
	}
	b.Queue(deleteKeyWords, ids)
	b.Queue("DELETE FROM user_ids WHERE key_ref = ANY($1)", ids)
	b.Queue("DELETE FROM subkeys WHERE key_ref = ANY($1)", ids)
}

// componentRows are the user_ids and subkeys rows of changed keys, and
// the keys' ids.
func componentRows(ps []*pendingKey) (uids, subs [][]any, ids []int64) {
	ids = make([]int64, len(ps))
	for i, p := range ps {
		ids[i] = p.id
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
	return uids, dedupeSubkeys(subs), ids
}

// The columns of the user_ids and subkeys rows componentRows makes, and
// their types.
var (
	uidColumns = []string{"key_ref", "position", "uid", "email", "created_at", "expires_at", "revoked", "is_primary"}
	uidTypes   = []string{"int8", "int4", "text", "text", "timestamptz", "timestamptz", "bool", "bool"}
	subColumns = []string{"key_ref", "fingerprint", "long_id", "short_id", "algorithm", "bits", "curve",
		"created_at", "expires_at", "revoked", "can_sign", "can_encrypt", "can_authenticate"}
	subTypes = []string{"int8", "bytea", "int8", "int4", "int2", "int4", "text", "timestamptz", "timestamptz", "bool", "bool", "bool", "bool"}
)

// queueComponents queues the INSERTs of the user IDs (their words made
// in SQL, uidWords, and written to key_words) and subkeys of changed keys.
func queueComponents(b *pgx.Batch, ps []*pendingKey) {
	if len(ps) == 0 {
		return
	}
	uids, subs, ids := componentRows(ps)
	if len(uids) > 0 {
		sql, args := unnestInsert("user_ids", uidColumns, uidTypes, uids, &[2]string{"words", uidWords})
		b.Queue(sql, args...)
		b.Queue(insertKeyWords, ids)
	}
	if len(subs) > 0 {
		sql, args := unnestInsert("subkeys", subColumns, subTypes, subs, nil)
		b.Queue(sql, args...)
	}
}

// copyComponents copies the user IDs and subkeys of changed keys (a bulk
// load's batch), with their words made in Go: each user ID's tsvector
// (tsvectorOf) and each key's key_words rows. Where the store does not
// split words as keys.Lexemes does (goLexemes false), the components are
// queued into b as queueComponents queues them instead, their words
// made in SQL.
//
// In a bulk load of 60,000 keys, PostgreSQL's making of the words had
// taken 1.3 s of CPU (the generated column) and 1.5 s of statement time
// (reading them back into key_words), of about 23 s of CPU in all.
func copyComponents(ctx context.Context, tx *writeTxn, b *pgx.Batch, ps []*pendingKey, goLexemes bool) error {
	if !goLexemes {
		queueComponents(b, ps)
		return nil
	}
	if len(ps) == 0 {
		return nil
	}
	uids, subs, _ := componentRows(ps)
	words := addWords(uids)
	if len(uids) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"user_ids"}, append(slices.Clip(uidColumns), "words"), pgx.CopyFromRows(uids)); err != nil {
			return fmt.Errorf("copy user IDs: %w", err)
		}
		row := make([]any, 2)
		src := pgx.CopyFromSlice(len(words), func(i int) ([]any, error) {
			row[0], row[1] = words[i].word, words[i].keyRef
			return row, nil
		})
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"key_words"}, []string{"word", "key_ref"}, src); err != nil {
			return fmt.Errorf("copy the words of user IDs: %w", err)
		}
	}
	if len(subs) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"subkeys"}, subColumns, pgx.CopyFromRows(subs)); err != nil {
			return fmt.Errorf("copy subkeys: %w", err)
		}
	}
	return nil
}

// keyWord is a key_words row: a word of a key's user IDs, and the key's
// id (an int64, as the user_ids row holds it).
type keyWord struct {
	word   string
	keyRef any
}

// addWords appends to each user_ids row of uids (componentRows, a key's
// rows together) its words, made in Go (tsvectorOf), and returns their
// key_words rows: each key's words once.
func addWords(uids [][]any) []keyWord {
	var words []keyWord
	seen := map[string]bool{}
	var ref any
	for i, u := range uids {
		if u[0] != ref {
			ref = u[0]
			clear(seen)
		}
		lexemes := keys.Lexemes(u[2].(string))
		uids[i] = append(u, tsvectorOf(lexemes))
		for _, w := range lexemes {
			if !seen[w] {
				seen[w] = true
				words = append(words, keyWord{word: w, keyRef: ref})
			}
		}
	}
	return words
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
