package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/mail/mailtest"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
)

// TestHKPv2TokenFlowThroughTheBinary: a key submitted through HKP v2,
// sendtoken mailing the verify link through a real SMTP server, PUT
// canonical with its token, and the key then authoritative for the
// address on every route that asks for a verified address (v2 canonical
// and VKS by-email alike); every step with curl against kith serve.
func TestHKPv2TokenFlowThroughTheBinary(t *testing.T) {
	requirePostgresBinaries(t)
	smtp := mailtest.Start(t, mailtest.Options{})
	dir := tempDir(t)
	s := startServe(t, dir, nil, "--database-url", pgtest.NewDatabase(t),
		"--smtp-address", smtp.Addr, "--smtp-starttls=false", "--smtp-from", "keys@example.org")
	s.waitHealth(t, 200, 60*time.Second)
	base := "http://" + s.addr

	key := armoredKey(t, "Carol <carol@example.org>")
	if code, body := curl(t, "-H", "Content-Type: application/pgp-keys", "--data-binary", key, base+"/pks/v2/certs"); code != 200 {
		t.Fatalf("submit: %d %s", code, body)
	}
	code, body := curl(t, base+"/pks/v2/index/carol@example.org")
	var index []struct {
		Fingerprint string `json:"fingerprint"`
	}
	if err := json.Unmarshal([]byte(body), &index); code != 200 || err != nil || len(index) != 1 {
		t.Fatalf("index: %d %s", code, body)
	}
	fp := index[0].Fingerprint
	req, _ := json.Marshal(map[string]string{"fingerprint": fp, "identity": "carol@example.org"})
	code, body = curl(t, "-H", "Content-Type: application/json", "--data-binary", string(req), base+"/pks/v2/sendtoken")
	if code != 200 || !strings.Contains(body, `"pending"`) {
		t.Fatalf("sendtoken: %d %s", code, body)
	}
	m := smtp.Wait(t, 30*time.Second)
	link := confirmLink.FindString(m.Body)
	if m.To[0] != "carol@example.org" || !strings.HasPrefix(link, base) {
		t.Fatalf("mail to %v:\n%s", m.To, m.Body)
	}
	token := link[strings.LastIndexByte(link, '/')+1:]
	if code, _ := curl(t, base+"/pks/v2/canonical/carol@example.org"); code != 404 {
		t.Fatalf("canonical before the token: %d", code)
	}
	put := func(tok string) (int, string) {
		return curl(t, "-X", "PUT", "-H", "Content-Type: application/pgp-keys", "-H", "Authorization: Bearer "+tok,
			"--data-binary", key, base+"/pks/v2/canonical/carol@example.org")
	}
	if code, body := put(token); code != 200 {
		t.Fatalf("PUT canonical: %d %s", code, body)
	}
	if code, body := put(token); code != 403 {
		t.Errorf("the token again: %d %s, want 403", code, body)
	}
	for _, path := range []string{"/pks/v2/canonical/carol@example.org", "/vks/v1/by-email/carol@example.org"} {
		code, body := curl(t, base+path)
		if got := uidsOf(t, body); code != 200 || len(got) != 1 || got[0] != "Carol <carol@example.org>" {
			t.Errorf("%s: %d, user IDs %q", path, code, got)
		}
	}
	// The link the token came from was used up with it.
	if code, page := curl(t, "-X", "POST", link); code != 410 {
		t.Errorf("the mailed link after PUT: %d %s, want 410", code, page)
	}
	if strings.Contains(s.stderr.String(), token) {
		t.Error("the token reached the log")
	}
}
