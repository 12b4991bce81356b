// authorized.go: reading and writing authorized_keys lines and public key files, in the
// format sshd(8) documents under AUTHORIZED_KEYS FILE FORMAT.

package ssh

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLineSize is the longest authorized_keys line, or public key file, accepted:
// 64 KiB. OpenSSH's largest keys (16384-bit RSA) are under 3 KiB of base64, and
// certificates with many principals stay well under this.
const MaxLineSize = 64 << 10

// Errors about authorized_keys lines. Each is wrapped with context; test for them with
// errors.Is.
var (
	// ErrNoKey means there is no key where one was expected: an empty input, or a line
	// that is blank or a # comment.
	ErrNoKey = errors.New("no key")
	// ErrBadOptions means the options before the key are malformed or unknown to sshd.
	ErrBadOptions = errors.New("bad authorized_keys options")
	// ErrTooLarge means the input is over MaxLineSize (or MaxSignatureSize for signatures).
	ErrTooLarge = errors.New("input too large")
	// ErrNotPublicKeyFile means a public key file holds more than one key, or options.
	ErrNotPublicKeyFile = errors.New("not a public key file")
)

// LineError is an error in one line of an authorized_keys document.
type LineError struct {
	Line int   // 1-based line number
	Err  error // what is wrong with it
}

// Error returns the error with its line number.
func (e *LineError) Error() string {
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

// Unwrap returns the line's error.
func (e *LineError) Unwrap() error { return e.Err }

// optionTakesValue reports whether name (lower-cased; sshd matches option names
// case-insensitively) is an option sshd 9 accepts in authorized_keys, and whether it
// takes a quoted value.
func optionTakesValue(name string) (takesValue, known bool) {
	switch name {
	case "agent-forwarding", "cert-authority", "no-agent-forwarding", "no-port-forwarding",
		"no-pty", "no-touch-required", "no-user-rc", "no-x11-forwarding", "port-forwarding",
		"pty", "restrict", "user-rc", "verify-required", "x11-forwarding":
		return false, true
	case "command", "environment", "expiry-time", "from", "permitlisten", "permitopen",
		"principals", "tunnel":
		return true, true
	}
	return false, false
}

// ParseAuthorizedKey parses one authorized_keys line: optional options, the key type,
// the base64 key, and an optional comment, separated by blanks. A trailing newline is
// allowed. A blank or # comment line gives ErrNoKey.
func ParseAuthorizedKey(line []byte) (*Key, error) {
	if len(line) > MaxLineSize {
		return nil, fmt.Errorf("ssh: authorized key: %w: %d bytes, limit %d", ErrTooLarge, len(line), MaxLineSize)
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if i := bytes.IndexAny(line, "\r\n"); i >= 0 {
		return nil, fmt.Errorf("ssh: authorized key: %w: more than one line", ErrMalformedKey)
	}
	k, err := parseLine(string(line))
	if err != nil {
		return nil, fmt.Errorf("ssh: authorized key: %w", err)
	}
	return k, nil
}

// ParseAuthorizedKeys parses a whole authorized_keys document, skipping blank lines and
// # comments. It stops at the first bad line, returning a *LineError that names it, so
// that an upload is taken whole or not at all. A document with no keys returns no keys
// and no error. Each line is bounded by MaxLineSize; the caller bounds the document.
func ParseAuthorizedKeys(data []byte) ([]*Key, error) {
	var keys []*Key
	n := 0
	for len(data) > 0 {
		n++
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > MaxLineSize {
			return nil, fmt.Errorf("ssh: authorized keys: %w", &LineError{Line: n, Err: fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(line), MaxLineSize)})
		}
		k, err := parseLine(string(line))
		if errors.Is(err, ErrNoKey) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("ssh: authorized keys: %w", &LineError{Line: n, Err: err})
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// ParsePublicKeyFile parses an OpenSSH public key file (id_ed25519.pub and the like, or
// a certificate file id_ed25519-cert.pub): exactly one line of key type, base64 key and
// optional comment, without options. Blank and # comment lines around it are allowed.
func ParsePublicKeyFile(data []byte) (*Key, error) {
	if len(data) > MaxLineSize {
		return nil, fmt.Errorf("ssh: public key file: %w: %d bytes, limit %d", ErrTooLarge, len(data), MaxLineSize)
	}
	keys, err := ParseAuthorizedKeys(data)
	if err != nil {
		return nil, fmt.Errorf("ssh: public key file: %w", err)
	}
	switch {
	case len(keys) == 0:
		return nil, fmt.Errorf("ssh: public key file: %w", ErrNoKey)
	case len(keys) > 1:
		return nil, fmt.Errorf("ssh: public key file: %w: %d keys, want one", ErrNotPublicKeyFile, len(keys))
	case keys[0].Options != nil:
		return nil, fmt.Errorf("ssh: public key file: %w: options before the key", ErrNotPublicKeyFile)
	}
	return keys[0], nil
}

// parseLine parses one line without its line ending.
func parseLine(line string) (*Key, error) {
	rest := trimBlanks(line)
	if rest == "" || rest[0] == '#' {
		return nil, ErrNoKey
	}
	if strings.HasPrefix(rest, "-----BEGIN ") || strings.HasPrefix(rest, "---- BEGIN ") {
		return nil, fmt.Errorf("%w: a PEM or RFC 4716 block (a private key?), not an OpenSSH public key line", ErrMalformedKey)
	}
	first, after, err := nextField(rest, true)
	if err != nil {
		return nil, err
	}
	var options []string
	keyType := first
	if !IsKeyType(first) {
		// sshd's rule: what does not start with a key type starts with options.
		opts, optErr := parseOptions(first)
		var second string
		second, after, _ = nextField(after, false)
		if !IsKeyType(second) {
			name := second
			if optErr != nil {
				name = first
			}
			if name == "" {
				return nil, fmt.Errorf("%w: no key type", ErrMalformedKey)
			}
			return nil, fmt.Errorf("%w %q", ErrUnknownKeyType, truncate(name, 80))
		}
		if optErr != nil {
			return nil, optErr
		}
		options, keyType = opts, second
	}
	b64, comment, _ := nextField(after, false)
	if b64 == "" {
		return nil, fmt.Errorf("%s key: %w: no base64 key data", keyType, ErrMalformedKey)
	}
	blob, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("%s key: %w: bad base64: %v", keyType, ErrMalformedKey, err)
	}
	pub, err := ParsePublicKey(blob)
	if err != nil {
		return nil, err
	}
	if pub.Type() != keyType {
		return nil, fmt.Errorf("%w: line says %s, blob holds %s", ErrKeyTypeMismatch, keyType, pub.Type())
	}
	k := NewKey(pub, trimBlanks(comment))
	k.Options = options
	return k, nil
}

// nextField splits s at the first blank (space or tab) and trims blanks off the rest.
// With quotes, blanks inside double quotes (where \" is a literal quote) do not split,
// as in authorized_keys options; an unterminated quote is an error.
func nextField(s string, quotes bool) (field, rest string, err error) {
	inQuote := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quotes && inQuote && c == '\\' && i+1 < len(s) && s[i+1] == '"':
			i++
		case quotes && c == '"':
			inQuote = !inQuote
		case !inQuote && (c == ' ' || c == '\t'):
			return s[:i], trimBlanks(s[i:]), nil
		}
	}
	if inQuote {
		return s, "", fmt.Errorf("%w: unterminated quote", ErrBadOptions)
	}
	return s, "", nil
}

// parseOptions splits and validates a comma-separated options field.
func parseOptions(field string) ([]string, error) {
	var opts []string
	for len(field) > 0 {
		// Find the end of this option: a comma outside quotes.
		end, inQuote := len(field), false
	scan:
		for i := 0; i < len(field); i++ {
			switch c := field[i]; {
			case inQuote && c == '\\' && i+1 < len(field) && field[i+1] == '"':
				i++
			case c == '"':
				inQuote = !inQuote
			case !inQuote && c == ',':
				end = i
				break scan
			}
		}
		if inQuote {
			return nil, fmt.Errorf("%w: unterminated quote", ErrBadOptions)
		}
		opt := field[:end]
		if err := checkOption(opt); err != nil {
			return nil, err
		}
		opts = append(opts, opt)
		if end == len(field) {
			break
		}
		field = field[end+1:]
		if field == "" {
			return nil, fmt.Errorf("%w: trailing comma", ErrBadOptions)
		}
	}
	return opts, nil
}

// checkOption validates one option: a known name, with a double-quoted value exactly
// when the option takes one.
func checkOption(opt string) error {
	name, value, hasValue := strings.Cut(opt, "=")
	if name == "" {
		return fmt.Errorf("%w: empty option", ErrBadOptions)
	}
	takesValue, known := optionTakesValue(strings.ToLower(name))
	switch {
	case !known:
		return fmt.Errorf("%w: unknown option %q", ErrBadOptions, truncate(name, 80))
	case takesValue && !hasValue:
		return fmt.Errorf("%w: option %q needs a value", ErrBadOptions, name)
	case !takesValue && hasValue:
		return fmt.Errorf("%w: option %q takes no value", ErrBadOptions, name)
	case hasValue && !isQuoted(value):
		return fmt.Errorf("%w: value of option %q must be one double-quoted string", ErrBadOptions, name)
	}
	return nil
}

// isQuoted reports whether v is exactly one double-quoted string, in which \" stands for
// a quote.
func isQuoted(v string) bool {
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	for i := 1; i < len(v); i++ {
		switch v[i] {
		case '\\':
			if i+1 < len(v) && v[i+1] == '"' {
				i++
			}
		case '"':
			return i == len(v)-1
		}
	}
	return false
}

// trimBlanks trims spaces and tabs, the separators of an authorized_keys line.
func trimBlanks(s string) string {
	return strings.Trim(s, " \t")
}

// MarshalAuthorizedKey renders k as one authorized_keys line, "type base64 comment"
// ending in a newline, with the comment sanitised (SanitizeComment) and left out when
// empty. Options are never rendered: what a served line permits is for the server to
// decide, not whoever uploaded it. A certificate renders as a certificate line. It
// returns nil for a Key without a public key.
func MarshalAuthorizedKey(k *Key) []byte {
	if k == nil || k.Public == nil {
		return nil
	}
	var b bytes.Buffer
	b.WriteString(k.Public.Type())
	b.WriteByte(' ')
	b.WriteString(base64.StdEncoding.EncodeToString(k.Public.Marshal()))
	if c := SanitizeComment(k.Comment); c != "" {
		b.WriteByte(' ')
		b.WriteString(c)
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// MarshalAuthorizedKeys renders keys as an authorized_keys document, one line per key
// as MarshalAuthorizedKey writes it, each ending in a newline. The order is
// deterministic whatever the input order: by fingerprint, then key blob, then
// sanitised comment. A key that appears more than once (same blob) is written once,
// with the first of its comments in that order. Nil keys are skipped; no keys give an
// empty document.
func MarshalAuthorizedKeys(keys []*Key) []byte {
	type entry struct {
		fp      string
		blob    []byte
		comment string
		key     *Key
	}
	entries := make([]entry, 0, len(keys))
	for _, k := range keys {
		if k == nil || k.Public == nil {
			continue
		}
		entries = append(entries, entry{
			fp:      k.Fingerprint().String(),
			blob:    k.Public.Marshal(),
			comment: SanitizeComment(k.Comment),
			key:     k,
		})
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if c := strings.Compare(a.fp, b.fp); c != 0 {
			return c
		}
		if c := bytes.Compare(a.blob, b.blob); c != 0 {
			return c
		}
		return strings.Compare(a.comment, b.comment)
	})
	var out bytes.Buffer
	for i, e := range entries {
		if i > 0 && bytes.Equal(entries[i-1].blob, e.blob) {
			continue
		}
		out.Write(MarshalAuthorizedKey(&Key{Public: e.key.Public, Comment: e.comment}))
	}
	return out.Bytes()
}

// maxCommentSize bounds a rendered comment, in bytes: a comment is a label, and a
// served authorized_keys line should stay short.
const maxCommentSize = 256

// SanitizeComment makes a key comment safe to write on one authorized_keys line:
// invalid UTF-8 becomes U+FFFD, control characters (newlines, tabs, escapes, C1
// controls), Unicode spaces and line and paragraph separators become spaces, invisible
// format characters (zero-width and bidirectional controls) are dropped, runs of spaces
// collapse to one, the ends are trimmed, and the result is cut to 256 bytes on a
// character boundary.
func SanitizeComment(s string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if unicode.Is(unicode.Cf, r) {
			continue
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r) || unicode.IsSpace(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			if b.Len()+1+utf8.RuneLen(r) > maxCommentSize {
				break
			}
			b.WriteByte(' ')
		}
		space = false
		if b.Len()+utf8.RuneLen(r) > maxCommentSize {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}
