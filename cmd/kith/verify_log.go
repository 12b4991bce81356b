// verify_log.go: `kith verify-log`, which re-verifies the evidence log
// offline: every record's signature against the key material it carries,
// what its statement says, and the hash chain from the first record to the
// last. It trusts nothing the server says about its own records.

package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kith-keyserver/kith/identity/tlog/policy"
	"github.com/kith-keyserver/kith/web/api"
	"github.com/kith-keyserver/kith/web/api/client"
)

// errLogInvalid marks a log in which some record failed.
var errLogInvalid = client.ErrLogInvalid

func runVerifyLog(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSetWith(env, "verify-log", func(w io.Writer) {
		fmt.Fprintf(w, "Usage: kith verify-log (--server URL [--state FILE] [--log-key KEY | --policy FILE] | --file FILE) [--artifacts FILE]\n\n")
		fmt.Fprintf(w, "Re-verifies every evidence record's proof and the hash chain, printing each failure; with --server, also\n")
		fmt.Fprintf(w, "that the records are exactly the entries of the log's signed checkpoint, and with --state that it is\n")
		fmt.Fprintf(w, "consistent with the checkpoint verified last time; with --policy, that the checkpoint carries the\n")
		fmt.Fprintf(w, "policy's quorum of witness cosignatures, so that it is the log everyone else is shown.\n\n")
	})
	server := fs.String("server", "", "fetch the log from the Kith server at `URL` and check it against its signed checkpoint")
	file := fs.String("file", "", "read the log from `file` (JSON pages of GET /api/v1/log, one after another; - for stdin); no checkpoint is checked")
	stateFile := fs.String("state", "", "remember the log key and the last verified checkpoint in `file`, and prove the next one consistent with it")
	logKeyFlag := fs.String("log-key", "", "the log's verifier `key` (as kith log-key prints it); default: the one in --state, else the server's, trusted on first use")
	policyFile := fs.String("policy", "", "a C2SP tlog-policy `file`: its log line stands for --log-key, and the checkpoint must carry its quorum of witness cosignatures")
	timeout := fs.Duration("timeout", 30*time.Second, "how long each page fetch may take")
	artifactsFile := fs.String("artifacts", "", "check the records whose ID tokens and emails are private with the artifacts in `file` (JSON, as the account page's \"Download my artifacts\" gives them)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*server == "") == (*file == "") || fs.NArg() > 0 {
		return misuse(env, "verify-log", "give exactly one of --server and --file")
	}
	if *file != "" && (*stateFile != "" || *logKeyFlag != "" || *policyFile != "") {
		return misuse(env, "verify-log", "--state, --log-key and --policy check a server's checkpoint; they need --server")
	}
	if *logKeyFlag != "" && *policyFile != "" {
		return misuse(env, "verify-log", "give one of --log-key and --policy (its log line is the log key)")
	}
	var witnesses *policy.Policy
	if *policyFile != "" {
		var err error
		if witnesses, *logKeyFlag, err = readLogPolicy(*policyFile); err != nil {
			return err
		}
	}
	var audit client.LogAudit
	if *artifactsFile != "" {
		var err error
		if audit.Artifacts, err = client.ReadArtifacts(*artifactsFile); err != nil {
			return err
		}
	}
	check := func(r api.LogRecord) {
		for _, f := range audit.Check(r) {
			switch f.Kind {
			case client.Erased:
				fmt.Fprintf(env.stdout, "record %d: artifact erased: %s\n", f.Seq, f.Reason)
			case client.Unchecked:
				fmt.Fprintf(env.stdout, "record %d: unchecked: %s\n", f.Seq, f.Reason)
			default:
				fmt.Fprintf(env.stdout, "record %d: FAIL: %s\n", f.Seq, f.Reason)
			}
		}
	}
	if *file != "" {
		if err := readLogFile(*file, check); err != nil {
			return err
		}
		return verifyLogResult(env, &audit, "no checkpoint checked")
	}
	c, err := newServerClient(*server, *timeout)
	if err != nil {
		return err
	}
	lc, err := c.Monitor(ctx, *stateFile, *logKeyFlag)
	if err != nil {
		return err
	}
	lc.Policy = witnesses
	if lc.TrustedOnFirstUse {
		fmt.Fprintf(env.stdout, "trusting the log key %s on first use\n", lc.Key())
	}
	cp, err := lc.Checkpoint(ctx)
	if err != nil {
		if errors.Is(err, policy.ErrNoQuorum) {
			fmt.Fprintf(env.stdout, "FAIL: %v\n", err)
		}
		return err
	}
	if err := c.Log(ctx, check); err != nil {
		return err
	}
	if err := lc.CheckTree(audit.Tree(), cp); err != nil {
		fmt.Fprintf(env.stdout, "FAIL: %v\n", err)
		return fmt.Errorf("%w: %w", errLogInvalid, err)
	}
	summary := fmt.Sprintf("checkpoint %d %s", cp.Size, base64.StdEncoding.EncodeToString(cp.Root[:]))
	if extra := audit.Tree().Size() - cp.Size; extra > 0 {
		summary += fmt.Sprintf(" (%d later records not in it yet)", extra)
	}
	if err := verifyLogResult(env, &audit, summary); err != nil {
		return err
	}
	return lc.Save()
}

// verifyLogResult prints the verdict on the records. The records whose
// proofs are private artifacts it could not open are counted apart: they
// are in the log, with their commitments, but not verified.
func verifyLogResult(env *environment, audit *client.LogAudit, summary string) error {
	v, failed, revealed := audit.Verifier(), audit.Failed(), audit.Revealed()
	seq, hash := v.Head()
	if failed > 0 {
		fmt.Fprintf(env.stdout, "%d of %d records failed\n", failed, v.Count())
		return fmt.Errorf("%w: %d records failed", errLogInvalid, failed)
	}
	unchecked := ""
	if n := v.Unchecked(); n > 0 {
		unchecked = fmt.Sprintf(", %d unchecked (what they prove is in private artifacts: chain, inclusion and public packets checked, the rest not)", n)
	}
	if n := v.Erased(); n > 0 {
		unchecked += fmt.Sprintf(", %d of them artifact erased", n)
	}
	if revealed > 0 {
		unchecked += fmt.Sprintf(", %d checked with their artifacts", revealed)
	}
	fmt.Fprintf(env.stdout, "ok: %d records verified%s; head %d %s; %s\n", v.Count()-v.Unchecked(), unchecked, seq, hex.EncodeToString(hash), summary)
	return nil
}

// readLogFile reads concatenated log pages from a file.
func readLogFile(name string, fn func(api.LogRecord)) error {
	var r io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	if err := client.ReadLog(r, fn); err != nil {
		return fmt.Errorf("read log %s: %w", name, err)
	}
	return nil
}
