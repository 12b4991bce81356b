package keys

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// MaxSearchWords is the most words a key search may hold.
const MaxSearchWords = 16

// ErrBadSearch matches (errors.Is) every refusal of ParseSearch.
var ErrBadSearch = errors.New("bad key search")

// SearchError says why a search names no key, in words fit to show the
// person who typed it.
type SearchError struct{ Reason string }

// Error returns the reason.
func (e *SearchError) Error() string { return e.Reason }

// Is makes a SearchError match ErrBadSearch.
func (e *SearchError) Is(target error) bool { return target == ErrBadSearch }

func badSearch(format string, args ...any) error {
	return &SearchError{Reason: fmt.Sprintf(format, args...)}
}

// ParseSearch reads a key search as HKP clients write one, so that
// every frontend finds the same keys for the same text:
//
//   - "0x" and 8, 16, 32, 40 or 64 hex digits: a 32- or 64-bit key ID, a
//     v3, v4 or v6 fingerprint (of a primary key or a subkey);
//   - 40 or 64 hex digits without "0x", spaces allowed: a fingerprint;
//   - "alice@example.org" or "<alice@example.org>": that exact email;
//   - anything else: the words of user IDs (runs of letters and digits),
//     lower-cased, sorted, each required.
//
// The query has no Limit; the caller sets it.
func ParseSearch(s string) (Query, error) {
	s = strings.TrimSpace(s)
	compact := strings.ReplaceAll(s, " ", "")
	if len(compact) >= 2 && compact[0] == '0' && (compact[1] == 'x' || compact[1] == 'X') {
		b, err := hex.DecodeString(compact[2:])
		if err == nil {
			switch len(b) {
			case 4:
				return Query{ShortKeyID: binary.BigEndian.Uint32(b), HasShortKeyID: true}, nil
			case 8:
				return Query{KeyID: binary.BigEndian.Uint64(b)}, nil
			case 16, 20, 32: // v3 (MD5), v4, v6 fingerprints
				return Query{Fingerprint: b}, nil
			}
		}
		return Query{}, badSearch("after 0x, give 8 or 16 hex digits (a key ID) or 32, 40 or 64 (a fingerprint); %d given", len(compact)-2)
	}
	if len(compact) == 40 || len(compact) == 64 {
		if b, err := hex.DecodeString(compact); err == nil {
			return Query{Fingerprint: b}, nil
		}
	}
	if email, ok := bareEmail(s); ok {
		return Query{Email: email}, nil
	}
	words := SearchWords(s)
	if len(words) == 0 {
		return Query{}, badSearch("give a key ID (0x…), a fingerprint, an email address or words (letters or digits) of a name")
	}
	if len(words) > MaxSearchWords {
		return Query{}, badSearch("%d words; at most %d are allowed", len(words), MaxSearchWords)
	}
	return Query{Words: words}, nil
}

// SearchWords splits s into lower-cased runs of letters and digits,
// sorted, without duplicates: the words a user-ID search matches.
func SearchWords(s string) []string {
	words := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	slices.Sort(words)
	return slices.Compact(words)
}

// bareEmail returns the lower-cased address when s is one address,
// optionally in angle brackets.
func bareEmail(s string) (string, bool) {
	if strings.HasPrefix(s, "<") && strings.HasSuffix(s, ">") {
		s = s[1 : len(s)-1]
	}
	at := strings.IndexByte(s, '@')
	if at <= 0 || at == len(s)-1 || strings.Count(s, "@") != 1 {
		return "", false
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune("<>,;\"", r) {
			return "", false
		}
	}
	return strings.ToLower(s), true
}
