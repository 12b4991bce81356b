// tsvector.go: the words of a user ID (user_ids.words), made in SQL or in
// Go, the same either way.

package postgres

import (
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
)

// uidWords is the SQL that makes the words of a user_ids row from its
// text u.uid: migration 0001's expression, which PostgreSQL generated
// until migration 0022.
const uidWords = `to_tsvector('simple', regexp_replace(lower(u.uid), '[^[:alnum:]]+', ' ', 'g'))`

// Limits of PostgreSQL's tsvector positions: a position is at most
// maxEntryPos-1 (a larger one is stored as that), and a lexeme keeps at
// most maxNumPos-1 of them.
const (
	maxEntryPos = 1 << 14
	maxNumPos   = 256
)

// tsvectorOf returns the tsvector that uidWords makes of a text whose
// lexemes (keys.Lexemes) are lexemes: where the database splits words as
// keys.Lexemes does, the same value. Each lexeme's positions are where
// it occurs among the lexemes, from 1, kept as to_tsvector keeps them
// (limited, at most maxNumPos-1, none after the largest), with no weight
// (D); the lexemes are in byte order, as a tsvector sorts them.
func tsvectorOf(lexemes []string) pgtype.TSVector {
	at := make(map[string]int, len(lexemes)) // index in out
	out := make([]pgtype.TSVectorLexeme, 0, len(lexemes))
	for i, l := range lexemes {
		p := pgtype.TSVectorPosition{Position: uint16(min(i+1, maxEntryPos-1))}
		j, seen := at[l]
		if !seen {
			at[l] = len(out)
			out = append(out, pgtype.TSVectorLexeme{Word: l, Positions: []pgtype.TSVectorPosition{p}})
			continue
		}
		ps := out[j].Positions
		if last := ps[len(ps)-1].Position; len(ps) < maxNumPos-1 && last != maxEntryPos-1 && last != p.Position {
			out[j].Positions = append(ps, p)
		}
	}
	slices.SortFunc(out, func(a, b pgtype.TSVectorLexeme) int { return strings.Compare(a.Word, b.Word) })
	return pgtype.TSVector{Lexemes: out, Valid: true}
}
