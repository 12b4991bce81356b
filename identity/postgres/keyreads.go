// keyreads.go: reading OpenPGP keys: lookups by every search form, the
// packets streamed, statistics, the dump, the digests recon builds its
// tree from, and the issuers the key policy ranks certifications by.

package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
)

// byFingerprint selects the ids of the keys whose primary key or a
// subkey has the fingerprint $1 (readKeys reads such keys more directly).
const byFingerprint = `SELECT id FROM keys WHERE fingerprint = $1
			UNION SELECT key_ref FROM subkeys WHERE fingerprint = $1`

// FindKeys returns the keys matching q, at most q.Limit of them, and
// whether more matched, in one round trip to the server (a search by
// words whose guessed start proves common takes two).
func (s *Store) FindKeys(ctx context.Context, q keys.Query) ([]keys.Stored, bool, error) {
	found, err := s.findKeys(ctx, q)
	if err != nil {
		return nil, false, fmt.Errorf("postgres: find keys: %w", err)
	}
	if q.Limit > 0 && len(found) > q.Limit {
		return found[:q.Limit], true, nil
	}
	return found, false, nil
}

// findKeys returns the keys matching q, at most q.Limit+1 of them (all
// when q.Limit is 0), in id order.
func (s *Store) findKeys(ctx context.Context, q keys.Query) ([]keys.Stored, error) {
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
		return s.findByWords(ctx, q)
	case len(q.Digests) == 1:
		// One digest (a notification's changed key) as a scalar: PostgreSQL
		// keeps a generic plan for it, while for = ANY of an array it
		// finds each custom plan cheaper and plans the whole statement
		// anew at every call (~0.5 ms, ten times its run).
		sel, arg = `SELECT id FROM keys WHERE digest = $1`, q.Digests[0][:]
	case len(q.Digests) > 0:
		ds := make([][]byte, len(q.Digests))
		for i := range q.Digests {
			ds[i] = q.Digests[i][:]
		}
		sel, arg = `SELECT id FROM keys WHERE digest = ANY($1)`, ds
	case len(q.Fingerprints) > 0:
		sel, arg = `SELECT id FROM keys WHERE fingerprint = ANY($1)`, q.Fingerprints
	case len(q.PrimaryKeyIDs) > 0:
		ids := make([]int64, len(q.PrimaryKeyIDs))
		for i, id := range q.PrimaryKeyIDs {
			ids[i] = int64(id)
		}
		sel, arg = `SELECT id FROM keys WHERE long_id = ANY($1)`, ids
	default:
		return nil, errors.New("empty query")
	}
	return s.readKeys(ctx, sel, arg, q)
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
	readUpTo := readUpTo(q)
	if sel == byFingerprint {
		// The commonest lookup (gpg --recv-keys) names one key by its
		// primary fingerprint that no other key carries as a subkey: one
		// index probe each, answered with the lookups waiting beside it
		// (lookupPrimary). Any other outcome (a subkey's fingerprint, a
		// fingerprint two keys share, none) takes the general statement
		// below.
		k, found, err := s.lookupPrimary(ctx, arg.([]byte), !q.NoUserIDs, readUpTo)
		switch {
		case err != nil:
			return nil, err
		case found && q.MaxBytes > 0 && k.Size > q.MaxBytes:
			return nil, fmt.Errorf("%w: %d bytes, limit %d", keys.ErrAnswerTooLarge, k.Size, q.MaxBytes)
		case found:
			return []keys.Stored{k}, nil
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
	columns, uidJoin := readColumns(answerTotal(q), !q.NoUserIDs)
	return s.scanKeys(ctx, q, `SELECT `+columns+`
		FROM `+from+` `+uidJoin+` ORDER BY k.id`, arg, readUpTo)
}

// readUpTo is the largest total of the keys' sizes whose packets a
// query reads (-1: none), by its InlineBytes and MaxBytes.
func readUpTo(q keys.Query) int64 {
	upTo := int64(math.MaxInt64)
	switch {
	case q.InlineBytes < 0:
		upTo = -1
	case q.InlineBytes > 0:
		upTo = int64(q.InlineBytes)
	}
	if q.MaxBytes > 0 {
		upTo = min(upTo, int64(q.MaxBytes))
	}
	return upTo
}

// answerTotal is the expression of the size of a query's answer, whose
// keys are k: the sum over every row when the query reads packets or
// bounds the answer; otherwise, for an index of the keys, a key's own
// size, which nothing reads, saving PostgreSQL the window aggregate that
// holds every row back until the last (a quarter of a one-key search's
// statement).
func answerTotal(q keys.Query) string { return totalOf(answerSums(q)) }

// totalOf is the expression of an answer's size: with sum, the sum of
// the sizes of every key k of the statement's rows; otherwise a key's own.
func totalOf(sum bool) string {
	if sum {
		return "sum(octet_length(k.packets)) OVER ()"
	}
	return "octet_length(k.packets)"
}

// answerSums reports whether a query's answer size is the sum of its
// keys' (answerTotal): when it reads packets or bounds the answer.
func answerSums(q keys.Query) bool { return q.InlineBytes >= 0 || q.MaxBytes > 0 }

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
		// The rows come in position order from the primary key's index,
		// which the aggregates keep; six array_agg(... ORDER BY position)
		// sorted them six times (a quarter of the statement's time for an
		// index of one key).
		join = `LEFT JOIN LATERAL (SELECT array_agg(uid) AS texts, array_agg(email) AS emails,
				array_agg(created_at) AS created, array_agg(expires_at) AS expires,
				array_agg(revoked) AS revoked, array_agg(is_primary) AS is_primary
			FROM (SELECT * FROM user_ids WHERE key_ref = k.id ORDER BY position) p) u ON true`
	}
	return columns, join
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
			if rows, err := c.Query(ctx, primaryFingerprintsSQL(userIDs), [][]byte{}, int64(-1)); err == nil {
				rows.Close()
			}
		}
	}
}

// scanKeys runs sql, a statement over $1 = arg and $2 = readUpTo whose
// columns readKeys lists, and reads its rows as stored keys.
func (s *Store) scanKeys(ctx context.Context, q keys.Query, sql string, arg any, readUpTo int64) ([]keys.Stored, error) {
	ks, _, err := s.scanRows(ctx, q, false, sql, arg, readUpTo)
	return ks, err
}

// scanTaggedKeys is scanKeys for a statement whose rows end with a text
// column more, the tag, returned beside each key.
func (s *Store) scanTaggedKeys(ctx context.Context, q keys.Query, sql string, arg any, readUpTo int64) ([]keys.Stored, []string, error) {
	return s.scanRows(ctx, q, true, sql, arg, readUpTo)
}

// scanRows is scanKeys and, with tagged, scanTaggedKeys: it reads the
// rows from their bytes (decodeKeyRow) when they have the form it knows,
// with rows.Scan otherwise.
func (s *Store) scanRows(ctx context.Context, q keys.Query, tagged bool, sql string, arg any, readUpTo int64) ([]keys.Stored, []string, error) {
	rows, err := s.pool.Query(ctx, sql, arg, readUpTo)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	userIDs := !q.NoUserIDs
	fields := rows.FieldDescriptions()
	columns := len(fields)
	if tagged {
		columns--
	}
	decodable := columns >= 0 && keyRowDecodable(fields[:columns], userIDs) && (!tagged || fields[columns].DataTypeOID == pgtype.TextOID)
	var ks []keys.Stored
	var tags []string
	for rows.Next() {
		var k keys.Stored
		var total int64
		var tag string
		if decodable {
			raw := rows.RawValues()
			k, total, err = decodeKeyRow(raw[:columns], userIDs)
			if tagged {
				tag = string(raw[columns])
			}
		} else if tagged {
			k, total, err = scanKeyRow(rows, userIDs, &tag)
		} else {
			k, total, err = scanKeyRow(rows, userIDs)
		}
		if err != nil {
			return nil, nil, err
		}
		if q.MaxBytes > 0 && total > int64(q.MaxBytes) {
			return nil, nil, fmt.Errorf("%w: %d bytes, limit %d", keys.ErrAnswerTooLarge, total, q.MaxBytes)
		}
		ks = append(ks, k)
		if tagged {
			tags = append(tags, tag)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	return ks, tags, nil
}

// countKeys counts the stored keys: exactly up to a million, as
// PostgreSQL's planner estimates above, where counting every row would
// cost seconds for a figure that changes all the time.
const countKeys = `SELECT CASE WHEN reltuples > 1000000 THEN reltuples::bigint
		ELSE (SELECT count(*) FROM keys) END
	FROM pg_class WHERE oid = 'keys'::regclass`

// CountKeys returns the number of stored keys (exact up to a million,
// the planner's estimate above).
func (s *Store) CountKeys(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, countKeys).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: count keys: %w", err)
	}
	return n, nil
}

// ChangedPrefixes returns the first digits hex digits of the primary
// fingerprints of the keys whose modified_at (which every write that
// changes a key sets: insertKeys, updateKeys) falls in [from, to), each
// once, sorted. It reads the keys_modified_at index's range; a span with
// many changes (a bulk load's day) reads as many rows, which is why the
// prefix log caches its answers.
func (s *Store) ChangedPrefixes(ctx context.Context, from, to time.Time, digits int) ([]string, error) {
	if digits < 1 {
		return nil, fmt.Errorf("postgres: changed prefixes: %d digits", digits)
	}
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT substr(encode(fingerprint, 'hex'), 1, $3) AS p
		FROM keys WHERE modified_at >= $1 AND modified_at < $2 ORDER BY p`, from, to, digits)
	if err != nil {
		return nil, fmt.Errorf("postgres: changed prefixes: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: changed prefixes: %w", err)
	}
	return out, nil
}

// KeyStats counts the stored keys and the keys added and changed on each
// of the last seven days. The total is CountKeys's.
func (s *Store) KeyStats(ctx context.Context) (keys.Stats, error) {
	var st keys.Stats
	if err := s.pool.QueryRow(ctx, countKeys).Scan(&st.Keys); err != nil {
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
