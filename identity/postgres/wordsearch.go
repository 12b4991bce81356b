// wordsearch.go: searching keys by the words of their user IDs, from the
// rarest word: picked by what the store knows of its words' counts when
// it can, counted by PostgreSQL when it cannot.

package postgres

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kith-keyserver/kith/identity/keys"
)

// rareWord is how many keys a word of a search may have and still be
// where the search starts: up to this many keys are read and rechecked
// (byRareWord, byWords). A word with fewer than fewWords keys is found by
// byWords reading only that many entries of each word.
const (
	rareWord = 100
	fewWords = 8
)

// searchText is the rewrite of the text $1 that migration 0001 makes of a
// user ID before its tsvector: lower-cased, and each run of characters
// that are neither letters nor digits one space. byWords reads searches
// through it, and Open checks that keys.Lexemes splits texts as it does
// (splitsWordsAsGo).
const searchText = `regexp_replace(lower($1), '[^[:alnum:]]+', ' ', 'g')`

// byWords selects the ids of the keys with a user ID whose tsvector
// (user_ids.words) holds every word of $1, counting each word's keys in
// PostgreSQL: the search when findByWords cannot start from a word it
// guessed rare. $1 is read by plainto_tsquery after
// the rewrite below, which is how that tsvector is made (migration
// 0001): every word required, in one user ID, and "example" finds
// alice@example.org.
//
// Its cost follows the rarest word, not the commonest: each word's keys
// are counted in key_words (migration 0019), and when one has fewer than
// rareWord, the search reads that word's keys and rechecks each against
// user_ids.words (the tsvector decides, so the answer is the one the
// whole query gives; the rarest word's lexeme is among the query's). The
// counts stop at fewWords first ("Generated User 29330" reads at most
// eight entries of "generated" and "user" to find that "29330" has one
// key), and go on to rareWord only when no word is that rare. Only when
// every word has rareWord keys or more does the GIN index intersect
// their posting lists, as it did for every search before.
//
// The search text reaches the plan only through InitPlans (the
// scalar subqueries), so a custom plan costs what the generic one does
// and PostgreSQL keeps the generic plan after its first five runs, as it
// does for a lookup by fingerprint, instead of planning each search anew
// (about as long as running it). The recheck is ts_match_vq, the function
// of @@, in a subquery that OFFSET 0 keeps correlated: a planner without
// statistics (after a bulk load) otherwise turns it into a hash join on a
// GIN scan of every word, the very cost this avoids (~10 ms a search).
var byWords = `WITH counts AS MATERIALIZED (
			SELECT r.word, (SELECT count(*) FROM (SELECT FROM key_words x WHERE x.word = r.word LIMIT ` + strconv.Itoa(fewWords) + `) c) AS n
			FROM unnest((SELECT tsvector_to_array(to_tsvector('simple', ` + searchText + `)))) AS r(word)),
		rarest AS MATERIALIZED (
			SELECT c.word, CASE WHEN (SELECT min(n) FROM counts) < ` + strconv.Itoa(fewWords) + ` THEN c.n
					ELSE (SELECT count(*) FROM (SELECT FROM key_words x WHERE x.word = c.word LIMIT ` + strconv.Itoa(rareWord) + `) d) END AS n
			FROM counts c ORDER BY 2, 1 LIMIT 1),
		search AS MATERIALIZED (SELECT plainto_tsquery('simple', ` + searchText + `) AS q)
		SELECT w.key_ref FROM key_words w
			WHERE w.word = (SELECT word FROM rarest WHERE n < ` + strconv.Itoa(rareWord) + `)
				AND EXISTS (SELECT FROM user_ids u WHERE u.key_ref = w.key_ref AND ts_match_vq(u.words, (SELECT q FROM search)) OFFSET 0)
		UNION ALL
		SELECT DISTINCT u.key_ref FROM user_ids u
			WHERE (SELECT n FROM rarest) >= ` + strconv.Itoa(rareWord) + ` AND u.words @@ (SELECT q FROM search)`

// byRareWord is the statement that reads the keys that have the word
// $1, at most rareWord+1 of them (one more tells that the word is not
// rare), in id order, with their user IDs, for searchFromWord to
// recheck: an index probe of key_words, and the keys and their user IDs
// read by id (~10 buffers for a one-key word, where a lookup by
// fingerprint reads ~6). The word reaches the plan only through an
// InitPlan, so PostgreSQL keeps one generic plan instead of planning each
// search for its word's estimate. total is answerTotal's.
func byRareWord(total string) string {
	columns, join := readColumns(total, true)
	return `SELECT ` + columns + `
		FROM (SELECT k.* FROM keys k JOIN (SELECT key_ref FROM key_words WHERE word = (SELECT $1::text)
			ORDER BY key_ref LIMIT ` + strconv.Itoa(rareWord+1) + `) m ON k.id = m.key_ref) k ` + join + ` ORDER BY k.id`
}

// byRareWords is byRareWord for each word of the array $1, with the word
// last in each row, for the searches that waited for a connection
// together; with sum, the answer's size is summed over each word's keys.
// (For one word it costs more than byRareWord: the window is partitioned
// and the rows sorted by word.)
func byRareWords(sum bool) string {
	total := "octet_length(k.packets)"
	if sum {
		total = "sum(octet_length(k.packets)) OVER (PARTITION BY k.word)"
	}
	columns, join := readColumns(total, true)
	return `SELECT ` + columns + `, k.word
		FROM (SELECT w.word, k.* FROM unnest((SELECT $1::text[])) AS w(word)
			CROSS JOIN LATERAL (SELECT key_ref FROM key_words WHERE word = w.word ORDER BY key_ref LIMIT ` + strconv.Itoa(rareWord+1) + `) m
			JOIN keys k ON k.id = m.key_ref) k ` + join + ` ORDER BY k.word, k.id`
}

// wordRead is a read of the keys of a search's rarest word (byRareWords).
type wordRead struct {
	word     string
	readUpTo int64 // read the packets when the word's keys are at most this many bytes
	sum      bool  // the answer's size is the sum of the word's keys' (answerSums)
}

// sameWordReadForm reports whether a and b can share a statement.
func sameWordReadForm(a, b wordRead) bool { return a.readUpTo == b.readUpTo && a.sum == b.sum }

// runWordReads answers a batch of word reads of one form with one
// statement: each read gets a copy of its word's keys, as searchFromWord
// keeps some of them in place.
func (s *Store) runWordReads(ctx context.Context, qs []wordRead) ([][]keys.Stored, error) {
	words := make([]string, 0, len(qs))
	seen := make(map[string]bool, len(qs))
	for _, q := range qs {
		if !seen[q.word] {
			seen[q.word] = true
			words = append(words, q.word)
		}
	}
	form := qs[0]
	byWord := make(map[string][]keys.Stored, len(words))
	if len(words) == 1 {
		ks, err := s.scanKeys(ctx, keys.Query{}, byRareWord(totalOf(form.sum)), words[0], form.readUpTo)
		if err != nil {
			return nil, fmt.Errorf("read the keys of a word: %w", err)
		}
		byWord[words[0]] = ks
	} else {
		found, tags, err := s.scanTaggedKeys(ctx, keys.Query{}, byRareWords(form.sum), words, form.readUpTo)
		if err != nil {
			return nil, fmt.Errorf("read the keys of a word: %w", err)
		}
		for i, k := range found {
			byWord[tags[i]] = append(byWord[tags[i]], k)
		}
	}
	answers := make([][]keys.Stored, len(qs))
	for i, q := range qs {
		answers[i] = slices.Clone(byWord[q.word])
	}
	return answers, nil
}

// wordCountsAge is how long the estimates of wordCounts serve before they
// are read again: PostgreSQL's autovacuum analyses key_words when a tenth
// of it changed, and a word's count moves slowly.
const wordCountsAge = 10 * time.Minute

// maxCommonWords bounds the words wordCounts learns from searches; past
// it, what was learned is forgotten and learned anew.
const maxCommonWords = 10_000

// wordCounts estimates how many keys have each of the store's commonest
// words, for findByWords to pick the word a search starts from without
// asking PostgreSQL to count: the most common values of key_words.word
// and their frequencies that ANALYZE keeps (pg_stats), read at most every
// wordCountsAge, and the words searches found common since the last read
// (so that a word which is common no longer is tried again). It decides
// only where a search starts, never what it finds: a word guessed rare
// that is not costs one more round trip.
type wordCounts struct {
	mu      sync.Mutex
	counts  map[string]float64 // estimated keys of each common word
	learned map[string]bool    // words searches found to have rareWord keys or more
	read    time.Time          // when counts were read; zero: never
	reading bool               // a search is reading them

	// How searches went, for the store's metrics: started from the
	// word guessed rarest, from a guess that was not rare (then
	// counted), and counted by PostgreSQL from the start.
	fromGuess, missed, counted atomic.Int64
}

// stale reports whether counts are due to be read, and if so marks them
// being read, so that one search reads them while the others go on with
// what is known.
func (w *wordCounts) stale(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.reading || !w.read.IsZero() && now.Sub(w.read) < wordCountsAge {
		return false
	}
	w.reading = true
	return true
}

// set replaces the counts with those read at now, and forgets the words
// learned since the last read (nil counts: reading them failed, and the
// old ones serve until the next try).
func (w *wordCounts) set(counts map[string]float64, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if counts != nil {
		w.counts, w.learned = counts, nil
	}
	w.read, w.reading = now, false
}

// learn records that word has rareWord keys or more.
func (w *wordCounts) learn(word string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.learned == nil || len(w.learned) >= maxCommonWords {
		w.learned = map[string]bool{}
	}
	w.learned[word] = true
}

// rarest returns the word of words (lexemes, distinct) estimated to have
// the fewest keys, and false when every word is estimated to have
// rareWord keys or more. A word missing from the counts is taken to be
// rare, and of two such the longer is taken as the rarer ("user55061"
// before "wei").
func (w *wordCounts) rarest(words []string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	best, bestN := "", math.Inf(1)
	for _, word := range words {
		n := w.counts[word]
		if w.learned[word] {
			n = math.Inf(1)
		}
		if n < bestN || n == bestN && len(word) > len(best) {
			best, bestN = word, n
		}
	}
	return best, bestN < rareWord
}

// readWordCounts reads PostgreSQL's estimate of the keys of the commonest
// words: key_words has a row per word and key, so a word's frequency
// among the rows times the rows is its keys.
func (s *Store) readWordCounts(ctx context.Context) (map[string]float64, error) {
	var words []string
	var freqs []float64
	var rows float64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(s.most_common_vals::text::text[], '{}'), coalesce(s.most_common_freqs, '{}'), c.reltuples
		FROM pg_class c LEFT JOIN pg_stats s ON s.schemaname = current_schema() AND s.tablename = 'key_words' AND s.attname = 'word'
		WHERE c.oid = 'key_words'::regclass`).Scan(&words, &freqs, &rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: read word counts: %w", err)
	}
	if len(words) != len(freqs) {
		return nil, fmt.Errorf("postgres: read word counts: %d words, %d frequencies", len(words), len(freqs))
	}
	counts := make(map[string]float64, len(words))
	for i, word := range words {
		counts[word] = freqs[i] * max(rows, 0)
	}
	return counts, nil
}

// findByWords returns the keys with a user ID that has every word of
// q.Words, as byWords finds them, at most q.Limit+1 of them, in id order
// (findKeys).
//
// When the database splits words as keys.Lexemes does (its locale is C,
// as the embedded cluster's), the search starts from the word wordCounts
// estimates rarest: byRareWord reads that word's keys, and each is kept
// when one of its user IDs has every word, a check in Go of what the
// tsvector's @@ checks in PostgreSQL (user_ids.words is made of the
// lexemes keys.Lexemes gives). One round trip and one statement, where
// byWords also counts each word's keys (0.12-0.18 ms of statement under
// load for a one-key search, against 0.25-0.36 ms). A word that turns
// out to have rareWord keys or more is learned, and the search, like any
// whose words are all common, is byWords's.
func (s *Store) findByWords(ctx context.Context, q keys.Query) ([]keys.Stored, error) {
	if s.goLexemes {
		ks, found, err := s.searchFromRarest(ctx, q)
		if err != nil || found {
			return ks, err
		}
	} else {
		s.words.counted.Add(1)
	}
	return s.readKeys(ctx, byWords, strings.Join(q.Words, " "), q)
}

// searchFromRarest searches from the word of q.Words that wordCounts
// estimates rarest (searchFromWord), and reports false, for byWords to
// search, when every word is estimated common or the word guessed rare
// was not.
func (s *Store) searchFromRarest(ctx context.Context, q keys.Query) ([]keys.Stored, bool, error) {
	words := keys.Lexemes(strings.Join(q.Words, " "))
	if len(words) == 0 {
		return nil, true, nil // PostgreSQL's query without lexemes matches nothing
	}
	slices.Sort(words)
	words = slices.Compact(words)
	if now := time.Now(); s.words.stale(now) {
		counts, err := s.readWordCounts(ctx)
		if err != nil {
			s.log.Warn("postgres: searches by words start without word counts", "err", err)
		}
		s.words.set(counts, now)
	}
	start, ok := s.words.rarest(words)
	if !ok {
		s.words.counted.Add(1)
		return nil, false, nil
	}
	ks, found, err := s.searchFromWord(ctx, q, start, words)
	switch {
	case err != nil:
		return nil, false, err
	case found:
		s.words.fromGuess.Add(1)
	default:
		s.words.missed.Add(1)
		s.words.learn(start)
	}
	return ks, found, nil
}

// searchFromWord reads the keys that have the word start (byRareWord),
// keeps those with a user ID that has every one of words, at most
// q.Limit+1 of them, and applies q's bounds on their size as readKeys
// does. It reports false when start has rareWord keys or more.
func (s *Store) searchFromWord(ctx context.Context, q keys.Query, start string, words []string) ([]keys.Stored, bool, error) {
	// The read takes the user IDs, which decide, and no bound on size:
	// the bound is the kept keys'.
	ks, err := s.wordReads.do(ctx, wordRead{word: start, readUpTo: readUpTo(q), sum: answerSums(q)})
	if err != nil {
		return nil, false, err
	}
	if len(ks) > rareWord {
		return nil, false, nil
	}
	kept := ks[:0]
	var total int64
	for _, k := range ks {
		if q.Limit > 0 && len(kept) > q.Limit {
			break
		}
		if hasAllWords(k.UserIDs, words) {
			if q.NoUserIDs {
				k.UserIDs = nil
			}
			kept = append(kept, k)
			total += int64(k.Size)
		}
	}
	if q.MaxBytes > 0 && total > int64(q.MaxBytes) {
		return nil, false, fmt.Errorf("%w: %d bytes, limit %d", keys.ErrAnswerTooLarge, total, q.MaxBytes)
	}
	return kept, true, nil
}

// hasAllWords reports whether one of uids has every one of words among
// its lexemes.
func hasAllWords(uids []keys.StoredUserID, words []string) bool {
	for _, u := range uids {
		have := keys.Lexemes(u.Text)
		if !slices.ContainsFunc(words, func(w string) bool { return !slices.Contains(have, w) }) {
			return true
		}
	}
	return false
}
