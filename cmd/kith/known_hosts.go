// known_hosts.go: `kith known-hosts`, ssh's KnownHostsCommand. It fetches
// the proven SSH host keys of a host identity (host:NAME) from a Kith
// server and prints them as known_hosts lines in the form ssh asked for
// (%H: the name, "[name]:port" or a HostKeyAlias). It fails closed: on any
// error it prints nothing and exits non-zero, so ssh finds no key (and
// gives up on the connection). A host the server does not know (404), or
// an argument that is no host name (an address), is no error: nothing is
// printed and it exits zero, so ssh goes on to its other known hosts
// sources and, with StrictHostKeyChecking, refuses. It has no cache: a host
// key is checked at every connection, and a stale answer could keep a
// replaced key trusted.

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/ssh"
)

func runKnownHosts(ctx context.Context, env *environment, args []string) error {
	fs := newToolFlags(env, "known-hosts", "known-hosts [flags] HOST",
		"Prints the proven SSH host keys of HOST (published as host:HOST) from a Kith server,\n"+
			"as known_hosts lines, for ssh's KnownHostsCommand:\n"+
			"  KnownHostsCommand /usr/local/bin/kith known-hosts --server URL %H\n"+
			"HOST may be NAME or [NAME]:PORT (ssh's %H for a port other than 22).\n"+
			"On any error it prints nothing and exits non-zero; an unknown host prints nothing.")
	server := fs.String("server", getenv(env, idServerEnv), "Kith server `URL` (env "+idServerEnv+")")
	timeout := fs.Duration("timeout", 5*time.Second, "how long (a `duration`) to wait for the server")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return misuse(env, "known-hosts", "takes one HOST")
	}
	if *server == "" {
		return fmt.Errorf("%w: no server: give --server URL or set %s", errUsage, idServerEnv)
	}
	if *timeout <= 0 {
		return fmt.Errorf("%w: --timeout must be positive", errUsage)
	}
	log := slog.New(slog.NewTextHandler(env.stderr, nil)).With("command", "known-hosts")
	if err := checkKeyServer(log, *server, "substitute their own host key and see or change everything the session carries"); err != nil {
		return err
	}
	return knownHosts(ctx, env.stdout, log, *server, *timeout, fs.Arg(0))
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

// knownHosts prints the host's keys for ssh, all of them or nothing.
func knownHosts(ctx context.Context, out io.Writer, log *slog.Logger, server string, timeout time.Duration, host string) error {
	name, err := splitKnownHost(host)
	if err != nil {
		// Not a name Kith could publish (ssh asks for addresses too, to
		// order its host key algorithms): no keys, and no failure, which
		// would make ssh give up on the connection.
		log.Debug("no host keys for this host", "host", host, "reason", err.Error())
		return nil
	}
	var lines []byte
	body, status, err := fetchText(ctx, server, "/hosts/"+url.PathEscape(name)+".known_hosts", "kith-known-hosts", timeout,
		func(body []byte) error {
			var err error
			lines, err = knownHostsLines(body, name, host)
			return err
		})
	switch {
	case err != nil:
		log.Warn("could not fetch the host keys; printing none", "server", server, "host", host, "err", err)
		return fmt.Errorf("%w: %v", errNoKeys, err)
	case status == http.StatusNotFound:
		// The server's word: it has no keys for this host.
		log.Info("the server has no keys for this host", "server", server, "host", host)
		return nil
	case status != http.StatusOK:
		log.Warn("the server refused the lookup; printing no host keys", "server", server, "host", host, "status", status,
			"answer", strings.TrimSpace(string(body[:min(len(body), 200)])))
		return fmt.Errorf("%w: server answered %d", errNoKeys, status)
	}
	_, err = out.Write(lines)
	return err
}

// knownHostsLines checks the server's answer for name, line by line
// ("name keytype base64"), and re-renders it with pattern (what ssh asked
// for) as each line's host, so that no other host's key, marker
// (@revoked, @cert-authority) or option can slip through.
func knownHostsLines(body []byte, name, pattern string) ([]byte, error) {
	var b bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), maxKeysBody)
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
