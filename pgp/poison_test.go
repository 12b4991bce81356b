package pgp

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity/testkit"
)

// gpgShow runs `gpg --show-keys` over data in a fresh GNUPGHOME and returns
// the primary fingerprints it lists, in order, and its error output. A
// non-nil error means gpg failed (it could not read everything).
func gpgShow(t testing.TB, gpg string, data []byte) (fprs []string, stderr string, err error) {
	t.Helper()
	home := t.TempDir()
	if err := os.Chmod(home, 0o700); err != nil { // gpg warns about others' access
		t.Fatal(err)
	}
	file := filepath.Join(home, "keys.pgp")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gpg, "--homedir", home, "--batch", "--no-auto-check-trustdb", "--with-colons", "--show-keys", file)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	lines := strings.Split(out.String(), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "pub:") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "fpr:") {
			fprs = append(fprs, strings.Split(lines[i+1], ":")[9])
		}
	}
	return fprs, errb.String(), err
}

// lyingRSACertification is a v4 generic certification by an RSA key whose
// signature MPI claims 48,410 bits but carries 64 bytes: the poison packet
// that made gpg stop reading a key Kith served.
func lyingRSACertification() []byte {
	b := []byte{4, sigTypeGenericCert, 1, 8} // v4, generic certification, RSA, SHA2-256
	b = append(b, 0, 6, 5, subpacketCreationTime, 0x5e, 0x0b, 0xe1, 0x00)
	b = append(b, 0, 10, 9, subpacketIssuer, 1, 2, 3, 4, 5, 6, 7, 8)
	b = append(b, 0xab, 0xcd) // hash prefix
	b = binary.BigEndian.AppendUint16(b, 48410)
	b = append(b, bytes.Repeat([]byte{0x5a}, 64)...)
	return b
}

// debianSample returns n keys spread over the Debian keyring (every
// len/n-th, from the first), after the policy.
func debianSample(t testing.TB, n int) []*Key {
	t.Helper()
	all, err := ReadKeys(bytes.NewReader(testkit.File(t, testkit.DebianKeyring)))
	if err != nil {
		t.Fatalf("reading the Debian keyring: %v", err)
	}
	if n > len(all) {
		n = len(all)
	}
	keys := make([]*Key, 0, n)
	for i := 0; i < n; i++ {
		k := all[i*len(all)/n]
		out, _, err := Policy{}.Apply(k)
		if err != nil {
			t.Fatalf("Debian key %X: %v", k.Fingerprint(), err)
		}
		keys = append(keys, out)
	}
	return keys
}

// TestPoisonCertificationIsNotStoredOrServed is the attack of issue 17: a
// real key uploaded again with one third-party certification whose MPI
// lies about its length. Kith must neither keep it (Apply) nor merge it
// into the stored key (Merge), and gpg must read what Kith would serve.
func TestPoisonCertificationIsNotStoredOrServed(t *testing.T) {
	stored := debianSample(t, 1)[0]
	poison := Packet{Tag: TagSignature, Body: lyingRSACertification()}
	upload := NewKey(insertAfter(stored.Packets(), isTag(TagUserID), poison))

	applied, rep, err := Policy{}.Apply(upload)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Count(DropMalformedSignature) != 1 {
		t.Errorf("report %v, want the lying certification dropped as malformed", rep)
	}
	if !bytes.Equal(applied.Bytes(), stored.Bytes()) {
		t.Error("Apply kept the lying certification")
	}
	merged, mrep, err := Policy{}.Merge(stored, upload)
	if err != nil {
		t.Fatal(err)
	}
	if merged.Digest() != stored.Digest() || mrep.Count(DropMalformedSignature) != 1 {
		t.Errorf("Merge changed the stored key (report %v): it would answer 1 updated", mrep)
	}
	// A store that already holds the poison is cleaned by the next merge.
	cleaned, _, err := Policy{}.Merge(NewKey(upload.Packets()), stored)
	if err != nil || cleaned.Digest() != stored.Digest() {
		t.Errorf("Merge of a poisoned stored key kept the poison (err %v)", err)
	}

	gpg := testkit.Tool(t, "gpg")
	want := strings.ToUpper(hex.EncodeToString(stored.Fingerprint()))
	for name, k := range map[string]*Key{"applied": applied, "merged": merged, "cleaned": cleaned} {
		fprs, stderr, err := gpgShow(t, gpg, k.Bytes())
		if err != nil || len(fprs) != 1 || fprs[0] != want {
			t.Errorf("%s: gpg --show-keys listed %v (want %s), err %v:\n%s", name, fprs, want, err, stderr)
		}
	}
	// The check above means something: gpg does fail on the poisoned key.
	if _, _, err := gpgShow(t, gpg, upload.Bytes()); err == nil {
		t.Error("gpg read the poisoned key: the regression test no longer exercises the attack")
	}
}
