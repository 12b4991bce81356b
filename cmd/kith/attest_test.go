package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
)

// sqRun runs sq in dir and returns its stdout.
func sqRun(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	c := exec.Command(testkit.Tool(t, "sq"), args...)
	c.Dir = dir
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		t.Fatalf("sq %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.Bytes()
}

// TestAttestedCertificationsThroughTheBinary: a key whose holder attested
// (with sq) one of its user ID's two third-party certifications is served
// by op=get with that one only, also after the other is uploaded again,
// and the key page marks it attested and says how to attest.
func TestAttestedCertificationsThroughTheBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sq := func(out string, args ...string) []byte {
		b := sqRun(t, dir, args...)
		if out != "" {
			if err := os.WriteFile(filepath.Join(dir, out), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
	const uid = "Owner <owner@example.org>"
	sq("", "key", "generate", "--userid", uid, "--export", "owner.key")
	sq("", "key", "generate", "--userid", "Good <good@example.org>", "--export", "good.key")
	sq("", "key", "generate", "--userid", "Bad <bad@example.org>", "--export", "bad.key")
	sq("c1.pgp", "certify", "good.key", "owner.key", uid)
	sq("o1.key", "keyring", "merge", "owner.key", "c1.pgp")
	sq("o2.key", "key", "attest-certifications", "o1.key")
	sq("c2.pgp", "certify", "bad.key", "owner.key", uid)
	sq("o3.key", "keyring", "merge", "o2.key", "c2.pgp")
	sq("o1c2.key", "keyring", "merge", "o1.key", "c2.pgp")
	attested, plain := sq("", "key", "extract-cert", "o3.key"), sq("", "key", "extract-cert", "o1c2.key")
	keyID := func(file string) string {
		k, err := pgp.ParseKey(sq("", "key", "extract-cert", file))
		if err != nil {
			t.Fatal(err)
		}
		return k.Describe().FingerprintHex()[24:]
	}
	good, bad := keyID("good.key"), keyID("bad.key")
	owner, err := pgp.ParseKey(attested)
	if err != nil {
		t.Fatal(err)
	}
	fpr := owner.Describe().FingerprintHex()

	srv := startServe(t, tempDir(t), nil, "--database-url", pgtest.NewDatabase(t))
	srv.waitHealth(t, http.StatusOK, time.Minute)
	issuers := func() (certs []string, attestations int) {
		t.Helper()
		k := pgp.NewKey(servedPackets(t, srv.addr, fpr))
		for _, bp := range pgp.BlockablePackets(k) {
			switch {
			case bp.Tag != pgp.TagSignature || bp.UserID == "":
			case bp.SigType == 0x16:
				attestations++
			case bp.SigType >= 0x10 && bp.SigType <= 0x13 && !strings.HasSuffix(fpr, fmt.Sprintf("%016X", bp.Issuer)):
				certs = append(certs, fmt.Sprintf("%016X", bp.Issuer))
			}
		}
		return certs, attestations
	}
	// Without an attestation both certifications are served.
	if code, body := addKeyText(t, srv.addr, plain); code != http.StatusOK {
		t.Fatalf("upload: %d %s", code, body)
	}
	if certs, n := issuers(); len(certs) != 2 || n != 0 {
		t.Fatalf("before the attestation op=get serves certifications by %v and %d attestations", certs, n)
	}
	// The attested key: only the attested certification is served, and
	// the unattested one, uploaded again, does not come back.
	for _, upload := range [][]byte{attested, plain} {
		if code, body := addKeyText(t, srv.addr, upload); code != http.StatusOK {
			t.Fatalf("upload: %d %s", code, body)
		}
		if certs, n := issuers(); len(certs) != 1 || certs[0] != good || n != 1 {
			t.Fatalf("op=get serves certifications by %v (attested: %s, not: %s) and %d attestations", certs, good, bad, n)
		}
	}
	resp, err := http.Get("http://" + srv.addr + "/keys/" + fpr)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{good, "attested", "sq key attest-certifications"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Fatalf("the key page lacks %q", want)
		}
	}
	if bytes.Contains(page, []byte(bad)) {
		t.Fatal("the key page shows the unattested certification")
	}
}
