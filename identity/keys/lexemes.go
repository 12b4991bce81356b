package keys

import "strings"

// maxLexeme is the length from which PostgreSQL's text search drops a
// word instead of indexing it ("word is too long to be indexed").
const maxLexeme = 2047

// Lexemes returns the lexemes of s, in order and with repeats, as the
// store's search makes them (user_ids.words, PostgreSQL migration 0001:
// lower(), then every character that is not an ASCII letter or digit a
// separator, in the C locale): the runs of ASCII letters and digits,
// upper case folded, of fewer than 2047 characters (longer ones the
// text search leaves out).
func Lexemes(s string) []string {
	var out []string
	start := -1
	for i := 0; i <= len(s); i++ {
		alnum := i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z' || s[i] >= '0' && s[i] <= '9')
		switch {
		case alnum && start < 0:
			start = i
		case !alnum && start >= 0:
			if i-start < maxLexeme {
				out = append(out, strings.ToLower(s[start:i]))
			}
			start = -1
		}
	}
	return out
}
