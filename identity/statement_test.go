package identity

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func testSSHFactor() Factor {
	blob := append([]byte{0, 0, 0, 11}, "ssh-ed25519"...)
	blob = append(blob, 0, 0, 0, 32)
	blob = append(blob, bytes.Repeat([]byte{7}, 32)...)
	return SSHFactor("SHA256:"+strings.Repeat("A", 43), blob)
}

func TestStatementParsesBackAsIssued(t *testing.T) {
	pgpF, _ := ParsePGPFingerprint(strings.Repeat("ab", 20))
	for _, f := range []Factor{testSSHFactor(), pgpF} {
		c, err := NewChallenge("Kith <https://k.example>", PurposeAdd, "alice", f, bytes.Repeat([]byte{1}, 32), time.Unix(1700000000, 5))
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range [][]byte{c.Statement, bytes.TrimSuffix(c.Statement, []byte("\n")), bytes.ReplaceAll(c.Statement, []byte("\n"), []byte("\r\n"))} {
			got, err := ParseStatement(text)
			if err != nil {
				t.Fatalf("%s: %v", f.Kind, err)
			}
			if !got.Factor.Same(f) || !bytes.Equal(got.Factor.Data, f.Data) || got.Handle != "alice" || !bytes.Equal(got.Nonce, c.Nonce) ||
				!got.Expires.Equal(c.Issued.Add(ChallengeTTL)) || got.Server != c.Server || got.Purpose != PurposeAdd {
				t.Fatalf("%s: parsed %+v, issued %+v", f.Kind, got, c)
			}
		}
	}
}

func TestParseStatementRefusesChangedText(t *testing.T) {
	c, err := NewChallenge("Kith", PurposeClaim, "alice", testSSHFactor(), bytes.Repeat([]byte{1}, 32), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s := string(c.Statement)
	for name, text := range map[string]string{
		"extra line":    strings.Replace(s, "handle: alice\n", "handle: alice\nnote: x\n", 1),
		"other wording": strings.Replace(s, "I hold this key", "I hold a key", 1),
		"no nonce":      strings.Replace(s, "nonce: ", "nonse: ", 1),
		"not one":       "hello",
	} {
		if _, err := ParseStatement([]byte(text)); !errors.Is(err, ErrBadStatement) {
			t.Errorf("%s: %v, want ErrBadStatement", name, err)
		}
	}
}

func TestKeyDeletionStatementNamesNoHandle(t *testing.T) {
	f, _ := ParsePGPFingerprint(strings.Repeat("cd", 20))
	c, err := NewChallenge("Kith <https://k.example>", PurposeDeleteKey, "", f, bytes.Repeat([]byte{2}, 32), time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(c.Statement, []byte("handle:")) || !bytes.Contains(c.Statement, []byte("delete it")) {
		t.Fatalf("deletion statement:\n%s", c.Statement)
	}
	got, err := ParseStatement(c.Statement)
	if err != nil || got.Purpose != PurposeDeleteKey || got.Handle != "" || !got.Factor.Same(f) {
		t.Fatalf("parsed %+v, %v", got, err)
	}
	// A handle slipped into a deletion statement is not Kith's form.
	withHandle := bytes.Replace(c.Statement, []byte("factor:"), []byte("handle: alice\nfactor:"), 1)
	if _, err := ParseStatement(withHandle); !errors.Is(err, ErrBadStatement) {
		t.Fatalf("deletion statement with a handle: %v", err)
	}
	// The deletion purpose is not one IssueChallenge takes.
	if PurposeDeleteKey.Valid() {
		t.Fatal("delete-key is a valid link purpose")
	}
}
