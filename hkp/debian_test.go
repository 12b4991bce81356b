package hkp

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
)

// debianKeys returns the first n keys of the Debian keyring, skipping the
// test when it is not installed (failing with CI=true).
func debianKeys(t *testing.T, n int) [][]byte {
	t.Helper()
	f, err := os.Open(testkit.DebianKeyring)
	if err != nil {
		testkit.Missing(t, "%s missing: %v", testkit.DebianKeyring, err)
	}
	defer f.Close()
	r := pgp.NewReader(f)
	var out [][]byte
	for len(out) < n {
		k, err := r.Next()
		if err != nil {
			break
		}
		out = append(out, k.Bytes())
	}
	return out
}

func TestIndexOfDebianKeysAgreesWithGPG(t *testing.T) {
	keys := debianKeys(t, 40)
	ts := newTestServer(t, Options{})
	req, _ := http.NewRequest("POST", ts.url+"/pks/add", bytes.NewReader(bytes.Join(keys, nil)))
	req.Header.Set("Content-Type", "application/pgp-keys")
	if r := ts.do(req); r.code != 200 || !strings.Contains(r.body, fmt.Sprintf("%d inserted", len(keys))) {
		t.Fatalf("add: %d %s", r.code, truncate(r.body, 500))
	}
	home := newGPGHome(t, "") // gpg --show-keys asks no keyserver
	checked := 0
	for _, bin := range keys {
		k, _ := pgp.ParseKey(bin)
		fpr := fmt.Sprintf("%X", k.Fingerprint())
		served := ts.lookup("op=get&options=mr&search=0x" + fpr)
		index := ts.lookup("op=index&options=mr&search=0x" + fpr)
		if served.code != 200 || index.code != 200 {
			t.Errorf("%s: get %d, index %d", fpr, served.code, index.code)
			continue
		}
		// gpg's own reading of what Kith serves.
		listing := home.run(served.body, "--with-colons", "--fixed-list-mode", "--show-keys")
		g := strings.Split(firstLine(listing, "pub:"), ":")
		ours := strings.Split(firstLine(index.body, "pub:"), ":")
		if len(g) < 7 || len(ours) != 7 {
			t.Errorf("%s: gpg %q, ours %q", fpr, g, ours)
			continue
		}
		// gpg: pub:validity:bits:algo:keyid:created:expires; ours:
		// pub:fpr:algo:bits:created:expires:flags.
		if ours[1] != firstField(listing, "fpr", 10) || ours[2] != g[3] || ours[3] != g[2] || ours[4] != g[5] || ours[5] != g[6] {
			t.Errorf("%s: index %q disagrees with gpg %q", fpr, ours, g)
		}
		if (g[1] == "r") != strings.Contains(ours[6], "r") || (g[1] == "e") != strings.Contains(ours[6], "e") {
			t.Errorf("%s: flags %q, gpg validity %q", fpr, ours[6], g[1])
		}
		// Every user ID gpg sees, Kith indexes.
		if gu, ou := strings.Count(listing, "\nuid:"), strings.Count(index.body, "\nuid:"); gu != ou {
			t.Errorf("%s: gpg sees %d user IDs, the index lists %d", fpr, gu, ou)
		}
		checked++
	}
	if checked < len(keys)/2 {
		t.Errorf("only %d of %d keys checked", checked, len(keys))
	}
}
