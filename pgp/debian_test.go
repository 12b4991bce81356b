package pgp

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity/testkit"
)

var debianKeyrings = []string{
	testkit.DebianKeyring,
	"/usr/share/keyrings/debian-maintainers.gpg",
	"/usr/share/keyrings/debian-nonupload.gpg",
	"/usr/share/keyrings/debian-role-keys.gpg",
}

// debianKeys applies the default policy to every key of a keyring, failing
// on any read error or rejection.
func debianKeys(t testing.TB, path string) (in, out []*Key) {
	t.Helper()
	b := testkit.File(t, path)
	var raw []*Key
	r := NewReader(bytes.NewReader(b))
	for {
		k, err := r.Next()
		if err != nil {
			break
		}
		raw = append(raw, k)
	}
	err := Policy{}.ProcessParallel(context.Background(), NewReader(bytes.NewReader(b)), 0, func(res Result) error {
		if res.Err != nil {
			t.Errorf("%s: key %d: %v", path, res.Index, res.Err)
			return nil
		}
		out = append(out, res.Key)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(raw) {
		t.Fatalf("%s: %d keys read, %d passed", path, len(raw), len(out))
	}
	return raw, out
}

func TestDebianKeyringsPassPolicyAndRoundTrip(t *testing.T) {
	for _, path := range debianKeyrings {
		t.Run(filepath.Base(path), func(t *testing.T) {
			_, keys := debianKeys(t, path)
			var armoredBuf bytes.Buffer
			if err := WriteArmored(&armoredBuf, keys...); err != nil {
				t.Fatal(err)
			}
			back, errs := readAllKeys(t, NewReader(&armoredBuf))
			if len(errs) > 0 || len(back) != len(keys) {
				t.Fatalf("armor round trip: %d keys, errors %v", len(back), errs)
			}
			for i, k := range keys {
				again, rep, err := Policy{}.Apply(k)
				if err != nil || rep.Total() != 0 || !bytes.Equal(again.Bytes(), k.Bytes()) {
					t.Errorf("key %X: Apply is not idempotent (err %v, report %v)", k.Fingerprint(), err, rep)
				}
				if !bytes.Equal(back[i].Bytes(), k.Bytes()) {
					t.Errorf("key %X: bytes changed through armor", k.Fingerprint())
				}
				if again.Digest() != k.Digest() || digestPackets(back[i].Packets()) != k.Digest() {
					t.Errorf("key %X: digest not stable", k.Fingerprint())
				}
				d := k.Describe()
				if len(d.Fingerprint) != 20 || len(d.UserIDs) == 0 || d.Created.IsZero() {
					t.Errorf("key %X: thin description %+v", k.Fingerprint(), d)
				}
			}
		})
	}
}

// gpgListing imports keyring bytes into a fresh GNUPGHOME and returns the
// sorted fpr/uid/sub lines of `gpg --with-colons --list-keys` (fields that
// do not depend on trust computation).
func gpgListing(t *testing.T, gpg string, keyring []byte) []string {
	t.Helper()
	home := t.TempDir()
	file := filepath.Join(home, "in.gpg")
	if err := os.WriteFile(file, keyring, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) []byte {
		cmd := exec.Command(gpg, append([]string{"--batch", "--no-auto-check-trustdb", "--homedir", home}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("gpg %v: %v", args, err)
		}
		return out
	}
	run("--import", file)
	var lines []string
	for _, l := range strings.Split(string(run("--with-colons", "--fixed-list-mode", "--list-keys")), "\n") {
		f := strings.Split(l, ":")
		switch f[0] {
		case "pub", "sub":
			// type, validity (r/e), bits, algo, keyid, created, expires, usage
			lines = append(lines, strings.Join([]string{f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[11]}, ":"))
		case "fpr":
			lines = append(lines, "fpr:"+f[9])
		case "uid", "uat":
			// type, validity, created, expires, hash, text
			lines = append(lines, strings.Join([]string{f[0], f[1], f[5], f[6], f[7], f[9]}, ":"))
		}
	}
	slices.Sort(lines)
	return lines
}

func TestGPGSeesSameUserIDsAndSubkeysAsOriginal(t *testing.T) {
	gpg := testkit.Tool(t, "gpg")
	raw, keys := debianKeys(t, testkit.DebianKeyring)
	// A spread sample: every 30th key.
	var orig, kith bytes.Buffer
	for i := 0; i < len(raw); i += 30 {
		orig.Write(raw[i].Bytes())
		if err := WriteArmored(&kith, keys[i]); err != nil {
			t.Fatal(err)
		}
	}
	want := gpgListing(t, gpg, orig.Bytes())
	got := gpgListing(t, gpg, kith.Bytes())
	if !slices.Equal(got, want) {
		for _, l := range want {
			if !slices.Contains(got, l) {
				t.Errorf("missing after Kith: %s", l)
			}
		}
		for _, l := range got {
			if !slices.Contains(want, l) {
				t.Errorf("extra after Kith: %s", l)
			}
		}
	}
	if len(want) < 60 {
		t.Errorf("suspiciously short listing: %d lines", len(want))
	}
}
