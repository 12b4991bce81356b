// handle.go: the claimable name of an identity, as it appears in URLs
// (/users/{handle}.keys) and in signed statements.

package identity

import (
	"errors"
	"fmt"
	"slices"
)

// Handle is an identity's unique, claimable name: 2 to 39 lower-case ASCII
// letters, digits and hyphens, neither starting nor ending with a hyphen,
// and not a reserved name. Only ParseHandle makes a valid Handle; a Handle
// built by conversion may be anything.
type Handle string

// Limits of a handle's length, in bytes (a handle is ASCII). 39 is the
// longest name that common code-hosting sites allow, so people can keep the
// name they have elsewhere.
const (
	MinHandleLen = 2
	MaxHandleLen = 39
)

// Errors about handles; test with errors.Is.
var (
	// ErrBadHandle: the text is not handle syntax.
	ErrBadHandle = errors.New("invalid handle")
	// ErrReservedHandle: the name is kept for the server's own paths and
	// roles.
	ErrReservedHandle = errors.New("reserved handle")
)

// reservedHandles are names a person may not claim: they would shadow one
// of the server's paths, impersonate its operators, or confuse readers of a
// URL.
var reservedHandles = []string{
	"about", "abuse", "account", "accounts", "admin", "administrator", "api", "assets",
	"auth", "billing", "contact", "dashboard", "docs", "evidence", "favicon-ico", "help",
	"hkp", "home", "hostmaster", "identities", "identity", "keys", "kith", "login",
	"logout", "mail", "metrics", "new", "noc", "null", "oauth", "oidc", "operator",
	"pks", "postmaster", "privacy", "profile", "register", "robots-txt", "root",
	"search", "security", "settings", "signin", "signout", "signup", "sks", "ssh",
	"static", "stats", "status", "support", "system", "terms", "undefined", "user",
	"users", "webmaster", "well-known", "www",
}

// IsReservedHandle reports whether name is reserved (see ParseHandle).
func IsReservedHandle(name string) bool {
	return slices.Contains(reservedHandles, name)
}

// ParseHandle checks s as a handle. It does not fold case: "Alice" is an
// error, not "alice", so that what a person signs is what they get.
func ParseHandle(s string) (Handle, error) {
	if len(s) < MinHandleLen || len(s) > MaxHandleLen {
		return "", fmt.Errorf("%w %q: must be %d to %d characters", ErrBadHandle, clip(s), MinHandleLen, MaxHandleLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-':
			if i == 0 || i == len(s)-1 {
				return "", fmt.Errorf("%w %q: must not start or end with '-'", ErrBadHandle, s)
			}
		default:
			return "", fmt.Errorf("%w %q: only lower-case letters, digits and '-' are allowed", ErrBadHandle, clip(s))
		}
	}
	if IsReservedHandle(s) {
		return "", fmt.Errorf("%w %q", ErrReservedHandle, s)
	}
	return Handle(s), nil
}

// FoldHandle lower-cases the ASCII letters of s, the form in which
// lookups take a handle: /users/NORA.keys is nora's, as on code-hosting
// sites. Only ASCII folds, so that no other character (the Kelvin sign
// lower-cases to "k") reaches a handle this way. Claims do not fold: a
// statement names the handle as it will be.
func FoldHandle(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// String returns the handle as text.
func (h Handle) String() string { return string(h) }

// clip shortens hostile input before it goes into an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
