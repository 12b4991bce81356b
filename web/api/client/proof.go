// proof.go: checking a lookup's proof bundle (?proof=1): its checkpoint
// against the log key (and a witness policy), its consistency with the
// checkpoint seen last, each record's signature, its inclusion proof, and
// that the records link each served key to the identity. O(log n) bytes,
// where walking the log's tiles costs kilobytes per level.

package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/web/api"
)

// ErrBadProof marks a proof bundle that does not hold: its checkpoint
// does not verify (or lacks the witnesses' quorum), is not consistent
// with the one seen before, or a record in it does not verify, is not in
// the log, or does not link the key it is given for. The server is then
// not to be believed about any key.
var ErrBadProof = errors.New("proof bundle does not hold")

// OpenCheckpoint verifies a signed checkpoint (the log's signature, and
// whatever else the caller requires, such as a witness quorum) and
// returns its body.
type OpenCheckpoint func(signed []byte) (tlog.Checkpoint, error)

// CheckedBundle is a proof bundle that held.
type CheckedBundle struct {
	// Bundle is the bundle as fetched.
	Bundle *api.ProofBundle
	// Checkpoint is its checkpoint, verified, and Signed the note.
	Checkpoint tlog.Checkpoint
	Signed     []byte
	// Proven are the served factors ("kind value", as identity.Factor's
	// String) that records in the log link to the identity.
	Proven map[string]bool
	// Pending are the served factors some of whose records are newer
	// than the checkpoint: not proven yet, not a lie either.
	Pending map[string]bool
}

// ProofBundle fetches path (a lookup: /users/{handle}.keys, .json,
// /hosts/{name}.known_hosts, ...) with ?proof=1, and with old=N when last
// is a checkpoint seen before. It returns the status and, on 200, the
// bundle unchecked (CheckBundle checks it).
func (c *Client) ProofBundle(ctx context.Context, path string, last *tlog.Checkpoint) (int, *api.ProofBundle, error) {
	q := url.Values{"proof": {"1"}}
	if last != nil {
		q.Set("old", fmt.Sprint(last.Size))
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	status, b, err := c.do(ctx, "GET", path+sep+q.Encode(), "", nil, maxDocBody)
	if err != nil || status != 200 {
		return status, nil, err
	}
	var pb api.ProofBundle
	if err := json.Unmarshal(b, &pb); err != nil {
		return status, nil, fmt.Errorf("%w: %s: not a proof bundle: %v", ErrBadProof, path, err)
	}
	return status, &pb, nil
}

// CheckBundle checks b, the bundle of an answer about handle h, or, h
// empty, of an answer by address (each key then names the address a
// record verifies for it, in b.Keys; the caller checks that it is the
// address asked): its checkpoint opens with open, is consistent with
// last (when not nil) by the bundle's consistency proof, and every
// record re-verifies, is included in the checkpoint by its tlog-proof,
// and, with the others given for the same factor, links that factor to
// h at now (verify.Justifies) or verifies its address. Any failure is
// ErrBadProof. A factor whose records are newer than the checkpoint is
// Pending, not proven.
func CheckBundle(b *api.ProofBundle, h identity.Handle, open OpenCheckpoint, last *tlog.Checkpoint, now time.Time) (*CheckedBundle, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadProof, fmt.Sprintf(format, args...))
	}
	signed := []byte(b.Checkpoint)
	cp, err := open(signed)
	if err != nil {
		return nil, bad("checkpoint: %v", err)
	}
	if last != nil {
		var hashes []xtlog.Hash
		for _, s := range b.Consistency {
			hb, err := base64.StdEncoding.DecodeString(s)
			if err != nil || len(hb) != xtlog.HashSize {
				return nil, bad("consistency proof: bad hash")
			}
			hashes = append(hashes, xtlog.Hash(hb))
		}
		if err := tlog.CheckConsistency(hashes, *last, cp); err != nil {
			return nil, bad("%v", err)
		}
	}
	records := map[int64]*identity.Evidence{}
	pending := map[int64]bool{}
	for _, pr := range b.Records {
		seq := pr.Record.Seq
		if records[seq] != nil || pending[seq] {
			return nil, bad("record %d given twice", seq)
		}
		e, err := pr.Record.Evidence()
		if err != nil {
			return nil, bad("record %d: %v", seq, err)
		}
		if pr.Proof == "" {
			if seq <= cp.Size {
				return nil, bad("record %d is in the checkpoint of %d records but comes without its proof", seq, cp.Size)
			}
			pending[seq] = true
			continue
		}
		if err := e.Reveal(pr.Artifacts); err != nil {
			return nil, bad("record %d: %v", seq, err)
		}
		if err := verify.Record(e); err != nil && !errors.Is(err, verify.ErrWithheld) {
			// A record whose proof is a private artifact (a mail
			// verification, the server's attestation whose statement
			// stays committed; a login's ID token, kept private) counts
			// as logged but unchecked, as kith verify-log counts it: its
			// inclusion is proven below, and its owner can open it.
			return nil, bad("record %d does not verify: %v", seq, err)
		}
		p, err := tlog.ParseProof([]byte(pr.Proof))
		if err != nil {
			return nil, bad("record %d: %v", seq, err)
		}
		if !bytes.Equal(p.Checkpoint, signed) {
			return nil, bad("record %d: its proof is against another checkpoint than the bundle's", seq)
		}
		if p.Index != seq-1 {
			return nil, bad("record %d: its proof is of entry %d, not %d", seq, p.Index, seq-1)
		}
		if err := p.Check(cp, e.ComputeHash()); err != nil {
			return nil, bad("record %d: %v", seq, err)
		}
		records[seq] = e
	}
	out := &CheckedBundle{Bundle: b, Checkpoint: cp, Signed: signed, Proven: map[string]bool{}, Pending: map[string]bool{}}
	for _, k := range b.Keys {
		f := identity.Factor{Kind: identity.FactorKind(k.Kind), Value: k.Value}
		var recs []*identity.Evidence
		wait := false
		for _, seq := range k.Records {
			switch {
			case records[seq] != nil:
				recs = append(recs, records[seq])
			case pending[seq]:
				wait = true
			default:
				return nil, bad("%s: record %d is named but not given", f, seq)
			}
		}
		if wait {
			out.Pending[f.String()] = true
			continue
		}
		switch {
		case h != "" && k.Address != "":
			// A mail verification links a key to an address, not to h.
			return nil, bad("%s: given for the address %s in an answer about %s", f, k.Address, h)
		case h == "" && k.Address == "":
			return nil, bad("%s: no address in an answer by address", f)
		}
		if k.Address != "" {
			if !verifiedFor(f, identity.EmailFactor(k.Address), recs, now) {
				return nil, bad("%s: no record in the bundle verifies %s for it", f, k.Address)
			}
			out.Proven[f.String()] = true
			continue
		}
		if err := verify.Justifies(h, f, recs, now); err != nil {
			return nil, bad("%s: its records do not link it to %s: %v", f, h, err)
		}
		out.Proven[f.String()] = true
	}
	return out, nil
}

// verifiedFor reports whether one of recs is a mail verification (not a
// withdrawal, not expired) of the address email for the OpenPGP key f,
// its commitment opened to email.
func verifiedFor(f, email identity.Factor, recs []*identity.Evidence, now time.Time) bool {
	for _, e := range recs {
		if e.Method == identity.MethodEmailVerified && e.Purpose == "" && e.From.Same(f) && e.To.Same(email) &&
			(e.Expires.IsZero() || e.Expires.After(now)) {
			return true
		}
	}
	return false
}
