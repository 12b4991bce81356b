package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kith-keyserver/kith/identity/keys"
)

// ForgetWordCounts makes s start searches by words knowing no word's
// count, as a store does before PostgreSQL has analysed key_words.
func ForgetWordCounts(s *Store) {
	s.words.set(map[string]float64{}, time.Now())
}

// ReadWordCounts makes s read its word counts anew at its next search by
// words, and forget the words it learned.
func ReadWordCounts(s *Store) {
	s.words.mu.Lock()
	defer s.words.mu.Unlock()
	s.words.read, s.words.learned = time.Time{}, nil
}

// WordSearchStarts reports how s's searches by words started: from the
// word guessed rarest, from a guess that was not rare, counted.
func WordSearchStarts(s *Store) (guess, missed, counted int64) {
	return s.words.fromGuess.Load(), s.words.missed.Load(), s.words.counted.Load()
}

// ReadKeysBothWays reads every stored key with the columns readKeys reads
// (with user IDs or not; the answer's size summed over the keys or each
// key's own), packets when the sum is at most readUpTo bytes, by
// decodeKeyRow and by rows.Scan, and reports whether decodeKeyRow took
// the statement's form.
func ReadKeysBothWays(ctx context.Context, s *Store, userIDs, sum bool, readUpTo int64) (decoded, scanned []keys.Stored, decodable bool, err error) {
	q := keys.Query{InlineBytes: -1}
	if sum {
		q.InlineBytes = 0
	}
	columns, join := readColumns(answerTotal(q), userIDs)
	rows, err := s.pool.Query(ctx, `SELECT `+columns+` FROM keys k `+join+` WHERE k.id > $1 ORDER BY k.id`, int64(0), readUpTo)
	if err != nil {
		return nil, nil, false, err
	}
	defer rows.Close()
	decodable = keyRowDecodable(rows.FieldDescriptions(), userIDs)
	for rows.Next() {
		d, dt, err := decodeKeyRow(rows.RawValues(), userIDs)
		if err != nil {
			return nil, nil, decodable, err
		}
		sc, st, err := scanKeyRow(rows, userIDs)
		if err != nil {
			return nil, nil, decodable, err
		}
		if dt != st {
			return nil, nil, decodable, fmt.Errorf("key %X: total %d decoded, %d scanned", sc.Fingerprint, dt, st)
		}
		decoded, scanned = append(decoded, d), append(scanned, sc)
	}
	return decoded, scanned, decodable, rows.Err()
}

// HoldReadConns takes every connection of s's pool for lookups, until
// release is called.
func HoldReadConns(ctx context.Context, s *Store) (release func(), err error) {
	var conns []*pgxpool.Conn
	release = func() {
		for _, c := range conns {
			c.Release()
		}
	}
	for range s.pool.Config().MaxConns {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			release()
			return nil, err
		}
		conns = append(conns, c)
	}
	return release, nil
}

// Batches reports, of s's reads by primary fingerprint (what
// "fingerprint") or of a word's keys ("word"), how many its batches
// answered, in how many statements, how many batches run now and how
// many reads wait.
func Batches(s *Store, what string) (reads, statements int64, running, queued int) {
	if what == "word" {
		b := &s.wordReads
		return b.reads.Load(), b.batches.Load(), b.inFlight(), b.queued()
	}
	b := &s.lookups
	return b.reads.Load(), b.batches.Load(), b.inFlight(), b.queued()
}

// TsvectorOf is the words column a bulk load writes for a user ID whose
// stored text is uid (tsvectorOf).
func TsvectorOf(uid string) pgtype.TSVector { return tsvectorOf(keys.Lexemes(uid)) }
