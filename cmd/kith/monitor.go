// monitor.go: `kith monitor`, which follows the log from a saved state
// through the tiles and prints one line for each new record that touches
// the handles, addresses, OpenPGP keys or SSH keys it is given: a link,
// a revocation, a certificate issued, a deletion. Run from cron, it tells
// a person when someone links a key to their handle or address; a log
// that is not consistent with the state is an error (exit 1).

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/tlog/policy"
	"github.com/kith-keyserver/kith/web/api/client"
)

func runMonitor(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSetWith(env, "monitor", func(w io.Writer) {
		fmt.Fprintf(w, "Usage: kith monitor --server URL --state FILE [--policy FILE] [--json] TERM...\n\n")
		fmt.Fprintf(w, "Follows the transparency log from the checkpoint saved in FILE to the latest one, proving it consistent\n")
		fmt.Fprintf(w, "and each record the log's entry, and prints one line per new record that touches a TERM: a handle, an\n")
		fmt.Fprintf(w, "address, an OpenPGP fingerprint or an SSH SHA256: fingerprint. The first run reports the whole log.\n")
		fmt.Fprintf(w, "For cron: */5 * * * * kith monitor --server https://keys.example.org --state ~/.kith-monitor alice\n\n")
	})
	server := fs.String("server", "", "the Kith server's `URL`")
	stateFile := fs.String("state", "", "keep the log key and the last checkpoint followed in `file`")
	policyFile := fs.String("policy", "", "witness policy `file` (C2SP tlog-policy): follow only checkpoints its quorum cosigned; its log line stands for --log-key")
	logKey := fs.String("log-key", "", "the log's verifier `key` (kith log-key prints it); default: the policy's, the state's, else the server's, trusted on first use")
	asJSON := fs.Bool("json", false, "print JSON lines instead of text")
	timeout := fs.Duration("timeout", 30*time.Second, "how long each request may take")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *stateFile == "" || fs.NArg() == 0 {
		return misuse(env, "monitor", "give --state FILE and at least one TERM")
	}
	var terms []client.Term
	for _, a := range fs.Args() {
		t, err := client.ParseTerm(a)
		if err != nil {
			return misuse(env, "monitor", "%v", err)
		}
		terms = append(terms, t)
	}
	var pol *policy.Policy
	if *policyFile != "" {
		var err error
		if pol, err = policy.ReadFile(*policyFile); err != nil {
			return fmt.Errorf("setting policy: %w", err)
		}
		if *logKey == "" && len(pol.Logs) == 1 {
			*logKey = pol.Logs[0].VerifierKey
		}
	}
	c, err := newServerClient(*server, *timeout)
	if err != nil {
		return err
	}
	mon, err := c.Monitor(ctx, *stateFile, *logKey)
	if err != nil {
		return err
	}
	if mon.TrustedOnFirstUse {
		fmt.Fprintf(env.stderr, "kith monitor: trusting the log key %s on first use\n", mon.Key())
	}
	cp, err := mon.Checkpoint(ctx)
	if err != nil {
		return err
	}
	if pol != nil {
		signed, err := mon.Signed()
		if err != nil {
			return err
		}
		if err := pol.VerifyCosignatures(signed); err != nil {
			return fmt.Errorf("%w: %w", client.ErrLogInvalid, err)
		}
	}
	watch, err := c.Watch(ctx, terms)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(env.stdout)
	err = c.FollowLog(ctx, mon.Last(), cp, func(e *identity.Evidence) error {
		ev, ok := watch.Match(e)
		switch {
		case !ok:
			return nil
		case *asJSON:
			return enc.Encode(ev)
		}
		_, err := fmt.Fprintln(env.stdout, ev.String())
		return err
	})
	if errors.Is(err, client.ErrLogInvalid) {
		return fmt.Errorf("the log is not consistent with %s (keep that file: it is the evidence): %w", *stateFile, err)
	}
	if err != nil {
		return err
	}
	return mon.Save()
}
