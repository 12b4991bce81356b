// statement.go: the text a person signs to prove they hold a factor, and
// its parser. The statement names everything the signature commits to, so
// that it cannot be replayed at another server, for another handle, for
// another factor or after it expired.

package identity

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ChallengeTTL is how long a challenge may be answered: long enough to
// run ssh-keygen or gpg by hand, short enough that a leaked statement is
// soon worthless.
const ChallengeTTL = 10 * time.Minute

// NonceSize is the size of a challenge nonce: 256 bits.
const NonceSize = 32

// statementTitle is the statement's first line.
const statementTitle = "Kith identity statement"

// ErrBadStatement means a statement is not one Kith issued.
var ErrBadStatement = errors.New("malformed statement")

// Challenge is an issued statement and what it says.
type Challenge struct {
	// Server names the issuing server, as configured ("Kith
	// <https://keys.example.org>").
	Server  string
	Purpose Purpose
	Handle  Handle
	// Factor is the factor to claim, add or revoke. For an SSH key the
	// statement carries the whole key, so that it can be verified alone.
	Factor Factor
	// Nonce is random and single-use.
	Nonce []byte
	// Issued and Expires bound when the statement may be answered.
	Issued  time.Time
	Expires time.Time
	// Statement is the exact text to sign.
	Statement []byte
}

// NewChallenge renders the statement for the given fields. Times are
// kept to the second, as the statement writes them.
func NewChallenge(server string, purpose Purpose, h Handle, f Factor, nonce []byte, issued time.Time) (*Challenge, error) {
	if strings.ContainsAny(server, "\r\n") || server == "" {
		return nil, fmt.Errorf("identity: new challenge: server name %q must be one non-empty line", server)
	}
	if !purpose.Valid() && purpose != PurposeDeleteKey {
		return nil, fmt.Errorf("identity: new challenge: unknown purpose %q", purpose)
	}
	if len(nonce) < 16 {
		return nil, fmt.Errorf("identity: new challenge: nonce of %d bytes is too short", len(nonce))
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("identity: new challenge: %w", err)
	}
	issued = issued.UTC().Truncate(time.Second)
	c := &Challenge{
		Server: server, Purpose: purpose, Handle: h, Factor: f,
		Nonce: bytes.Clone(nonce), Issued: issued, Expires: issued.Add(ChallengeTTL),
	}
	c.Statement = c.render()
	return c, nil
}

func (c *Challenge) render() []byte {
	var b strings.Builder
	b.WriteString(statementTitle + "\n\n")
	fmt.Fprintf(&b, "server: %s\n", c.Server)
	fmt.Fprintf(&b, "purpose: %s\n", c.Purpose)
	if c.Purpose != PurposeDeleteKey {
		fmt.Fprintf(&b, "handle: %s\n", c.Handle)
	}
	fmt.Fprintf(&b, "factor: %s\n", c.Factor)
	if c.Factor.Kind == KindSSH {
		fmt.Fprintf(&b, "key: %s %s\n", sshKeyType(c.Factor.Data), base64.StdEncoding.EncodeToString(c.Factor.Data))
	}
	fmt.Fprintf(&b, "nonce: %s\n", base64.RawURLEncoding.EncodeToString(c.Nonce))
	fmt.Fprintf(&b, "issued: %s\n", c.Issued.Format(time.RFC3339))
	fmt.Fprintf(&b, "expires: %s\n", c.Expires.Format(time.RFC3339))
	b.WriteString("\n")
	switch c.Purpose {
	case PurposeClaim:
		b.WriteString("I hold this key and claim this handle with it.\n")
	case PurposeAdd:
		b.WriteString("I link this factor to this handle.\n")
	case PurposeRevoke:
		b.WriteString("I unlink this factor from this handle.\n")
	case PurposeDeleteKey:
		b.WriteString("I hold this key and ask this server to delete it: to keep only its primary key\n" +
			"and revocations, and never to store anything else of it again.\n")
	case PurposeLogin:
		b.WriteString("I log in to this server as this handle with this key.\n")
	case PurposeCertificate:
		b.WriteString("I ask this server for an SSH certificate for this key, as this handle.\n")
	}
	return []byte(b.String())
}

// sshKeyType reads the key type, the first string of an SSH key blob.
func sshKeyType(blob []byte) string {
	if len(blob) < 4 {
		return "unknown"
	}
	n := binary.BigEndian.Uint32(blob)
	if uint64(n) > uint64(len(blob)-4) {
		return "unknown"
	}
	return string(blob[4 : 4+n])
}

// ParseStatement parses a statement Kith issued. It accepts the text as
// signed: a final newline may be missing (a cleartext signature does not
// cover it) and lines may end in CRLF.
func ParseStatement(text []byte) (*Challenge, error) {
	s := strings.ReplaceAll(string(text), "\r\n", "\n")
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) < 3 || lines[0] != statementTitle || lines[1] != "" {
		return nil, fmt.Errorf("%w: it does not start with %q", ErrBadStatement, statementTitle)
	}
	c := &Challenge{}
	fields := map[string]string{}
	for _, l := range lines[2:] {
		if l == "" {
			break
		}
		k, v, ok := strings.Cut(l, ": ")
		if !ok {
			return nil, fmt.Errorf("%w: line %q is not \"name: value\"", ErrBadStatement, clip(l))
		}
		if _, dup := fields[k]; dup {
			return nil, fmt.Errorf("%w: %s given twice", ErrBadStatement, k)
		}
		fields[k] = v
	}
	need := func(k string) (string, error) {
		v, ok := fields[k]
		if !ok {
			return "", fmt.Errorf("%w: no %s line", ErrBadStatement, k)
		}
		return v, nil
	}
	var err error
	if c.Server, err = need("server"); err != nil {
		return nil, err
	}
	p, err := need("purpose")
	if err != nil {
		return nil, err
	}
	c.Purpose = Purpose(p)
	if c.Purpose != PurposeDeleteKey {
		h, err := need("handle")
		if err != nil {
			return nil, err
		}
		c.Handle = Handle(h)
	} else if _, ok := fields["handle"]; ok {
		return nil, fmt.Errorf("%w: a key deletion names no handle", ErrBadStatement)
	}
	f, err := need("factor")
	if err != nil {
		return nil, err
	}
	kind, value, _ := strings.Cut(f, " ")
	c.Factor = Factor{Kind: FactorKind(kind), Value: value}
	if c.Factor.Kind == KindSSH {
		k, err := need("key")
		if err != nil {
			return nil, err
		}
		_, b64, _ := strings.Cut(k, " ")
		if c.Factor.Data, err = base64.StdEncoding.DecodeString(b64); err != nil {
			return nil, fmt.Errorf("%w: key: %v", ErrBadStatement, err)
		}
	}
	n, err := need("nonce")
	if err != nil {
		return nil, err
	}
	if c.Nonce, err = base64.RawURLEncoding.DecodeString(n); err != nil {
		return nil, fmt.Errorf("%w: nonce: %v", ErrBadStatement, err)
	}
	for _, t := range []struct {
		key string
		dst *time.Time
	}{{"issued", &c.Issued}, {"expires", &c.Expires}} {
		v, err := need(t.key)
		if err != nil {
			return nil, err
		}
		if *t.dst, err = time.Parse(time.RFC3339, v); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBadStatement, t.key, err)
		}
	}
	c.Statement = c.render()
	if !SameStatement(c.Statement, text) {
		return nil, fmt.Errorf("%w: it is not in the form Kith issues", ErrBadStatement)
	}
	return c, nil
}

// SameStatement reports whether a and b are the same statement text, up
// to line endings and final newlines (which cleartext signatures do not
// preserve).
func SameStatement(a, b []byte) bool {
	norm := func(x []byte) []byte {
		return bytes.TrimRight(bytes.ReplaceAll(x, []byte("\r\n"), []byte("\n")), "\n")
	}
	return bytes.Equal(norm(a), norm(b))
}
