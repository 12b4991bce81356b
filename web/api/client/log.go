// log.go: the evidence log: its pages, and its signed checkpoints checked
// against a state file that remembers the log key (given, remembered or
// trusted on first use) and the last checkpoint verified, so that a
// rewritten, cut or forked log is caught on the next run, as the Go
// checksum database's client does.

package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/identity/tlog/policy"
	"github.com/kith-keyserver/kith/web/api"
)

// ErrLogInvalid marks a log that does not verify: a checkpoint that does
// not verify with the log key, a log that shrank or was rewritten.
var ErrLogInvalid = errors.New("evidence log does not verify")

// logPageSize is how many records Log asks for at a time.
const logPageSize = 1000

// Log pages through the server's evidence log from the first record,
// calling fn with each record in order.
func (c *Client) Log(ctx context.Context, fn func(api.LogRecord)) error {
	after := int64(0)
	for {
		b, err := c.get(ctx, fmt.Sprintf("/api/v1/log?after=%d&limit=%d", after, logPageSize), 64*maxDocBody)
		if err != nil {
			return fmt.Errorf("fetch log: %w", err)
		}
		var page api.LogPage
		if err := json.Unmarshal(b, &page); err != nil {
			return fmt.Errorf("fetch log after record %d: %w", after, err)
		}
		for _, r := range page.Records {
			fn(r)
			after = r.Seq
		}
		if len(page.Records) == 0 || page.Next == "" {
			return nil
		}
	}
}

// ReadLog reads log pages (answers of GET /api/v1/log, one after another)
// from r, calling fn with each record in order.
func ReadLog(r io.Reader, fn func(api.LogRecord)) error {
	dec := json.NewDecoder(r)
	for {
		var page api.LogPage
		err := dec.Decode(&page)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		for _, rec := range page.Records {
			fn(rec)
		}
	}
}

// LogKey fetches the server's log key (GET /log/key) and checks that its
// latest checkpoint (GET /log/checkpoint) verifies with it, the
// checkpoint's origin being the key's name. It returns the key and that
// checkpoint; a key that is not one, or that does not sign the
// checkpoint, is an error wrapping ErrLogInvalid. It shows only that the
// server's key and log agree, not that the key is the one the operator
// published: compare it with theirs out of band.
func (c *Client) LogKey(ctx context.Context) (string, tlog.Checkpoint, error) {
	b, err := c.get(ctx, "/log/key", maxSmallBody)
	if err != nil {
		return "", tlog.Checkpoint{}, err
	}
	key := strings.TrimSpace(string(b))
	if err := tlog.CheckVerifierKey(key); err != nil {
		return "", tlog.Checkpoint{}, fmt.Errorf("%w: /log/key serves no log key: %w", ErrLogInvalid, err)
	}
	signed, err := c.get(ctx, "/log/checkpoint", maxSmallBody)
	if err != nil {
		return "", tlog.Checkpoint{}, fmt.Errorf("cannot check the log key against the log: %w", err)
	}
	cp, err := tlog.OpenCheckpoint(signed, key)
	if err != nil {
		return "", cp, fmt.Errorf("%w: the server's checkpoint does not verify with the key /log/key serves (%s): %w", ErrLogInvalid, key, err)
	}
	return key, cp, nil
}

// logState is what a state file keeps.
type logState struct {
	// LogKey is the verifier key every checkpoint must verify with.
	LogKey string `json:"log_key"`
	// Checkpoint is the last signed checkpoint verified.
	Checkpoint string `json:"checkpoint,omitempty"`
}

// LogMonitor checks a server's checkpoints against what it saw before.
// Make one with Client.Monitor.
type LogMonitor struct {
	c      *Client
	file   string
	state  logState
	last   *tlog.Checkpoint // the state's checkpoint, verified
	signed []byte           // the checkpoint fetched now
	// TrustedOnFirstUse is set when the log key came from the server.
	TrustedOnFirstUse bool
	// Policy, when set, is a witness policy whose quorum must have
	// cosigned every checkpoint Checkpoint accepts.
	Policy *policy.Policy
}

// Monitor loads the state file (when given and present) and settles the
// log key: key when given (it must match the state's), else the state's,
// else the server's, which it then trusts from here on.
func (c *Client) Monitor(ctx context.Context, file, key string) (*LogMonitor, error) {
	m := &LogMonitor{c: c, file: file}
	if file != "" {
		b, err := os.ReadFile(file)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("log state: %w", err)
		default:
			if err := json.Unmarshal(b, &m.state); err != nil || m.state.LogKey == "" {
				return nil, fmt.Errorf("log state %s is not a state file this command wrote", file)
			}
		}
	}
	key = strings.TrimSpace(key)
	switch {
	case key != "" && m.state.LogKey != "" && key != m.state.LogKey:
		return nil, fmt.Errorf("%w: the log key %s is not the key %s remembered in %s", ErrLogInvalid, key, m.state.LogKey, file)
	case key != "":
		m.state.LogKey = key
	case m.state.LogKey == "":
		b, err := c.get(ctx, "/log/key", maxSmallBody)
		if err != nil {
			return nil, err
		}
		m.state.LogKey = strings.TrimSpace(string(b))
		m.TrustedOnFirstUse = true
	}
	if err := tlog.CheckVerifierKey(m.state.LogKey); err != nil {
		return nil, err
	}
	if m.state.Checkpoint != "" {
		last, err := tlog.OpenCheckpoint([]byte(m.state.Checkpoint), m.state.LogKey)
		if err != nil {
			return nil, fmt.Errorf("log state %s: %w", file, err)
		}
		m.last = &last
	}
	return m, nil
}

// Key is the log key checkpoints are verified with.
func (m *LogMonitor) Key() string { return m.state.LogKey }

// Checkpoint fetches the server's checkpoint and verifies its signature,
// and that it is no smaller than the one verified before.
func (m *LogMonitor) Checkpoint(ctx context.Context) (tlog.Checkpoint, error) {
	b, err := m.c.get(ctx, "/log/checkpoint", maxSmallBody)
	if err != nil {
		return tlog.Checkpoint{}, err
	}
	cp, err := tlog.OpenCheckpoint(b, m.state.LogKey)
	if err != nil {
		return cp, fmt.Errorf("%w: the checkpoint does not verify with the log key %s: %w", ErrLogInvalid, m.state.LogKey, err)
	}
	if m.Policy != nil {
		if err := m.Policy.VerifyCosignatures(b); err != nil {
			return cp, fmt.Errorf("%w: the checkpoint of %d records: %w", ErrLogInvalid, cp.Size, err)
		}
	}
	if m.last != nil && cp.Size < m.last.Size {
		return cp, fmt.Errorf("%w: the log shrank: its checkpoint covers %d records, the one verified before %d", ErrLogInvalid, cp.Size, m.last.Size)
	}
	m.signed = b
	return cp, nil
}

// CheckTree checks that the entries of tree (every record fetched) are
// the log cp signs, and that the checkpoint verified before is a prefix.
func (m *LogMonitor) CheckTree(tree *tlog.MemTree, cp tlog.Checkpoint) error {
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
	if m.last != nil {
		old, err := tree.Root(m.last.Size)
		if err != nil {
			return err
		}
		if old != m.last.Root {
			return fmt.Errorf("the log is not consistent with the checkpoint of %d records verified before: it was rewritten or forked", m.last.Size)
		}
	}
	return nil
}

// Save remembers the key and the checkpoint fetched last in the state
// file (none: nothing to do).
func (m *LogMonitor) Save() error {
	if m.file == "" || m.signed == nil {
		return nil
	}
	m.state.Checkpoint = string(m.signed)
	b, err := json.MarshalIndent(m.state, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(m.file), ".kith-log-state-*")
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
	if err := os.Rename(tmp.Name(), m.file); err != nil {
		return fmt.Errorf("save log state: %w", err)
	}
	return nil
}
