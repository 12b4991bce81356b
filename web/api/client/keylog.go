// keylog.go: key transparency for SSH logins. With a log key, the answer
// is fetched with its proof bundle, and a key is returned only when the
// records that link it to the handle re-verify offline and are included,
// by their tlog-proofs, in a signed checkpoint consistent with the last
// one this host saw. So a server cannot let a
// key log in here that it does not show, in the same log, to everyone.

package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/identity/tlog/policy"
	"github.com/kith-keyserver/kith/ssh"
)

// logStateFile names the last seen checkpoint in the cache directory (no
// handle's answer is called that: those end in .keys).
const logStateFile = "log-checkpoint.state"

// keysInLog fetches h's authorized_keys answer with its proof bundle
// (one request) and returns the server's status and, on 200, the lines
// of the answer whose keys the bundle proves to be linked to h in a
// checkpoint signed by the log key and consistent with the last one this
// host saw, which it then remembers. unavailable means the server could
// not be asked (the cache may stand in); a bundle that does not hold is
// bad, and nothing may be printed.
func (c *Client) keysInLog(ctx context.Context, opts KeysOptions, log *slog.Logger, h identity.Handle) (status int, body []byte, unavailable, bad error) {
	open, openSeen, err := checkpointOpeners(opts.LogKey, opts.LogPolicy)
	if err != nil {
		return 0, nil, nil, err
	}
	stateFile := filepath.Join(opts.CacheDir, logStateFile)
	var last *tlog.Checkpoint
	prev, _, err := readCache(opts.CacheDir, stateFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return 0, nil, nil, fmt.Errorf("the last checkpoint seen: %w", err)
	default:
		old, err := openSeen(prev)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("the last checkpoint seen, %s: %w", stateFile, err)
		}
		last = &old
	}
	status, pb, err := c.ProofBundle(ctx, "/users/"+url.PathEscape(string(h))+".keys", last)
	if errors.Is(err, ErrBadProof) {
		return status, nil, nil, err
	}
	if err != nil || status != http.StatusOK {
		return status, nil, err, nil
	}
	checked, err := CheckBundle(pb, h, open, last, time.Now())
	if err != nil {
		return status, nil, nil, err
	}
	if last == nil {
		log.Info("no checkpoint seen before; trusting this one's history", "size", checked.Checkpoint.Size)
	}
	keys, err := ssh.ParseAuthorizedKeys([]byte(pb.Answer))
	if err != nil {
		return status, nil, nil, fmt.Errorf("%w: the answer is not authorized_keys text: %v", ErrBadProof, err)
	}
	var out bytes.Buffer
	for _, k := range keys {
		f := identity.Factor{Kind: identity.KindSSH, Value: k.Fingerprint().String()}
		switch {
		case checked.Proven[f.String()]:
			out.Write(ssh.MarshalAuthorizedKey(k))
		case checked.Pending[f.String()]:
			log.Warn("not printing a key whose proof is not in the checkpoint yet", "fingerprint", f.Value,
				"checkpoint", checked.Checkpoint.Size)
		default:
			log.Warn("not printing a key whose proof is not in the log", "fingerprint", f.Value,
				"reason", "the server names no record that proves it")
		}
	}
	if checked.Checkpoint.Size > 0 && (last == nil || checked.Checkpoint.Size > last.Size) {
		if err := writeCache(opts.CacheDir, stateFile, checked.Signed); err != nil {
			warnCacheUnwritable(log, opts.CacheDir, err)
		}
	}
	return status, out.Bytes(), nil, nil
}

// checkpointOpeners returns how a served checkpoint is opened: with the
// log key, and with a policy also by its quorum of witnesses; and how
// the checkpoint seen last is (by the log's signature alone: its
// cosignatures were checked when it was served). A policy stands for
// the log key only when it lists one log: of several, the server could
// answer with another log's checkpoint and records, where the handle
// may be someone else's.
func checkpointOpeners(logKey string, p *policy.Policy) (served, seen OpenCheckpoint, err error) {
	if logKey != "" {
		if err := tlog.CheckVerifierKey(logKey); err != nil {
			return nil, nil, err
		}
	}
	if logKey == "" && p != nil && len(p.Logs) != 1 {
		return nil, nil, fmt.Errorf("the log policy lists %d logs: give the log key of the server's", len(p.Logs))
	}
	byKey := func(signed []byte) (tlog.Checkpoint, error) { return tlog.OpenCheckpoint(signed, logKey) }
	switch {
	case p == nil && logKey == "":
		return nil, nil, errors.New("neither a log key nor a log policy")
	case p == nil:
		return byKey, byKey, nil
	}
	byPolicyLog := func(signed []byte) (tlog.Checkpoint, error) {
		if logKey != "" {
			return byKey(signed)
		}
		text, _, ok := tlog.SplitNote(signed)
		if !ok {
			return tlog.Checkpoint{}, errors.New("checkpoint is not a signed note")
		}
		origin, _, _ := bytes.Cut(text, []byte("\n"))
		l, ok := p.Log(string(origin))
		if !ok {
			return tlog.Checkpoint{}, fmt.Errorf("the checkpoint's origin %q is not a log of the policy", origin)
		}
		return tlog.OpenCheckpoint(signed, l.VerifierKey)
	}
	served = func(signed []byte) (tlog.Checkpoint, error) {
		cp, err := p.Verify(signed)
		if err != nil {
			return cp, err
		}
		if logKey != "" {
			return byKey(signed)
		}
		return cp, nil
	}
	return served, byPolicyLog, nil
}
