package hkp

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/pgp/gpgtest"
)

// gpgHome is a GnuPG home whose dirmngr uses the test's keyserver.
type gpgHome struct{ *gpgtest.Home }

// newGPGHome makes a home for t; keyserver is an HKP host:port, or "" for
// none.
func newGPGHome(t *testing.T, keyserver string) gpgHome {
	t.Helper()
	h := gpgtest.New(t)
	if keyserver != "" {
		h.UseKeyserver(keyserver)
	}
	return gpgHome{h}
}

// run runs gpg in batch mode and returns its stdout; it fails the test
// when gpg fails.
func (g gpgHome) run(stdin string, args ...string) string { return string(g.Run(stdin, args...)) }

// colons lists the public keys with --with-colons.
func (g gpgHome) colons(args ...string) string {
	return g.run("", append([]string{"--with-colons", "--fixed-list-mode", "--list-keys"}, args...)...)
}

func TestGPGSendsReceivesSearchesAndRefreshes(t *testing.T) {
	ts := newTestServer(t, Options{})
	u, _ := url.Parse(ts.url)
	keyserver := u.Host

	alice := newGPGHome(t, keyserver)
	alice.run("", "--quick-gen-key", "Alice Gnupg <alice.gpg@example.org>", "ed25519", "cert,sign", "never")
	fpr := firstField(alice.colons(), "fpr", 10)
	if len(fpr) != 40 {
		t.Fatalf("no fingerprint in gpg's listing")
	}
	keyID := fpr[24:]
	alice.run("", "--quick-add-key", fpr, "cv25519", "encr", "never")
	alice.run("", "--send-keys", fpr)
	if n := ts.keyCount(); n != 1 {
		t.Fatalf("%d keys stored after --send-keys", n)
	}

	bob := newGPGHome(t, keyserver)
	// By fingerprint.
	bob.run("", "--recv-keys", fpr)
	if got := bob.colons(fpr); !strings.Contains(got, "Alice Gnupg") {
		t.Fatalf("received key not listed:\n%s", got)
	}
	// By 64-bit key ID, into a fresh home.
	carol := newGPGHome(t, keyserver)
	carol.run("", "--recv-keys", "0x"+keyID)
	if got := carol.colons(fpr); !strings.Contains(got, "Alice Gnupg") || strings.Count(got, "\nsub:") != 1 {
		t.Fatalf("key by ID:\n%s", got)
	}

	// Search by email and by name: gpg lists the machine-readable index.
	for _, q := range []string{"alice.gpg@example.org", "Alice Gnupg"} {
		out := carol.run("", "--with-colons", "--search-keys", q)
		if !strings.Contains(out, "pub:"+fpr+":") || !strings.Contains(out, "uid:Alice Gnupg <alice.gpg@example.org>:") {
			t.Errorf("search %q:\n%s", q, out)
		}
	}

	// A new user ID and a new subkey reach bob through --refresh-keys.
	alice.run("", "--quick-add-uid", fpr, "Alice Work <alice@work.example>")
	alice.run("", "--quick-add-key", fpr, "ed25519", "sign", "never")
	alice.run("", "--send-keys", fpr)
	bob.run("", "--refresh-keys")
	got := bob.colons(fpr)
	if !strings.Contains(got, "Alice Work") || strings.Count(got, "\nsub:") != 2 {
		t.Fatalf("after refresh:\n%s", got)
	}
	// The merge kept both user IDs on the server.
	r := ts.lookup("op=index&options=mr&search=0x" + fpr)
	if strings.Count(r.body, "\nuid:") != 2 {
		t.Errorf("server index after merge:\n%s", r.body)
	}

	// A revocation: gpg writes a revocation certificate at key creation.
	rev, err := os.ReadFile(filepath.Join(alice.Dir, "openpgp-revocs.d", fpr+".rev"))
	if err != nil {
		t.Fatal(err)
	}
	cert := strings.Replace(string(rev), ":-----BEGIN PGP PUBLIC KEY BLOCK-----", "-----BEGIN PGP PUBLIC KEY BLOCK-----", 1)
	alice.run(cert, "--import")
	alice.run("", "--send-keys", fpr)
	bob.run("", "--refresh-keys")
	if got := bob.colons(fpr); !strings.HasPrefix(firstLine(got, "pub:"), "pub:r:") {
		t.Errorf("revocation did not reach bob:\n%s", got)
	}
	r = ts.lookup("op=index&options=mr&search=0x" + fpr)
	if !strings.Contains(r.body, "pub:"+fpr+":22:255:") || !strings.Contains(firstLine(r.body, "pub:"), ":r") {
		t.Errorf("server index does not flag the revocation:\n%s", r.body)
	}
}

// firstField returns field n (1-based) of the first record of type typ.
func firstField(colons, typ string, n int) string {
	for _, l := range strings.Split(colons, "\n") {
		f := strings.Split(l, ":")
		if f[0] == typ && len(f) >= n {
			return f[n-1]
		}
	}
	return ""
}

func firstLine(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
