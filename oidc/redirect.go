// redirect.go: where a person may be sent after logging in. Only paths on
// this site pass; anything else becomes "/", so a link to Kith's login
// cannot bounce a person to another site (an open redirect).

package oidc

import (
	"net/url"
	"strings"
)

// maxNextLen caps the length of a return path: longer ones are refused, as
// no Kith page needs one, and the path travels in a cookie.
const maxNextLen = 1024

// SafeNext returns next if it is a same-site relative path ("/account",
// "/users/alice?tab=keys"), and "/" otherwise. It refuses
// scheme-relative and absolute URLs ("//evil.example",
// "https://evil.example"), backslashes (which browsers read as slashes:
// "/\evil.example"), other schemes ("javascript:…"), control characters,
// white space and non-ASCII bytes, and the same tricks percent-encoded, once
// or several times ("/%2F%2Fevil.example", "/%5Cevil.example").
func SafeNext(next string) string {
	if isSafeNext(next) {
		return next
	}
	return "/"
}

func isSafeNext(next string) bool {
	if next == "" || len(next) > maxNextLen {
		return false
	}
	if !plainPath(next, true) {
		return false
	}
	// Check the text as decoded, up to three times, too: whichever form a
	// browser, proxy or later handler acts on must be a plain path.
	s := next
	for range 3 {
		d, err := url.PathUnescape(s)
		if err != nil {
			return false
		}
		if d == s {
			break
		}
		if !plainPath(d, false) {
			return false
		}
		s = d
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" || u.User != nil {
		return false
	}
	return strings.HasPrefix(u.Path, "/")
}

// plainPath reports whether s starts with exactly one slash and holds no
// backslash or control character; strict (for the text as given) also
// refuses white space and non-ASCII bytes, which must come encoded.
func plainPath(s string, strict bool) bool {
	if len(s) == 0 || s[0] != '/' {
		return false
	}
	if len(s) > 1 && (s[1] == '/' || s[1] == '\\') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < ' ' || c == 0x7f || c == '\\' || strict && (c == ' ' || c > 0x7f) {
			return false
		}
	}
	return true
}
