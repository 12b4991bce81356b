package hkp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
)

// TestPoisonedUploadLeavesKeyReceivableByGPG is issue 17's attack over
// HKP: a Debian key, then the same key with one certification whose MPI
// claims 48,410 bits and carries 64 bytes. Kith must answer "unchanged",
// and gpg --recv-keys must still import the key.
func TestPoisonedUploadLeavesKeyReceivableByGPG(t *testing.T) {
	testkit.Tool(t, "gpgconf")
	raw := debianKeys(t, 1)[0]
	k, err := pgp.ParseKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	fpr := fmt.Sprintf("%X", k.Fingerprint())
	lie := []byte{4, 0x10, 1, 8, 0, 6, 5, 2, 0x5e, 0x0b, 0xe1, 0x00, 0, 10, 9, 16, 1, 2, 3, 4, 5, 6, 7, 8, 0xab, 0xcd}
	lie = binary.BigEndian.AppendUint16(lie, 48410)
	lie = append(lie, bytes.Repeat([]byte{0x5a}, 64)...)
	ps := k.Packets()
	uid := slices.IndexFunc(ps, func(p pgp.Packet) bool { return p.Tag == pgp.TagUserID })
	poisoned := pgp.NewKey(slices.Concat(ps[:uid+1], []pgp.Packet{{Tag: pgp.TagSignature, Body: lie}}, ps[uid+1:]))

	ts := newTestServer(t, Options{})
	post := func(b []byte) string {
		req, _ := http.NewRequest("POST", ts.url+"/pks/add", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/pgp-keys")
		r := ts.do(req)
		if r.code != http.StatusOK {
			t.Fatalf("add: %d %s", r.code, r.body)
		}
		return r.body
	}
	if got := post(raw); !strings.Contains(got, "1 inserted") {
		t.Fatalf("first upload: %s", got)
	}
	if got := post(poisoned.Bytes()); !strings.Contains(got, "0 updated, 1 unchanged") {
		t.Fatalf("poisoned upload: %s, want the key unchanged", got)
	}
	u, _ := url.Parse(ts.url)
	home := newGPGHome(t, u.Host)
	errOut, err := home.Try("--recv-keys", fpr)
	if err != nil || !strings.Contains(errOut, "imported: 1") {
		t.Fatalf("gpg --recv-keys %s: %v\n%s", fpr, err, errOut)
	}
	if got := home.colons(fpr); !strings.Contains(got, "fpr:::::::::"+fpr+":") {
		t.Errorf("gpg does not list the received key:\n%s", got)
	}
}
