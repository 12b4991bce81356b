package pgp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/kith-keyserver/kith/identity/testkit"
)

// realKeyrings are the keyrings whose policy outcome is pinned, with the
// SHA-256 of the file the pin was taken from (debian-keyring
// 2022.12.24, the package installed when the pin was recorded).
var realKeyrings = []struct {
	path, sha256 string
}{
	{testkit.DebianKeyring, "115140a66a82e8aff366b5f322e1b2ff0aea610b88b02474e1a27dcd600aabe5"},
	{"/usr/share/keyrings/debian-maintainers.gpg", "8c9b966848d214382521403f58ab9c5d4593ab104fb659611075834a8a96ea7e"},
	{"/usr/share/keyrings/debian-nonupload.gpg", "77ca7dd53026f831757d2aabbdb73fb7ad90286bcbe714957f853b818fa21a18"},
	{"/usr/share/keyrings/debian-role-keys.gpg", "f8d801993560d6a21349b73974f8dbcec444c69298d33a350c86200dba7b5251"},
}

// policyOutcomeDigest is the SHA-256 of what the default policy makes of
// every key of realKeyrings, in order (policyOutcomes): recorded with the
// policy as it was before it had verification budgets and exponent caps
// (issue 31), so that those limits provably change nothing for real keys.
const policyOutcomeDigest = "e6177325c170da764d3c9ba3598b84f5a28ba20d0e049671008c74819c3e1fa5"

// policyOutcomes hashes, for every key of the keyring b, its index and
// either its canonical bytes and drop report or the reason it was refused.
func policyOutcomes(t *testing.T, h interface{ Write([]byte) (int, error) }, b []byte) int {
	t.Helper()
	n := 0
	err := Policy{}.ProcessParallel(context.Background(), NewReader(bytes.NewReader(b)), 0, func(r Result) error {
		n++
		fmt.Fprintf(h, "key %d\n", r.Index)
		if r.Err != nil {
			fmt.Fprintf(h, "refused: %s\n", RejectionReason(r.Err))
			return nil
		}
		fmt.Fprintf(h, "report: %s\n%d bytes\n", r.Report, len(r.Key.Bytes()))
		h.Write(r.Key.Bytes())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPolicyOutcomeOfDebianKeyringsIsPinned(t *testing.T) {
	h := sha256.New()
	for _, kr := range realKeyrings {
		b := testkit.File(t, kr.path)
		sum := sha256.Sum256(b)
		got := hex.EncodeToString(sum[:])
		n := policyOutcomes(t, h, b)
		t.Logf("%s: %d keys, file sha256 %s", filepath.Base(kr.path), n, got)
		if kr.sha256 != "" && got != kr.sha256 {
			t.Fatalf("%s is not the file the outcome was pinned with (sha256 %s, pinned %s): the debian-keyring package changed; pin again with the policy of before issue 31", kr.path, got, kr.sha256)
		}
	}
	got := hex.EncodeToString(h.Sum(nil))
	if got != policyOutcomeDigest {
		t.Errorf("the default policy's outcome for the Debian keyrings changed: digest %s, pinned %s", got, policyOutcomeDigest)
	}
}
