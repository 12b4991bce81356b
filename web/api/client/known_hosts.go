// known_hosts.go: a host's proven SSH host keys for ssh's
// KnownHostsCommand, checked line by line: nothing but plain keys of the
// host asked about, or nothing at all. There is no cache: a host key is
// checked at every connection, and a stale answer could keep a replaced
// key trusted.

package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/ssh"
)

// ErrNotHostName marks a host argument that is not a name Kith could
// publish keys for (an address, a pattern): ssh asks for addresses too,
// and no keys is the answer, not a failure.
var ErrNotHostName = errors.New("not a host name")

// KnownHosts returns the proven host keys of host (ssh's %H: NAME, or
// [NAME]:PORT for another port than 22) as known_hosts lines whose host
// is host itself. A host the server does not know gets no lines and no
// error; any other failure, including an answer with anything but plain
// keys of that host, is an error and no lines.
func (c *Client) KnownHosts(ctx context.Context, host string) ([]byte, error) {
	name, err := splitKnownHost(host)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotHostName, err)
	}
	status, body, err := c.do(ctx, http.MethodGet, "/hosts/"+url.PathEscape(name)+".known_hosts", "", nil, maxTextBody)
	switch {
	case err != nil:
		return nil, err
	case status == http.StatusNotFound:
		// The server's word: it has no keys for this host.
		return nil, nil
	case status != http.StatusOK:
		return nil, fmt.Errorf("server answered %d: %s", status, clip(strings.TrimSpace(string(body))))
	}
	return knownHostsLines(body, name, host)
}

// splitKnownHost reads ssh's %H: NAME or [NAME]:PORT, and returns the
// host name as the server knows it (folded).
func splitKnownHost(arg string) (string, error) {
	name := arg
	if rest, ok := strings.CutPrefix(arg, "["); ok {
		n, port, ok := strings.Cut(rest, "]:")
		if p, err := strconv.Atoi(port); !ok || err != nil || p < 1 || p > 65535 {
			return "", fmt.Errorf("host %q is neither NAME nor [NAME]:PORT", clipArg(arg))
		}
		name = n
	}
	name = identity.FoldHostName(name)
	if _, err := identity.ParseHostName(name); err != nil {
		return "", err
	}
	return name, nil
}

// clipArg shortens an argument for an error message.
func clipArg(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// knownHostsLines checks the server's answer for name, line by line
// ("name keytype base64"), and re-renders it with pattern (what ssh asked
// for) as each line's host, so that no other host's key, marker
// (@revoked, @cert-authority) or option can slip through.
func knownHostsLines(body []byte, name, pattern string) ([]byte, error) {
	var b bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), maxTextBody)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		host, key, ok := strings.Cut(line, " ")
		if !ok || identity.FoldHostName(host) != name {
			return nil, fmt.Errorf("answer line %d is not a known_hosts line for %s", n, name)
		}
		k, err := ssh.ParseAuthorizedKey([]byte(strings.TrimSpace(key)))
		if err != nil {
			return nil, fmt.Errorf("answer line %d: %w", n, err)
		}
		if k.Cert != nil || len(k.Options) > 0 {
			return nil, fmt.Errorf("answer line %d is not a plain host key", n)
		}
		b.WriteString(pattern + " ")
		b.Write(ssh.MarshalAuthorizedKey(ssh.NewKey(k.Public, "")))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("answer: %w", err)
	}
	return b.Bytes(), nil
}
