package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestMailButtonsAreLimitedAndSayWhy: the upload result's mail button
// needs the form's CSRF token; pressing it twice sends one mail; a fourth
// key naming the same address meets the per-recipient cap, which the page
// states in words; a bad link's page says it does not work, in the
// site's layout.
func TestMailButtonsAreLimitedAndSayWhy(t *testing.T) {
	s := newKeySite(t)
	b := s.browser()
	g := newGnuPG(t)
	const addr = "cap@example.org"
	var fprs []string
	for i := range 4 {
		fprs = append(fprs, g.newKey("Key "+string(rune('A'+i))+" <"+addr+">"))
	}
	up := b.upload(g.run("", "--export", "--armor", fprs[0]))
	if !strings.Contains(up.body, `action="/upload/email"`) || !strings.Contains(up.body, addr) {
		t.Fatalf("upload result without a mail button:\n%s", up.body)
	}
	press := func(fpr, csrf string) page {
		t.Helper()
		return b.post("/upload/email", url.Values{"csrf": {csrf}, "fingerprint": {fpr}, "email": {addr}})
	}
	if p := press(fprs[0], ""); p.status != http.StatusForbidden {
		t.Errorf("without a CSRF token: %d", p.status)
	}
	if p := press(fprs[0], up.csrf(t)); p.status != http.StatusOK || !strings.Contains(p.body, "A mail went to "+addr) {
		t.Fatalf("first press: %d\n%s", p.status, p.body)
	}
	if p := press(fprs[0], up.csrf(t)); p.status != http.StatusOK || !strings.Contains(p.body, "No second mail was sent") {
		t.Errorf("second press: %d\n%s", p.status, p.body)
	}
	for _, fpr := range fprs[1:3] {
		b.upload(g.run("", "--export", "--armor", fpr))
		if p := press(fpr, up.csrf(t)); p.status != http.StatusOK {
			t.Fatalf("press for %s: %d\n%s", fpr, p.status, p.body)
		}
	}
	b.upload(g.run("", "--export", "--armor", fprs[3]))
	p := press(fprs[3], up.csrf(t))
	if p.status != http.StatusTooManyRequests || !strings.Contains(p.body, addr+" has had the most mails this server sends one address in an hour. No mail was sent") {
		t.Errorf("past the per-recipient cap: %d\n%s", p.status, p.body)
	}
	for range 3 {
		s.smtp.Wait(t, mailWait)
	}
	if n := s.smtp.Pending(); n != 0 {
		t.Errorf("%d mails past the cap", n)
	}

	// The manage form answers an address whose mails are capped as it
	// answers one no key carries: it tells no one which addresses have
	// keys here.
	manage := func(q string) page {
		t.Helper()
		return b.post("/manage", url.Values{"csrf": {up.csrf(t)}, "q": {q}})
	}
	capped, none := manage(addr), manage("nobody@example.org")
	if capped.status != none.status || !strings.Contains(capped.body, "If a key on this server carries "+addr) ||
		strings.Contains(capped.body, "has had the most mails") {
		t.Errorf("manage by a capped address: %d, by an address without a key: %d\n%s", capped.status, none.status, capped.body)
	}
	if n := s.smtp.Pending(); n != 0 {
		t.Errorf("%d manage mails past the cap", n)
	}

	bad := b.get("/email/confirm/" + fprs[0] + "/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	if bad.status != http.StatusNotFound || !strings.Contains(bad.body, "This link does not work") || !strings.Contains(bad.body, `href="/static/kith.css"`) {
		t.Errorf("bad link: %d\n%s", bad.status, bad.body)
	}
	if bad := b.get("/manage/" + fprs[0] + "/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"); bad.status != http.StatusNotFound {
		t.Errorf("bad manage link: %d", bad.status)
	}
}
