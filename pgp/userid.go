// userid.go: the one reading of a user ID's address. Every part of Kith
// that asks which address a user ID carries (the stored email column,
// search by email, the links a key carries, VKS and WKD, the verifier
// re-checking old records) asks UserIDAddress, so that no two parts can
// read two addresses out of one user ID.

package pgp

import (
	"net/mail"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxAddressLen is the longest address RFC 5321 lets a mail path carry.
const maxAddressLen = 254

// UserIDAddress returns the lower-cased address a user ID carries, or ""
// when it carries none.
//
// A user ID carries an address only when it is unambiguously one
// mailbox: either one RFC 5322 name-addr, the OpenPGP convention "Name
// (Comment) <addr>" (any display text free of angle brackets, then one
// <addr-spec>, then nothing but white space and parenthesized comments),
// or one bare addr-spec ("addr" alone). The addr-spec is one address:
// exactly one "@", a local part and a domain, no white space, control
// characters, invalid UTF-8, quoting, brackets or list separators.
//
// Anything else carries none: two "<" or two ">", text after ">",
// unbalanced brackets, two addresses, a list. Such user IDs are where
// readers disagree (gpg takes the first <...>, other readers the last,
// a person the one that looks like the name), so Kith reads none: the
// user ID is never mailed, verified or served by address.
func UserIDAddress(uid string) string {
	s := uid
	lt, gt := strings.IndexByte(s, '<'), strings.IndexByte(s, '>')
	if lt < 0 && gt < 0 {
		return addrSpec(s) // exactly: gpg reads " a@b" as no address
	}
	if lt < 0 || gt < lt || strings.Count(s, "<") != 1 || strings.Count(s, ">") != 1 {
		return ""
	}
	if !onlyComments(s[gt+1:]) || !balanced(s[:lt]) {
		return ""
	}
	return addrSpec(s[lt+1 : gt])
}

// addrSpec returns a, lower-cased, when it is exactly one RFC 5322
// addr-spec of the plain form (dot-atom local part, no quoting, no
// domain literal), else "".
func addrSpec(a string) string {
	if a == "" || len(a) > maxAddressLen || strings.Count(a, "@") != 1 {
		return ""
	}
	at := strings.IndexByte(a, '@')
	if at == 0 || at == len(a)-1 {
		return ""
	}
	for _, r := range a {
		// utf8.RuneError: invalid UTF-8, or the replacement character a
		// store writes for it; never part of a real address.
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError || strings.ContainsRune(`<>()[]\,;:"`, r) {
			return ""
		}
	}
	// The dot-atom rules (no leading, trailing or doubled dots), by the
	// standard library's RFC 5322 parser: the whole of a must be its one
	// address.
	if p, err := mail.ParseAddress(a); err != nil || p.Name != "" || p.Address != a {
		return ""
	}
	return strings.ToLower(a)
}

// onlyComments reports whether s is white space and parenthesized
// comments (which RFC 5322 lets follow an angle-addr), nothing else.
func onlyComments(s string) bool {
	depth := 0
	for _, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')':
			if depth == 0 {
				return false
			}
			depth--
		case depth == 0 && !unicode.IsSpace(r):
			return false
		}
	}
	return depth == 0
}

// balanced reports whether the comments and quoted strings in s open
// and close in pairs: in `Name (<addr>` or `"Name <addr>` a reader of
// RFC 5322 sees the address inside a comment or a quoted string, where
// it names no mailbox.
func balanced(s string) bool {
	if strings.Count(s, `"`)%2 != 0 {
		return false
	}
	depth := 0
	for _, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			if depth == 0 {
				return false
			}
			depth--
		}
	}
	return depth == 0
}
