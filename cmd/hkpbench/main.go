// Command hkpbench measures an HKP server on this machine.
//
//	hkpbench serve [-keys 200000] [-data DIR | -database-url URL] [-listen 127.0.0.1:11371]
//
// fills a store with generated typical keys (pgp/keygen) until it holds
// -keys, writes URL lists for lookups of a sample of them
// (get-fingerprint.txt, index-email.txt, index-words.txt) and serves HKP
// on a loopback address until interrupted.
//
//	hkpbench run [-c 32] [-d 10s] [-n 0] [-warmup 1s] -urls FILE... | -url URL...
//
// runs -c keep-alive clients that request the URLs in turn for -d (and at
// most -n requests), then prints requests per second, latency percentiles
// (p50, p90, p99, max), status codes and errors. Only http:// URLs to
// loopback addresses are accepted, and every run is bounded in time (at
// most 10 minutes) and count.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "hkpbench:", err)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: hkpbench serve|run [flags] (see -h of each)")
	}
	switch args[0] {
	case "serve":
		return serveCommand(ctx, args[1:], stdout)
	case "run":
		return runCommand(ctx, args[1:], stdout)
	}
	return fmt.Errorf("unknown command %q: use serve or run", args[0])
}
