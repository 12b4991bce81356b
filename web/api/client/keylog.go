// keylog.go: key transparency for SSH logins. With a log key, a key is
// returned only when every record that proves it re-verifies offline and
// is included, by a proof from the log's tiles, in a signed checkpoint
// consistent with the last one this host saw. So a server cannot let a
// key log in here that it does not show, in the same log, to everyone.

package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"path/filepath"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/ssh"
	"github.com/kith-keyserver/kith/web/api"
)

// logStateFile names the last seen checkpoint in the cache directory (no
// handle's answer is called that: those end in .keys).
const logStateFile = "log-checkpoint.state"

// tiles fetches the log's tiles and checkpoints for tlog's proofs.
func (c *Client) tiles(ctx context.Context, path string) ([]byte, error) {
	return c.get(ctx, "/log/"+path, maxSmallBody)
}

// keysInLog returns the lines of body (an authorized_keys answer for h)
// whose proofs are in the log, and remembers the checkpoint it checked
// them against. An error means nothing may be returned: the checkpoint
// does not verify or is not consistent with the last one seen.
func (c *Client) keysInLog(ctx context.Context, opts KeysOptions, log *slog.Logger, h identity.Handle, body []byte) ([]byte, error) {
	if err := tlog.CheckVerifierKey(opts.LogKey); err != nil {
		return nil, err
	}
	signed, err := c.get(ctx, "/log/checkpoint", maxSmallBody)
	if err != nil {
		return nil, err
	}
	cp, err := tlog.OpenCheckpoint(signed, opts.LogKey)
	if err != nil {
		return nil, fmt.Errorf("the log's checkpoint does not verify with --log-key: %w", err)
	}
	stateFile := filepath.Join(opts.CacheDir, logStateFile)
	last, _, err := readCache(opts.CacheDir, stateFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		log.Info("no checkpoint seen before; trusting this one's history", "size", cp.Size)
	case err != nil:
		return nil, fmt.Errorf("the last checkpoint seen: %w", err)
	default:
		old, err := tlog.OpenCheckpoint(last, opts.LogKey)
		if err != nil {
			return nil, fmt.Errorf("the last checkpoint seen, %s: %w", stateFile, err)
		}
		if err := tlog.ProveConsistency(ctx, c.tiles, old, cp); err != nil {
			return nil, err
		}
	}

	docBody, err := c.get(ctx, "/users/"+url.PathEscape(string(h))+".json", maxDocBody)
	if err != nil {
		return nil, err
	}
	var doc api.IdentityDoc
	if err := json.Unmarshal(docBody, &doc); err != nil {
		return nil, fmt.Errorf("identity document: %w", err)
	}
	keys, err := ssh.ParseAuthorizedKeys(body)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for _, k := range keys {
		fp := k.Fingerprint().String()
		if err := c.keyProofInLog(ctx, cp, doc, fp); err != nil {
			log.Warn("not printing a key whose proof is not in the log", "fingerprint", fp, "reason", err.Error())
			continue
		}
		out.Write(ssh.MarshalAuthorizedKey(k))
	}
	if cp.Size > 0 {
		if err := writeCache(opts.CacheDir, stateFile, signed); err != nil {
			warnCacheUnwritable(log, opts.CacheDir, err)
		}
	}
	return out.Bytes(), nil
}

// keyProofInLog checks the records the identity document says prove the
// SSH key fp: at least one, one of them naming the key, each re-verified
// and included in cp.
func (c *Client) keyProofInLog(ctx context.Context, cp tlog.Checkpoint, doc api.IdentityDoc, fp string) error {
	var seqs []int64
	for _, f := range doc.Factors {
		if f.Kind != string(identity.KindSSH) || f.Value != fp {
			continue
		}
		for _, e := range f.Evidence {
			if e.Counts {
				seqs = append(seqs, e.Seq)
			}
		}
	}
	if len(seqs) == 0 {
		return errors.New("the server names no record that proves it")
	}
	named := false
	for _, seq := range seqs {
		if seq < 1 || seq > cp.Size {
			return fmt.Errorf("record %d is not in the checkpoint of %d records", seq, cp.Size)
		}
		b, err := c.get(ctx, fmt.Sprintf("/api/v1/log?after=%d&limit=1", seq-1), maxDocBody)
		if err != nil {
			return err
		}
		var page api.LogPage
		if err := json.Unmarshal(b, &page); err != nil || len(page.Records) != 1 || page.Records[0].Seq != seq {
			return fmt.Errorf("record %d: the server did not give it", seq)
		}
		e, err := page.Records[0].Evidence()
		if err != nil {
			return fmt.Errorf("record %d: %w", seq, err)
		}
		if err := verify.Record(e); err != nil {
			return fmt.Errorf("record %d does not verify: %w", seq, err)
		}
		if err := tlog.ProveInclusion(ctx, c.tiles, cp, seq-1, e.ComputeHash()); err != nil {
			return fmt.Errorf("record %d: %w", seq, err)
		}
		named = named || e.From.Value == fp || e.To.Value == fp
	}
	if !named {
		return errors.New("no record that proves it names it")
	}
	return nil
}
