package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
)

// lyingCertification is a v4 third-party certification whose RSA MPI
// claims 48,410 bits and carries 64 bytes (issue 17's poison).
func lyingCertification() []byte {
	b := []byte{4, 0x10, 1, 8, 0, 6, 5, 2, 0x5e, 0x0b, 0xe1, 0x00, 0, 10, 9, 16, 1, 2, 3, 4, 5, 6, 7, 8, 0xab, 0xcd}
	b = binary.BigEndian.AppendUint16(b, 48410)
	return append(b, bytes.Repeat([]byte{0x5a}, 64)...)
}

// withPoison returns k's packets with the lying certification after its
// first user ID.
func withPoison(k *pgp.Key) []pgp.Packet {
	ps := k.Packets()
	i := slices.IndexFunc(ps, func(p pgp.Packet) bool { return p.Tag == pgp.TagUserID })
	return slices.Concat(ps[:i+1], []pgp.Packet{{Tag: pgp.TagSignature, Body: lyingCertification()}}, ps[i+1:])
}

// gpgReads reports whether gpg --show-keys reads data and lists exactly
// the fingerprints want, in any order.
func gpgReads(t *testing.T, gpg string, data []byte, want ...string) (bool, string) {
	t.Helper()
	home := t.TempDir()
	os.Chmod(home, 0o700)
	file := filepath.Join(home, "k.pgp")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gpg, "--homedir", home, "--batch", "--with-colons", "--show-keys", file)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var fprs []string
	lines := strings.Split(out.String(), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "pub:") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "fpr:") {
			fprs = append(fprs, strings.Split(lines[i+1], ":")[9])
		}
	}
	slices.Sort(fprs)
	want = slices.Sorted(slices.Values(want))
	return err == nil && slices.Equal(fprs, want), errb.String() + "listed: " + strings.Join(fprs, " ")
}

func hexFP(k *pgp.Key) string { return strings.ToUpper(hex.EncodeToString(k.Fingerprint())) }

// TestRepairDropsStoredPoisonAndDumpSkipsIt stores a poisoned key past the
// policy (AddKeys stores a new key's packets as given), shows that dump
// leaves it out and repair rewrites it through the normal write path, with
// a change notification, after which gpg reads it and dump includes it.
func TestRepairDropsStoredPoisonAndDumpSkipsIt(t *testing.T) {
	gpg := testkit.Tool(t, "gpg")
	ks := debianKeys(t)[:3]
	clean, poisoned, unsigned := ks[0], ks[1], ks[2]
	url := pgtest.NewDatabase(t)
	s := openTestStore(t, url)
	ctx := context.Background()

	// The third key keeps only its primary and one user ID: the policy
	// rejects it as a whole.
	ps := unsigned.Packets()
	uid := slices.IndexFunc(ps, func(p pgp.Packet) bool { return p.Tag == pgp.TagUserID })
	if _, err := s.AddKeys(ctx, []*pgp.Key{clean, pgp.NewKey(withPoison(poisoned)), pgp.NewKey([]pgp.Packet{ps[0], ps[uid]})}); err != nil {
		t.Fatal(err)
	}
	stored := func(k *pgp.Key) keys.Stored {
		t.Helper()
		got, _, err := s.FindKeys(ctx, keys.Query{Fingerprint: k.Fingerprint(), Limit: 1})
		if err != nil || len(got) != 1 {
			t.Fatalf("find %s: %v (%d keys)", hexFP(k), err, len(got))
		}
		return got[0]
	}
	before := stored(poisoned)
	if ok, _ := gpgReads(t, gpg, before.Packets, hexFP(poisoned)); ok {
		t.Fatal("gpg reads the poisoned stored key: the test no longer stores the poison")
	}

	// Dump leaves out the key gpg cannot read.
	dir := t.TempDir()
	out, errOut, err := runKith(t, "dump", "--database-url", url, "--dir", dir)
	if err != nil {
		t.Fatalf("dump: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "dumped 2 keys") || !strings.Contains(out, "skipped 1 keys that are not well formed (malformed: 1)") {
		t.Fatalf("dump said %q", out)
	}
	dumped, _ := os.ReadFile(filepath.Join(dir, "sks-dump-0000.pgp"))
	if ok, stderr := gpgReads(t, gpg, dumped, hexFP(clean), hexFP(unsigned)); !ok {
		t.Fatalf("gpg cannot read the dump:\n%s", stderr)
	}

	// Repair rewrites the poisoned key, and notifies like any change.
	changes := make(chan keys.DigestChange, 16)
	ready := make(chan struct{})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.WatchKeyChanges(wctx, ready, func(c keys.DigestChange) { changes <- c })
	<-ready
	out, errOut, err = runKith(t, "repair", "--database-url", url)
	if err != nil {
		t.Fatalf("repair: %v\n%s", err, errOut)
	}
	t.Logf("repair: %s", out)
	for _, want := range []string{"checked 3 keys", "repaired 1, 1 unchanged, 1 rejected by the policy",
		"packets dropped: malformed-signature=1", "rejected, no valid self-signature: 1: " + hexFP(unsigned), "no path to delete"} {
		if !strings.Contains(out, want) {
			t.Errorf("repair output lacks %q:\n%s", want, out)
		}
	}
	select {
	case c := <-changes:
		if c.Old != before.Digest || c.New != poisoned.Digest() || !bytes.Equal(c.Fingerprint, poisoned.Fingerprint()) {
			t.Errorf("notification %x -> %x for %X, want %x -> %x for %s", c.Old, c.New, c.Fingerprint, before.Digest, poisoned.Digest(), hexFP(poisoned))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no key change notification after repair")
	}
	after := stored(poisoned)
	if after.Digest != poisoned.Digest() || !bytes.Equal(after.Packets, poisoned.Bytes()) {
		t.Errorf("repaired key is not the clean key")
	}
	if ok, stderr := gpgReads(t, gpg, after.Packets, hexFP(poisoned)); !ok {
		t.Errorf("gpg cannot read the repaired key:\n%s", stderr)
	}
	if ds := digestsOf(t, s); slices.Contains(ds, pgp.FormatDigest(before.Digest)) || !slices.Contains(ds, poisoned.DigestHex()) {
		t.Errorf("digests after repair: %v", ds)
	}

	// A second repair changes nothing; a new dump holds every readable key.
	out, _, err = runKith(t, "repair", "--database-url", url)
	if err != nil || !strings.Contains(out, "repaired 0, 2 unchanged") {
		t.Errorf("second repair: %v %q", err, out)
	}
	dir2 := t.TempDir()
	if out, _, err := runKith(t, "dump", "--database-url", url, "--dir", dir2); err != nil || !strings.Contains(out, "dumped 3 keys") || strings.Contains(out, "skipped") {
		t.Fatalf("dump after repair: %v %q", err, out)
	}
	dumped, _ = os.ReadFile(filepath.Join(dir2, "sks-dump-0000.pgp"))
	if ok, stderr := gpgReads(t, gpg, dumped, hexFP(clean), hexFP(poisoned), hexFP(unsigned)); !ok {
		t.Errorf("gpg cannot read the dump after repair:\n%s", stderr)
	}
}
