// known_hosts.go: `kith known-hosts`, ssh's KnownHostsCommand: prints the
// proven SSH host keys of a host identity (host:NAME) in the form ssh
// asked for (%H), as package web/api/client fetches and checks them. It
// fails closed: on any error it prints nothing and exits non-zero, so ssh
// finds no key. A host the server does not know, or an argument that is
// no host name (an address), prints nothing and exits zero, so ssh goes
// on to its other known hosts sources.

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kith-keyserver/kith/web/api/client"
)

func runKnownHosts(ctx context.Context, env *environment, args []string) error {
	fs := newToolFlags(env, "known-hosts", "known-hosts [flags] HOST",
		"Prints the proven SSH host keys of HOST (published as host:HOST) from a Kith server,\n"+
			"as known_hosts lines, for ssh's KnownHostsCommand:\n"+
			"  KnownHostsCommand /usr/local/bin/kith known-hosts --server URL %H\n"+
			"HOST may be NAME or [NAME]:PORT (ssh's %H for a port other than 22).\n"+
			"On any error it prints nothing and exits non-zero; an unknown host prints nothing.")
	server := serverFlag(fs, env)
	timeout := fs.Duration("timeout", 5*time.Second, "how long (a `duration`) to wait for the server")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return misuse(env, "known-hosts", "takes one HOST")
	}
	if *timeout <= 0 {
		return fmt.Errorf("%w: --timeout must be positive", errUsage)
	}
	c, err := newServerClient(*server, *timeout)
	if err != nil {
		return err
	}
	host := fs.Arg(0)
	log := slog.New(slog.NewTextHandler(env.stderr, nil)).With("command", "known-hosts", "server", c.Server(), "host", host)
	warnPlainHTTP(log, c, "substitute their own host key and see or change everything the session carries")
	lines, err := c.KnownHosts(ctx, host)
	switch {
	case errors.Is(err, client.ErrNotHostName):
		// Not a name Kith could publish (ssh asks for addresses too):
		// no keys, and no failure, which would make ssh give up.
		log.Debug("no host keys for this host", "reason", err.Error())
		return nil
	case err != nil:
		log.Warn("could not get the host keys; printing none", "err", err)
		return fmt.Errorf("%w: %v", client.ErrNoKeys, err)
	case len(lines) == 0:
		log.Info("the server has no keys for this host")
	}
	_, err = env.stdout.Write(lines)
	return err
}

// warnPlainHTTP warns when c speaks plain http to another machine: then
// anyone on the path can swap the answer, to do what risk says.
func warnPlainHTTP(log *slog.Logger, c *client.Client, risk string) {
	if c.PlainHTTP() {
		log.Warn("fetching keys without TLS: anyone on the path to the server can " + risk + "; use an https server URL")
	}
}
