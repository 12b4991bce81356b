// Package policy reads C2SP tlog-policy files (the format Sigsum's
// policy files grew into) and decides whether a checkpoint is signed by
// one of a policy's logs and cosigned by a quorum of its witnesses.
//
// A policy file lists logs ("log <vkey> [<url>]"), witnesses ("witness
// <name> <vkey> [<url>]"), groups of them ("group <name> all|any|<k>
// <name>...") and exactly one quorum ("quorum <name>", or "quorum none"
// for none). Witness keys are Ed25519 cosignature/v1 vkeys (signature
// type 0x04); log keys are Ed25519 note vkeys (0x01).
//
// What it does not own: the cosignature format (identity/tlog), asking
// witnesses to cosign or being one (identity/tlog/witness).
package policy

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/kith-keyserver/kith/identity/tlog"
)

// Limits on a policy's size: C2SP recommends supporting at least 32 of
// each; a policy is a hand-written file, so a larger one is a mistake.
const (
	MaxLogs      = 256
	MaxWitnesses = 256
	MaxGroups    = 256
)

// ErrNoQuorum marks a checkpoint that is validly signed by a log but
// lacks the cosignatures the policy's quorum needs.
var ErrNoQuorum = errors.New("checkpoint is not cosigned by the policy's quorum of witnesses")

// Log is a log a policy accepts.
type Log struct {
	// VerifierKey is the log's vkey; its name is the log's origin.
	VerifierKey string
	// URL is the log's URL, "" when the line gives none.
	URL string
	// Verifier verifies the log's checkpoint signatures.
	Verifier note.Verifier
}

// Origin returns the log's origin, its key's name.
func (l Log) Origin() string { return l.Verifier.Name() }

// Witness is a witness a policy names.
type Witness struct {
	// Name names the witness within the policy only.
	Name string
	// VerifierKey is the witness's cosignature vkey.
	VerifierKey string
	// URL is the witness's submission prefix, "" when the line gives
	// none.
	URL string
	// Verifier verifies its cosignatures.
	Verifier *tlog.CosignatureVerifier
}

// Policy is a parsed policy file.
type Policy struct {
	// Logs are the logs the policy accepts, in file order.
	Logs []Log
	// Witnesses are the witnesses it names, in file order.
	Witnesses []Witness
	// quorum is the rule; nil for "quorum none".
	quorum *member
}

// member is a witness (index >= 0) or a group of members.
type member struct {
	witness   int
	threshold int
	members   []*member
}

// satisfied reports whether the cosigners (by witness index) meet m.
func (m *member) satisfied(cosigned map[int]bool) bool {
	if m.witness >= 0 {
		return cosigned[m.witness]
	}
	n := 0
	for _, c := range m.members {
		if c.satisfied(cosigned) {
			n++
		}
	}
	return n >= m.threshold
}

// ReadFile reads and parses the policy file name.
func ReadFile(name string) (*Policy, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	p, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

// Parse parses a policy file.
func Parse(data []byte) (*Policy, error) {
	p := &Policy{}
	names := map[string]*member{}
	used := map[*member]bool{}
	keys := map[string]bool{} // type and public key, for duplicates
	quorumSeen := false
	groups := 0
	for i, line := range strings.Split(string(data), "\n") {
		lineNo := i + 1
		for _, c := range []byte(line) {
			if c < 0x20 && c != '\t' || c == 0x7f {
				return nil, fmt.Errorf("policy: line %d: control character 0x%02x", lineNo, c)
			}
		}
		fields := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' })
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		fail := func(format string, args ...any) error {
			return fmt.Errorf("policy: line %d: %s", lineNo, fmt.Sprintf(format, args...))
		}
		dupKey := func(vkey string) error {
			typ, pub, err := tlog.VerifierKeyPublicKey(vkey)
			if err != nil {
				return fail("%v", err)
			}
			k := string(append([]byte{typ}, pub...))
			if keys[k] {
				return fail("the key of %q is listed already", vkey)
			}
			keys[k] = true
			return nil
		}
		switch fields[0] {
		case "log":
			if len(fields) < 2 || len(fields) > 3 {
				return nil, fail("want log <vkey> [<url>]")
			}
			v, err := note.NewVerifier(fields[1])
			if err != nil {
				return nil, fail("log key %q: %v", fields[1], err)
			}
			if err := dupKey(fields[1]); err != nil {
				return nil, err
			}
			if len(p.Logs) == MaxLogs {
				return nil, fail("more than %d logs", MaxLogs)
			}
			l := Log{VerifierKey: fields[1], Verifier: v}
			if len(fields) == 3 {
				l.URL = fields[2]
			}
			p.Logs = append(p.Logs, l)
		case "witness":
			if len(fields) < 3 || len(fields) > 4 {
				return nil, fail("want witness <name> <vkey> [<url>]")
			}
			name := fields[1]
			if name == "none" || names[name] != nil {
				return nil, fail("the name %q is taken", name)
			}
			v, err := tlog.NewCosignatureVerifier(fields[2])
			if err != nil {
				return nil, fail("witness %s: %v", name, err)
			}
			if err := dupKey(fields[2]); err != nil {
				return nil, err
			}
			if len(p.Witnesses) == MaxWitnesses {
				return nil, fail("more than %d witnesses", MaxWitnesses)
			}
			w := Witness{Name: name, VerifierKey: fields[2], Verifier: v}
			if len(fields) == 4 {
				w.URL = fields[3]
			}
			names[name] = &member{witness: len(p.Witnesses)}
			p.Witnesses = append(p.Witnesses, w)
		case "group":
			if len(fields) < 4 {
				return nil, fail("want group <name> all|any|<k> <name>...")
			}
			name := fields[1]
			if name == "none" || names[name] != nil {
				return nil, fail("the name %q is taken", name)
			}
			if groups == MaxGroups {
				return nil, fail("more than %d groups", MaxGroups)
			}
			g := &member{witness: -1}
			seen := map[string]bool{}
			for _, n := range fields[3:] {
				m := names[n]
				if m == nil {
					return nil, fail("group %s: %q is not a witness or group defined above", name, n)
				}
				if seen[n] {
					return nil, fail("group %s: %q is listed twice", name, n)
				}
				seen[n] = true
				g.members = append(g.members, m)
				used[m] = true
			}
			switch k := fields[2]; k {
			case "all":
				g.threshold = len(g.members)
			case "any":
				g.threshold = 1
			default:
				t, err := strconv.Atoi(k)
				if err != nil || strconv.Itoa(t) != k || t < 1 || t > len(g.members) {
					return nil, fail("group %s: threshold %q is not all, any or a number from 1 to %d", name, k, len(g.members))
				}
				g.threshold = t
			}
			groups++
			names[name] = g
		case "quorum":
			if quorumSeen {
				return nil, fail("a second quorum line")
			}
			if len(fields) != 2 {
				return nil, fail("want quorum <name>")
			}
			quorumSeen = true
			if fields[1] == "none" {
				continue
			}
			m := names[fields[1]]
			if m == nil {
				return nil, fail("quorum %q is not a witness or group defined above", fields[1])
			}
			p.quorum = m
		default:
			return nil, fail("unknown keyword %q", fields[0])
		}
	}
	if !quorumSeen {
		return nil, errors.New("policy: no quorum line (write \"quorum none\" for a policy that needs no cosignatures)")
	}
	return p, nil
}

// NeedsCosignatures reports whether the quorum needs any cosignature
// (false for "quorum none").
func (p *Policy) NeedsCosignatures() bool { return p.quorum != nil }

// Log returns the policy's log of origin; false when it lists none.
func (p *Policy) Log(origin string) (Log, bool) {
	for _, l := range p.Logs {
		if l.Origin() == origin {
			return l, true
		}
	}
	return Log{}, false
}

// Cosigners returns the indexes (in Witnesses) of the witnesses with a
// valid cosignature on the signed note.
func (p *Policy) Cosigners(signed []byte) map[int]bool {
	out := map[int]bool{}
	for i, w := range p.Witnesses {
		if _, ok := w.Verifier.CosignedAt(signed); ok {
			out[i] = true
		}
	}
	return out
}

// Satisfied reports whether the witnesses cosigned (by index in
// Witnesses) meet the quorum.
func (p *Policy) Satisfied(cosigned map[int]bool) bool {
	return p.quorum == nil || p.quorum.satisfied(cosigned)
}

// Verify checks a signed checkpoint: signed by one of the policy's logs
// (the one whose key's name is the checkpoint's origin) and cosigned by
// the quorum. It returns the checkpoint; the error wraps ErrNoQuorum
// when only the cosignatures are lacking.
func (p *Policy) Verify(signed []byte) (tlog.Checkpoint, error) {
	text, _, ok := tlog.SplitNote(signed)
	if !ok {
		return tlog.Checkpoint{}, errors.New("policy: checkpoint is not a signed note")
	}
	origin, _, _ := bytes.Cut(text, []byte("\n"))
	l, ok := p.Log(string(origin))
	if !ok {
		return tlog.Checkpoint{}, fmt.Errorf("policy: the checkpoint's origin %q is not a log of the policy", origin)
	}
	c, err := tlog.OpenCheckpoint(signed, l.VerifierKey)
	if err != nil {
		return c, fmt.Errorf("policy: %w", err)
	}
	if err := p.VerifyCosignatures(signed); err != nil {
		return c, err
	}
	return c, nil
}

// VerifyCosignatures checks only that the quorum cosigned the signed
// note, for a checkpoint whose log signature was checked elsewhere; the
// error wraps ErrNoQuorum.
func (p *Policy) VerifyCosignatures(signed []byte) error {
	got := p.Cosigners(signed)
	if p.Satisfied(got) {
		return nil
	}
	var have []string
	for i, w := range p.Witnesses {
		if got[i] {
			have = append(have, w.Name)
		}
	}
	if len(have) == 0 {
		return fmt.Errorf("policy: %w (no witness of the policy cosigned it)", ErrNoQuorum)
	}
	return fmt.Errorf("policy: %w (cosigned by %s only)", ErrNoQuorum, strings.Join(have, ", "))
}
