// logclient.go: the client side of the transparency log that verify-log
// and authorized-keys share: the log key (given, remembered or trusted on
// first use), the signed checkpoint, and a state file that remembers the
// last checkpoint verified, so that a rewritten, cut or forked log is
// caught on the next run, as the Go checksum database's client does.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kith-keyserver/kith/identity/tlog"
)

// logState is what a state file keeps.
type logState struct {
	// LogKey is the verifier key every checkpoint must verify with.
	LogKey string `json:"log_key"`
	// Checkpoint is the last signed checkpoint verified.
	Checkpoint string `json:"checkpoint,omitempty"`
}

// logClient checks a server's checkpoints against what it saw before.
type logClient struct {
	server  string
	timeout time.Duration
	file    string
	state   logState
	last    *tlog.Checkpoint // the state's checkpoint, verified
	signed  []byte           // the checkpoint fetched now
}

// maxCheckpointSize bounds a fetched checkpoint or key.
const maxCheckpointSize = 64 << 10

// newLogClient loads the state file (when given and present) and settles
// the log key: key when given (it must match the state's), else the
// state's, else the server's, which it then trusts from here on.
func newLogClient(ctx context.Context, server string, timeout time.Duration, file, key string, out io.Writer) (*logClient, error) {
	c := &logClient{server: server, timeout: timeout, file: file}
	if file != "" {
		b, err := os.ReadFile(file)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("log state: %w", err)
		default:
			if err := json.Unmarshal(b, &c.state); err != nil || c.state.LogKey == "" {
				return nil, fmt.Errorf("log state %s is not a state file this command wrote", file)
			}
		}
	}
	key = strings.TrimSpace(key)
	switch {
	case key != "" && c.state.LogKey != "" && key != c.state.LogKey:
		return nil, fmt.Errorf("%w: the log key %s is not the key %s remembered in %s", errLogInvalid, key, c.state.LogKey, file)
	case key != "":
		c.state.LogKey = key
	case c.state.LogKey == "":
		b, err := c.get(ctx, "/log/key")
		if err != nil {
			return nil, err
		}
		c.state.LogKey = strings.TrimSpace(string(b))
		fmt.Fprintf(out, "trusting the log key %s on first use\n", c.state.LogKey)
	}
	if err := tlog.CheckVerifierKey(c.state.LogKey); err != nil {
		return nil, err
	}
	if c.state.Checkpoint != "" {
		last, err := tlog.OpenCheckpoint([]byte(c.state.Checkpoint), c.state.LogKey)
		if err != nil {
			return nil, fmt.Errorf("log state %s: %w", file, err)
		}
		c.last = &last
	}
	return c, nil
}

// get fetches a path of the server, a checkpoint or key.
func (c *logClient) get(ctx context.Context, path string) ([]byte, error) {
	return c.getLimit(ctx, path, maxCheckpointSize)
}

// getLimit fetches a path of the server, refusing an answer over limit
// bytes.
func (c *logClient) getLimit(ctx context.Context, path string, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.server, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("fetch %s: more than %d bytes", path, limit)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch %s: %s: %s", path, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// checkpoint fetches the server's checkpoint and verifies its signature.
func (c *logClient) checkpoint(ctx context.Context) (tlog.Checkpoint, error) {
	b, err := c.get(ctx, "/log/checkpoint")
	if err != nil {
		return tlog.Checkpoint{}, err
	}
	cp, err := tlog.OpenCheckpoint(b, c.state.LogKey)
	if err != nil {
		return cp, fmt.Errorf("%w: the checkpoint does not verify with the log key %s: %w", errLogInvalid, c.state.LogKey, err)
	}
	if c.last != nil && cp.Size < c.last.Size {
		return cp, fmt.Errorf("%w: the log shrank: its checkpoint covers %d records, the one verified before %d", errLogInvalid, cp.Size, c.last.Size)
	}
	c.signed = b
	return cp, nil
}

// checkTree checks that the entries of tree (every record fetched) are
// the log cp signs, and that the checkpoint verified before is a prefix.
func (c *logClient) checkTree(tree *tlog.MemTree, cp tlog.Checkpoint) error {
	if tree.Size() < cp.Size {
		return fmt.Errorf("the checkpoint covers %d records, the server gave %d", cp.Size, tree.Size())
	}
	root, err := tree.Root(cp.Size)
	if err != nil {
		return err
	}
	if root != cp.Root {
		return fmt.Errorf("records 1 to %d are not the log the checkpoint signs (their root is %s, the checkpoint's %s)", cp.Size, root, cp.Root)
	}
	if c.last != nil {
		old, err := tree.Root(c.last.Size)
		if err != nil {
			return err
		}
		if old != c.last.Root {
			return fmt.Errorf("the log is not consistent with the checkpoint of %d records verified before: it was rewritten or forked", c.last.Size)
		}
	}
	return nil
}

// save remembers the key and the checkpoint verified now.
func (c *logClient) save() error {
	if c.file == "" || c.signed == nil {
		return nil
	}
	c.state.Checkpoint = string(c.signed)
	b, err := json.MarshalIndent(c.state, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.file), ".kith-log-state-*")
	if err != nil {
		return fmt.Errorf("save log state: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("save log state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save log state: %w", err)
	}
	if err := os.Rename(tmp.Name(), c.file); err != nil {
		return fmt.Errorf("save log state: %w", err)
	}
	return nil
}
