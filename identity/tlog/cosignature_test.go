package tlog_test

import (
	"bytes"
	"crypto/ed25519"
	"strings"
	"testing"

	"filippo.io/torchwood"
	"golang.org/x/mod/sumdb/note"

	"github.com/kith-keyserver/kith/identity/tlog"
)

func seed(b byte) []byte { return bytes.Repeat([]byte{b}, tlog.SeedSize) }

func signedCheckpointNote(t *testing.T, size int64) []byte {
	t.Helper()
	k, err := tlog.NewKey("example.com/log", seed(1))
	if err != nil {
		t.Fatal(err)
	}
	signed, err := k.SignCheckpoint(tlog.Checkpoint{Origin: "example.com/log", Size: size})
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

// TestCosignatureInteropWithTorchwood checks Kith's cosignatures against
// another implementation of C2SP tlog-cosignature, both ways.
func TestCosignatureInteropWithTorchwood(t *testing.T) {
	signed := signedCheckpointNote(t, 7)

	// Theirs, verified by ours.
	theirs, err := torchwood.NewCosignatureSigner("w.example/theirs", ed25519.NewKeyFromSeed(seed(2)))
	if err != nil {
		t.Fatal(err)
	}
	text, _, _ := tlog.SplitNote(signed)
	n, err := note.Sign(&note.Note{Text: string(text)}, theirs)
	if err != nil {
		t.Fatal(err)
	}
	_, sigs, _ := tlog.SplitNote(n)
	ours, err := tlog.NewCosignatureVerifier(theirs.Verifier().String())
	if err != nil {
		t.Fatal(err)
	}
	merged, err := tlog.MergeSignatures(signed, append(sigs[0], '\n'), ours)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ours.CosignedAt(merged); !ok {
		t.Fatalf("torchwood's cosignature does not verify with Kith's verifier:\n%s", merged)
	}

	// Ours, verified by theirs.
	c, err := tlog.NewCosigner("w.example/ours", seed(3))
	if err != nil {
		t.Fatal(err)
	}
	cosigned, err := c.Cosign(signed)
	if err != nil {
		t.Fatal(err)
	}
	tw, err := torchwood.NewCosignatureSigner("w.example/ours", ed25519.NewKeyFromSeed(seed(3)))
	if err != nil {
		t.Fatal(err)
	}
	if tw.Verifier().String() != c.VerifierKey() {
		t.Fatalf("vkeys differ: torchwood %s, Kith %s", tw.Verifier().String(), c.VerifierKey())
	}
	if _, err := note.Open(cosigned, note.VerifierList(tw.Verifier())); err != nil {
		t.Fatalf("Kith's cosignature does not verify with torchwood's verifier: %v\n%s", err, cosigned)
	}
}

func TestMergeSignaturesKeepsOnlyValidCosignaturesOfKnownKeys(t *testing.T) {
	signed := signedCheckpointNote(t, 7)
	a, _ := tlog.NewCosigner("w.example/a", seed(4))
	b, _ := tlog.NewCosigner("w.example/b", seed(5))
	va, err := tlog.NewCosignatureVerifier(a.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	lineOf := func(c *tlog.Cosigner, note []byte) []byte {
		out, err := c.Cosign(note)
		if err != nil {
			t.Fatal(err)
		}
		_, sigs, _ := tlog.SplitNote(out)
		return append(sigs[len(sigs)-1], '\n')
	}
	other := signedCheckpointNote(t, 8)
	extra := append(lineOf(a, other), lineOf(b, signed)...) // a's is over another checkpoint, b is unknown
	merged, err := tlog.MergeSignatures(signed, extra, va)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(merged, signed) {
		t.Fatalf("merged lines it should have dropped:\n%s", merged)
	}
	merged, err = tlog.MergeSignatures(signed, lineOf(a, signed), va)
	if err != nil {
		t.Fatal(err)
	}
	again, err := tlog.MergeSignatures(merged, lineOf(a, signed), va)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(again), "— w.example/a "); n != 1 {
		t.Fatalf("a merged twice holds %d of a's cosignatures:\n%s", n, again)
	}
	if _, err := tlog.OpenCheckpoint(again, mustLogVkey(t)); err != nil {
		t.Fatalf("the log's signature no longer verifies: %v", err)
	}
}

func mustLogVkey(t *testing.T) string {
	k, err := tlog.NewKey("example.com/log", seed(1))
	if err != nil {
		t.Fatal(err)
	}
	return k.VerifierKey()
}

func TestNewCosignatureVerifierRefusesOtherKeyTypes(t *testing.T) {
	k, _ := tlog.NewKey("example.com/log", seed(1))
	if _, err := tlog.NewCosignatureVerifier(k.VerifierKey()); err == nil {
		t.Fatal("a note (0x01) vkey was taken as a cosignature key")
	}
	c, _ := tlog.NewCosigner("w.example/a", seed(4))
	vk := c.VerifierKey()
	if _, err := tlog.NewCosignatureVerifier(strings.Replace(vk, "w.example/a+", "w.example/b+", 1)); err == nil {
		t.Fatal("a vkey whose key ID does not match its name was taken")
	}
}
