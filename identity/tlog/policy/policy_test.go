package policy_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/identity/tlog/policy"
)

func seed(b byte) []byte { return bytes.Repeat([]byte{b}, tlog.SeedSize) }

// fixture is a log and six witnesses, X1..X3 and Y1..Y3.
type fixture struct {
	log       *tlog.Key
	witnesses map[string]*tlog.Cosigner
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	k, err := tlog.NewKey("example.com/log", seed(1))
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{log: k, witnesses: map[string]*tlog.Cosigner{}}
	for i, n := range []string{"X1", "X2", "X3", "Y1", "Y2", "Y3"} {
		c, err := tlog.NewCosigner("w.example/"+n, seed(byte(10+i)))
		if err != nil {
			t.Fatal(err)
		}
		f.witnesses[n] = c
	}
	return f
}

// policy is the C2SP tlog-policy example: two of X and one of Y.
func (f fixture) policy(t *testing.T) *policy.Policy {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "# the spec's example\nlog %s https://example.com/log\n\n", f.log.VerifierKey())
	for _, n := range []string{"X1", "X2", "X3"} {
		fmt.Fprintf(&b, "witness %s %s https://w.example/%s\n", n, f.witnesses[n].VerifierKey(), n)
	}
	b.WriteString("group X-witnesses 2 X1 X2 X3\n")
	for _, n := range []string{"Y1", "Y2", "Y3"} {
		fmt.Fprintf(&b, "\t witness\t%s %s  \n", n, f.witnesses[n].VerifierKey())
	}
	b.WriteString("group Y-witnesses any Y1 Y2 Y3\ngroup X-and-Y all X-witnesses Y-witnesses\nquorum X-and-Y\n")
	p, err := policy.Parse([]byte(b.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	return p
}

func (f fixture) cosigned(t *testing.T, by ...string) []byte {
	t.Helper()
	signed, err := f.log.SignCheckpoint(tlog.Checkpoint{Origin: "example.com/log", Size: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range by {
		if signed, err = f.witnesses[n].Cosign(signed); err != nil {
			t.Fatal(err)
		}
	}
	return signed
}

func TestVerifyNeedsTheQuorum(t *testing.T) {
	f := newFixture(t)
	p := f.policy(t)
	if len(p.Logs) != 1 || p.Logs[0].URL != "https://example.com/log" || len(p.Witnesses) != 6 || p.Witnesses[0].URL != "https://w.example/X1" || p.Witnesses[3].URL != "" {
		t.Fatalf("parsed %+v", p)
	}
	for _, tc := range []struct {
		by []string
		ok bool
	}{
		{nil, false},
		{[]string{"X1", "X2"}, false},
		{[]string{"X1", "Y1"}, false},
		{[]string{"Y1", "Y2", "Y3"}, false},
		{[]string{"X1", "X3", "Y2"}, true},
		{[]string{"X1", "X2", "X3", "Y1", "Y2", "Y3"}, true},
	} {
		c, err := p.Verify(f.cosigned(t, tc.by...))
		if tc.ok != (err == nil) {
			t.Errorf("cosigned by %v: %v", tc.by, err)
		}
		if !tc.ok && !errors.Is(err, policy.ErrNoQuorum) {
			t.Errorf("cosigned by %v: %v does not wrap ErrNoQuorum", tc.by, err)
		}
		if tc.ok && c.Size != 3 {
			t.Errorf("cosigned by %v: checkpoint %+v", tc.by, c)
		}
	}
}

func TestVerifyRefusesAnotherLogAndABadCosignature(t *testing.T) {
	f := newFixture(t)
	p := f.policy(t)
	other, _ := tlog.NewKey("example.com/other", seed(2))
	signed, _ := other.SignCheckpoint(tlog.Checkpoint{Origin: "example.com/other", Size: 3})
	if _, err := p.Verify(signed); err == nil || errors.Is(err, policy.ErrNoQuorum) {
		t.Errorf("a checkpoint of a log not in the policy: %v", err)
	}
	// Same origin, another key.
	impostor, _ := tlog.NewKey("example.com/log", seed(3))
	signed, _ = impostor.SignCheckpoint(tlog.Checkpoint{Origin: "example.com/log", Size: 3})
	if _, err := p.Verify(signed); err == nil || errors.Is(err, policy.ErrNoQuorum) {
		t.Errorf("a checkpoint signed by another key: %v", err)
	}
	// X2's cosignature moved onto another checkpoint does not count.
	good := f.cosigned(t, "X1", "X2", "Y1")
	_, sigs, _ := tlog.SplitNote(good)
	moved, _ := f.log.SignCheckpoint(tlog.Checkpoint{Origin: "example.com/log", Size: 4})
	var x2 []byte
	for _, s := range sigs {
		if bytes.Contains(s, []byte("w.example/X2 ")) {
			x2 = s
		}
	}
	moved, _ = f.witnesses["X1"].Cosign(moved)
	moved, _ = f.witnesses["Y1"].Cosign(moved)
	moved = append(append(moved, x2...), '\n')
	if _, err := p.Verify(moved); !errors.Is(err, policy.ErrNoQuorum) {
		t.Errorf("a cosignature of another checkpoint counted: %v", err)
	}
}

func TestQuorumNoneAndSingleWitness(t *testing.T) {
	f := newFixture(t)
	p, err := policy.Parse([]byte("log " + f.log.VerifierKey() + "\nquorum none\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.NeedsCosignatures() {
		t.Error("quorum none needs cosignatures")
	}
	if _, err := p.Verify(f.cosigned(t)); err != nil {
		t.Errorf("quorum none: %v", err)
	}
	p, err = policy.Parse([]byte("witness a " + f.witnesses["X1"].VerifierKey() + "\nlog " + f.log.VerifierKey() + "\nquorum a\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Verify(f.cosigned(t, "X2")); !errors.Is(err, policy.ErrNoQuorum) {
		t.Errorf("quorum a, cosigned by another: %v", err)
	}
	if _, err := p.Verify(f.cosigned(t, "X1")); err != nil {
		t.Errorf("quorum a, cosigned by a: %v", err)
	}
}

func TestParseRefusesMalformedPolicies(t *testing.T) {
	f := newFixture(t)
	logLine := "log " + f.log.VerifierKey() + "\n"
	w := func(name, key string) string { return "witness " + name + " " + f.witnesses[key].VerifierKey() + "\n" }
	for name, text := range map[string]string{
		"no quorum":              logLine,
		"two quorums":            logLine + "quorum none\nquorum none\n",
		"quorum before witness":  "quorum a\n" + w("a", "X1"),
		"group before member":    "group g any a\n" + w("a", "X1") + "quorum g\n",
		"unknown keyword":        logLine + "quorom none\n",
		"duplicate witness name": w("a", "X1") + w("a", "X2") + "quorum a\n",
		"duplicate witness key":  w("a", "X1") + w("b", "X1") + "quorum a\n",
		"duplicate log":          logLine + logLine + "quorum none\n",
		"witness named none":     w("none", "X1") + "quorum none\n",
		"member twice":           w("a", "X1") + "group g any a a\nquorum g\n",
		"threshold zero":         w("a", "X1") + "group g 0 a\nquorum g\n",
		"threshold too big":      w("a", "X1") + "group g 2 a\nquorum g\n",
		"threshold leading zero": w("a", "X1") + "group g 01 a\nquorum g\n",
		"group without members":  w("a", "X1") + "group g any\nquorum g\n",
		"log key as witness":     "witness a " + f.log.VerifierKey() + "\nquorum a\n",
		"witness key as log":     "log " + f.witnesses["X1"].VerifierKey() + "\nquorum none\n",
		"control character":      logLine + "quorum none\r\n",
		"none as member":         w("a", "X1") + "group g any none\nquorum g\n",
	} {
		if _, err := policy.Parse([]byte(text)); err == nil {
			t.Errorf("%s: parsed:\n%s", name, text)
		}
	}
}
