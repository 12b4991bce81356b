// audit.go: re-verifying the evidence log offline, record by record: each
// record's signature against the key material it carries, what its
// statement says, and the hash chain, opening private records with the
// artifacts their owner gave. It trusts nothing the server says about its
// own records; LogMonitor.CheckTree then checks the records against the
// signed checkpoint.

package client

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/web/api"
)

// FindingKind says what a LogFinding is.
type FindingKind int

const (
	// Failed: the record does not verify.
	Failed FindingKind = iota
	// Erased: the record's artifact was erased; the record stays in the
	// chain, its proof can no longer be checked.
	Erased
	// Unchecked: what the record proves is in private artifacts; its
	// chain, inclusion and public packets are checked, the rest is not.
	Unchecked
)

// LogFinding is what the audit found about one record.
type LogFinding struct {
	Seq    int64
	Kind   FindingKind
	Reason string
}

// LogAudit checks log records one at a time, in log order. The zero
// value checks without artifacts.
type LogAudit struct {
	// Artifacts are the private artifacts to open records with, by
	// record sequence number.
	Artifacts map[int64][]identity.Artifact

	verifier verify.LogVerifier
	tree     tlog.MemTree
	failed   int
	revealed int
}

// Check verifies the next record and appends its entry to the tree. It
// returns what it found; a record with any Failed finding counts as
// failed.
func (a *LogAudit) Check(r api.LogRecord) []LogFinding {
	fail := func(reason string) []LogFinding {
		a.failed++
		return []LogFinding{{Seq: r.Seq, Kind: Failed, Reason: reason}}
	}
	e, err := r.Evidence()
	if err != nil {
		return fail(fmt.Sprintf("undecodable: %v", err))
	}
	if arts := a.Artifacts[e.Seq]; len(arts) > 0 {
		// The artifacts leave the hash alone: they only open the
		// record's commitments.
		if err := e.Reveal(arts); err != nil {
			return fail(err.Error())
		}
		a.revealed++
	}
	// The entry is the hash of what the record says, whatever hash it
	// claims: a changed record is not the entry the checkpoint signed.
	if err := a.tree.Append(e.ComputeHash()); err != nil {
		return fail(err.Error())
	}
	var out []LogFinding
	bad := false
	for _, f := range a.verifier.Add(e) {
		kind := Failed
		switch {
		case f.Erased:
			kind = Erased
		case f.Unchecked:
			kind = Unchecked
		default:
			bad = true
		}
		out = append(out, LogFinding{Seq: f.Seq, Kind: kind, Reason: f.Reason})
	}
	if bad {
		a.failed++
	}
	return out
}

// Failed is how many records failed.
func (a *LogAudit) Failed() int { return a.failed }

// Revealed is how many records were opened with their artifacts.
func (a *LogAudit) Revealed() int { return a.revealed }

// Verifier is the chain's verifier: its count, head and the records it
// could not check.
func (a *LogAudit) Verifier() *verify.LogVerifier { return &a.verifier }

// Tree is the Merkle tree of the records checked, for
// LogMonitor.CheckTree.
func (a *LogAudit) Tree() *tlog.MemTree { return &a.tree }

// ReadArtifacts reads an artifacts file: a JSON array of records'
// artifacts (identity.RecordArtifacts), as the account page's "Download
// my artifacts" gives them, by record sequence number.
func ReadArtifacts(name string) (map[int64][]identity.Artifact, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("artifacts: %w", err)
	}
	var recs []identity.RecordArtifacts
	if err := json.Unmarshal(b, &recs); err != nil {
		return nil, fmt.Errorf("artifacts %s: %w", name, err)
	}
	out := map[int64][]identity.Artifact{}
	for _, r := range recs {
		out[r.Seq] = append(out[r.Seq], r.Artifacts...)
	}
	return out, nil
}
