package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/hkp/wkd"
	"github.com/kith-keyserver/kith/identity/mail/mailtest"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/pgp/gpgtest"
)

// TestTwoAddressUserIDIsNeverMailedVerifiedOrServed: issue 31's attack,
// with the real gpg against kith serve. Mallory's key says "CEO
// <ceo@example.org> <mallory@example.org>": gpg reads ceo@example.org,
// the earlier Kith read mallory@example.org, so Mallory's own mailbox
// verified it and VKS, WKD and HKP then served it for an address gpg
// encrypts to the CEO under. Today the user ID carries no address: no
// verification mail goes out for either address, and no lookup by
// either finds the key; a plain key beside it goes the whole way.
func TestTwoAddressUserIDIsNeverMailedVerifiedOrServed(t *testing.T) {
	requirePostgresBinaries(t)
	smtp := mailtest.Start(t, mailtest.Options{})
	s := startServe(t, tempDir(t), nil, "--database-url", pgtest.NewDatabase(t),
		"--smtp-address", smtp.Addr, "--smtp-starttls=false", "--smtp-from", "keys@example.org",
		"--wkd-domains", "example.org")
	s.waitHealth(t, 200, 60*time.Second)
	base := "http://" + s.addr

	mallory := gpgtest.New(t)
	mallory.UseKeyserver(s.addr)
	evil := mallory.NewKey("CEO <ceo@example.org> <mallory@example.org>", "sign")
	plain := mallory.NewKey("Alice <alice@example.org>", "sign")
	if out, err := mallory.Try("--send-keys", evil, plain); err != nil {
		t.Fatalf("gpg --send-keys: %v\n%s", err, out)
	}
	// gpg itself reads the CEO's address from the user ID.
	if out, err := mallory.Try("--list-keys", "<ceo@example.org>"); err != nil {
		t.Fatalf("gpg does not read <ceo@example.org> from the user ID: %v\n%s", err, out)
	}

	vks := func(path string, v any) (int, string) {
		b, _ := json.Marshal(v)
		return curl(t, "-H", "Content-Type: application/json", "--data-binary", string(b), base+path)
	}
	upload := func(fpr string) (token string, status map[string]string) {
		code, body := vks("/vks/v1/upload", map[string]string{"keytext": string(mallory.Run("", "--armor", "--export", fpr))})
		var up struct {
			Status map[string]string `json:"status"`
			Token  string            `json:"token"`
		}
		if err := json.Unmarshal([]byte(body), &up); code != 200 || err != nil {
			t.Fatalf("VKS upload: %d %s (%v)", code, body, err)
		}
		return up.Token, up.Status
	}
	token, status := upload(evil)
	if len(status) != 0 {
		t.Errorf("VKS upload lists addresses %v for a user ID that carries none", status)
	}
	for _, addr := range []string{"ceo@example.org", "mallory@example.org"} {
		code, body := vks("/vks/v1/request-verify", map[string]any{"token": token, "addresses": []string{addr}})
		if code == 200 {
			t.Errorf("request-verify %s: %d %s, want a refusal", addr, code, body)
			// The attack as it went: Mallory follows the link she gets.
			if m := smtp.Wait(t, 30*time.Second); m.To[0] == "mallory@example.org" {
				curl(t, "-X", "POST", confirmLink.FindString(m.Body))
			}
		}
	}
	// A plain key's verification goes out: the first mail is its one.
	token, _ = upload(plain)
	if code, body := vks("/vks/v1/request-verify", map[string]any{"token": token, "addresses": []string{"alice@example.org"}}); code != 200 {
		t.Fatalf("request-verify of a plain user ID: %d %s", code, body)
	}
	m := smtp.Wait(t, 30*time.Second)
	if len(m.To) != 1 || m.To[0] != "alice@example.org" {
		t.Fatalf("the first mail went to %v, want alice@example.org alone", m.To)
	}
	if code, page := curl(t, "-X", "POST", confirmLink.FindString(m.Body)); code != 200 {
		t.Fatalf("follow alice's link: %d %s", code, page)
	}

	// No lookup by either address finds the key; the plain one is found.
	found := map[string]int{
		"/vks/v1/by-email/ceo@example.org":                                             404,
		"/vks/v1/by-email/mallory@example.org":                                         404,
		"/vks/v1/by-email/alice@example.org":                                           200,
		"/.well-known/openpgpkey/example.org/hu/" + wkd.Hash("ceo") + "?l=ceo":         404,
		"/.well-known/openpgpkey/example.org/hu/" + wkd.Hash("mallory") + "?l=mallory": 404,
		"/.well-known/openpgpkey/example.org/hu/" + wkd.Hash("alice") + "?l=alice":     200,
		"/pks/lookup?op=index&options=mr&search=ceo@example.org":                       404,
		"/pks/lookup?op=index&options=mr&search=mallory@example.org":                   404,
		"/pks/lookup?op=index&options=mr&search=alice@example.org":                     200,
	}
	for path, want := range found {
		if code, body := curl(t, base+path); code != want {
			t.Errorf("%s: %d, want %d\n%s", path, code, want, body)
		}
	}
	// gpg locating either address through Kith gets nothing; alice's key
	// it gets.
	for addr, fpr := range map[string]string{"ceo@example.org": "", "mallory@example.org": "", "alice@example.org": plain} {
		client := gpgtest.New(t)
		client.UseKeyserver(s.addr)
		out, _ := client.Try("--auto-key-locate", "clear,keyserver,nodefault", "--locate-keys", addr)
		if _, err := client.Try("--list-keys", evil); err == nil {
			t.Errorf("gpg --locate-keys %s imported Mallory's key:\n%s", addr, out)
		}
		if _, err := client.Try("--list-keys", fpr); fpr != "" && err != nil {
			t.Errorf("gpg --locate-keys %s did not get its key:\n%s", addr, out)
		}
	}
}
