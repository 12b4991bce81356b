// monitor.go: following the log for the records that touch what a person
// cares about (their handle, addresses, OpenPGP keys and SSH keys), as
// `kith monitor` does from cron. Records are fetched from /api/v1/log and
// each is checked to be the log's entry against the leaf hashes of the
// tiles, which are checked against the signed checkpoint; so a record the
// server hides from monitors but shows in the tree (or the reverse) is a
// log inconsistency, not a silent gap.

package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/ssh"
	"github.com/kith-keyserver/kith/web/api"
)

// tiles fetches the log's tiles and checkpoints for tlog's proofs.
func (c *Client) tiles(ctx context.Context, path string) ([]byte, error) {
	return c.get(ctx, "/log/"+path, maxSmallBody)
}

// FollowLog calls fn with each record after the checkpoint last (from
// the first record when nil) up to cp, in order, after checking that cp
// is consistent with last and that each record is the log's entry (its
// hash is the leaf the tiles hold). Any mismatch is an ErrLogInvalid.
func (c *Client) FollowLog(ctx context.Context, last *tlog.Checkpoint, cp tlog.Checkpoint, fn func(*identity.Evidence) error) error {
	start := int64(0)
	if last != nil {
		if err := tlog.ProveConsistency(ctx, c.tiles, *last, cp); err != nil {
			return fmt.Errorf("%w: %w", ErrLogInvalid, err)
		}
		start = last.Size
	}
	for start < cp.Size {
		end := min(cp.Size, start+logPageSize)
		b, err := c.get(ctx, fmt.Sprintf("/api/v1/log?after=%d&limit=%d", start, end-start), 64*maxDocBody)
		if err != nil {
			return fmt.Errorf("fetch log: %w", err)
		}
		var page api.LogPage
		if err := json.Unmarshal(b, &page); err != nil {
			return fmt.Errorf("fetch log after record %d: %w", start, err)
		}
		if int64(len(page.Records)) != end-start {
			return fmt.Errorf("%w: the checkpoint covers records %d to %d, the server gave %d of them", ErrLogInvalid, start+1, end, len(page.Records))
		}
		leaves, err := tlog.LeafHashes(ctx, c.tiles, cp, start, end)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrLogInvalid, err)
		}
		for i, r := range page.Records {
			seq := start + int64(i) + 1
			if r.Seq != seq {
				return fmt.Errorf("%w: record %d came in place of record %d", ErrLogInvalid, r.Seq, seq)
			}
			e, err := r.Evidence()
			if err != nil {
				return fmt.Errorf("%w: record %d: %w", ErrLogInvalid, seq, err)
			}
			if tlog.LeafHash(e.ComputeHash()) != leaves[i] {
				return fmt.Errorf("%w: record %d as /api/v1/log serves it is not the log's entry %d", ErrLogInvalid, seq, seq-1)
			}
			if err := fn(e); err != nil {
				return err
			}
		}
		start = end
	}
	return nil
}

// Term is what a monitor watches: a handle, an address, an OpenPGP
// fingerprint or an SSH SHA256 fingerprint.
type Term struct {
	// Arg is the term as given.
	Arg string
	// Handle is set for a handle; Factor for the others.
	Handle identity.Handle
	Factor identity.Factor
}

// ParseTerm reads a term: SHA256:... is an SSH key, a word with an @ an
// address, 40 or 64 hex digits an OpenPGP key, anything else a handle.
func ParseTerm(s string) (Term, error) {
	switch {
	case strings.HasPrefix(s, "SHA256:"):
		fp, err := ssh.ParseFingerprint(s)
		if err != nil {
			return Term{}, fmt.Errorf("%q: %w", s, err)
		}
		return Term{Arg: s, Factor: identity.Factor{Kind: identity.KindSSH, Value: fp.String()}}, nil
	case strings.Contains(s, "@"):
		f := identity.EmailFactor(s)
		if err := f.Validate(); err != nil {
			return Term{}, fmt.Errorf("%q: %w", s, err)
		}
		return Term{Arg: s, Factor: f}, nil
	}
	if f, err := identity.ParsePGPFingerprint(s); err == nil {
		return Term{Arg: s, Factor: f}, nil
	}
	h, err := identity.ParseHandle(identity.FoldHandle(s))
	if err != nil {
		return Term{}, fmt.Errorf("%q is no handle, address, OpenPGP fingerprint or SSH SHA256 fingerprint: %w", s, err)
	}
	return Term{Arg: s, Handle: h}, nil
}

// Watch is what one monitor run looks for, expanded from its terms at
// the server: a handle's factors and addresses (its identity document),
// and the OpenPGP keys that carry an address (an HKP search by the
// address). Make one with Client.Watch.
type Watch struct {
	handles map[identity.Handle]string // handle: the term
	factors map[string]match           // "kind value": why
}

type match struct{ term, why string }

// Watch expands terms at the server, as it answers now.
func (c *Client) Watch(ctx context.Context, terms []Term) (*Watch, error) {
	w := &Watch{handles: map[identity.Handle]string{}, factors: map[string]match{}}
	var addresses []match // address, term
	for _, t := range terms {
		switch {
		case t.Handle != "":
			w.handles[t.Handle] = t.Arg
			status, b, err := c.do(ctx, http.MethodGet, "/users/"+url.PathEscape(string(t.Handle))+".json", "", nil, maxDocBody)
			if err != nil {
				return nil, fmt.Errorf("fetch %s's identity: %w", t.Handle, err)
			}
			if status == http.StatusNotFound {
				continue // not claimed (yet): its records name it all the same
			}
			if status != http.StatusOK {
				return nil, fmt.Errorf("fetch %s's identity: %d %s", t.Handle, status, http.StatusText(status))
			}
			var doc api.IdentityDoc
			if err := json.Unmarshal(b, &doc); err != nil {
				return nil, fmt.Errorf("%s's identity: %w", t.Handle, err)
			}
			for _, f := range doc.Factors {
				if f.Kind == string(identity.KindEmail) {
					addresses = append(addresses, match{f.Value, t.Arg})
					continue
				}
				w.factors[f.Kind+" "+f.Value] = match{t.Arg, fmt.Sprintf("%s of %s", f.Kind, t.Handle)}
			}
		case t.Factor.Kind == identity.KindEmail:
			addresses = append(addresses, match{t.Factor.Value, t.Arg})
		default:
			w.factors[t.Factor.String()] = match{t.Arg, string(t.Factor.Kind) + " key"}
		}
	}
	for _, a := range addresses {
		fps, err := c.keysNaming(ctx, a.term)
		if err != nil {
			return nil, err
		}
		for _, fp := range fps {
			k := string(identity.KindPGP) + " " + fp
			if _, ok := w.factors[k]; !ok {
				w.factors[k] = match{a.why, fmt.Sprintf("key %s carries %s", fp, a.term)}
			}
		}
	}
	return w, nil
}

// keysNaming returns the fingerprints of the keys whose user IDs name
// addr, by an HKP index search (none when the server has none).
func (c *Client) keysNaming(ctx context.Context, addr string) ([]string, error) {
	q := url.Values{"op": {"index"}, "options": {"mr"}, "search": {addr}}
	status, b, err := c.do(ctx, http.MethodGet, "/pks/lookup?"+q.Encode(), "", nil, maxDocBody)
	if err != nil {
		return nil, fmt.Errorf("search keys naming %s: %w", addr, err)
	}
	if status == http.StatusNotFound {
		return nil, nil
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("search keys naming %s: %d %s", addr, status, http.StatusText(status))
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) > 1 && fields[0] == "pub" {
			if f, err := identity.ParsePGPFingerprint(fields[1]); err == nil {
				out = append(out, f.Value)
			}
		}
	}
	return out, nil
}

// Event is one record that touches a watched term.
type Event struct {
	Seq     int64  `json:"seq"`
	Created string `json:"created"`
	// Kind is link, revocation, deletion, certificate, withdrawal or
	// record (anything else).
	Kind    string `json:"event"`
	Method  string `json:"method"`
	Purpose string `json:"purpose,omitempty"`
	Handle  string `json:"handle,omitempty"`
	From    string `json:"from"`
	To      string `json:"to,omitempty"`
	// Term is the term as given; Why, how the record touches it.
	Term string `json:"term"`
	Why  string `json:"why"`
}

// Match returns the event of e, and false if e touches no term.
func (w *Watch) Match(e *identity.Evidence) (Event, bool) {
	var m match
	var ok bool
	if t, hit := w.handles[e.Handle]; hit && e.Handle != "" {
		m, ok = match{t, "names handle " + string(e.Handle)}, true
	}
	for _, f := range []identity.Factor{e.From, e.To} {
		if ok || f.IsZero() {
			continue
		}
		m, ok = w.factors[f.String()]
	}
	if !ok {
		return Event{}, false
	}
	ev := Event{Seq: e.Seq, Created: e.Created.UTC().Format("2006-01-02T15:04:05Z"), Kind: eventKind(e),
		Method: string(e.Method), Purpose: string(e.Purpose), Handle: string(e.Handle), From: e.From.String(),
		Term: m.term, Why: m.why}
	if !e.To.IsZero() {
		ev.To = e.To.String()
		if e.To.Kind == identity.KindEmail && e.To.Value == "" {
			ev.To = "email (committed)"
		}
	}
	return ev, true
}

func eventKind(e *identity.Evidence) string {
	switch {
	case e.Method == identity.MethodRevocation && (e.Purpose == identity.PurposeDelete || e.Purpose == identity.PurposeDeleteKey):
		return "deletion"
	case e.Method == identity.MethodRevocation, e.Method == identity.MethodHostRelease:
		return "revocation"
	case e.Method == identity.MethodSSHCertificate:
		return "certificate"
	case e.Purpose == identity.PurposeRevoke:
		return "withdrawal"
	case e.Method.IsChallenge() || e.Method.KeyCarried() || e.Method == identity.MethodEmailVerified ||
		e.Method == identity.MethodOIDCEmailVerified:
		return "link"
	}
	return "record"
}

// String is the event as one line of text.
func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s record %d %s %s", e.Created, e.Seq, e.Kind, e.Method)
	if e.Purpose != "" {
		fmt.Fprintf(&b, " (%s)", e.Purpose)
	}
	if e.Handle != "" {
		fmt.Fprintf(&b, " handle %s", e.Handle)
	}
	fmt.Fprintf(&b, " from %s", e.From)
	if e.To != "" {
		fmt.Fprintf(&b, " to %s", e.To)
	}
	fmt.Fprintf(&b, ": %s [%s]", e.Why, e.Term)
	return b.String()
}

// errNoCheckpoint is returned by Signed before a checkpoint is fetched.
var errNoCheckpoint = errors.New("no checkpoint fetched")

// Last returns the checkpoint the state file remembers, nil if none.
func (m *LogMonitor) Last() *tlog.Checkpoint { return m.last }

// Signed returns the signed checkpoint Checkpoint fetched.
func (m *LogMonitor) Signed() ([]byte, error) {
	if m.signed == nil {
		return nil, errNoCheckpoint
	}
	return m.signed, nil
}
