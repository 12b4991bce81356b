package web_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kith-keyserver/kith/hkp/vks"
	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/mail"
	"github.com/kith-keyserver/kith/identity/maillink"
)

const mailWait = 30 * time.Second

// mailedLinkRE finds the link of a mail from the pages.
var mailedLinkRE = regexp.MustCompile(`https://\S+/(?:email/confirm|manage)/[0-9A-F]+/[A-Za-z0-9_-]+`)

// mailedLink waits for the next mail, checks its recipient and subject,
// and returns its link.
func mailedLink(t *testing.T, s *site, to, subject string) string {
	t.Helper()
	m := s.smtp.Wait(t, mailWait)
	if len(m.To) != 1 || m.To[0] != to || !strings.HasPrefix(m.Subject, subject) {
		t.Fatalf("mail to %v, subject %q; want to %s, %q...", m.To, m.Subject, to, subject)
	}
	l := mailedLinkRE.FindString(m.Body)
	if l == "" {
		t.Fatalf("no link in the mail:\n%s", m.Body)
	}
	return l
}

// mountVKS adds the VKS API to the site, as kith serve does beside the
// pages, mailing through the same SMTP server.
func mountVKS(t *testing.T, s *site) {
	t.Helper()
	h, err := vks.NewHandler(s.store, s.keys, s.store, s.svc, vks.Options{PublicURL: s.srv.URL, Server: s.server,
		TokenKey: bytes.Repeat([]byte{7}, 32), Mailer: &mail.SMTP{Address: s.smtp.Addr, From: "kith@keys.example.org"},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h.Register(s.mux)
}

// byEmail answers the VKS by-email lookup's status.
func byEmail(t *testing.T, s *site, addr string) int {
	t.Helper()
	resp, err := s.srv.Client().Get(s.srv.URL + "/vks/v1/by-email/" + addr)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// shootBoth checks the page fits 1280 and 390 px wide and saves a
// screenshot at each (name-desktop, name-phone).
func shootBoth(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	for _, size := range []struct {
		name string
		w, h int64
	}{{"phone", 390, 844}, {"desktop", 1280, 900}} {
		step(t, ctx, "viewport "+size.name, chromedp.EmulateViewport(size.w, size.h))
		wide, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
		if err != nil {
			t.Fatal(err)
		}
		if wide {
			t.Errorf("%s at %s width is wider than the screen", name, size.name)
		}
		broken, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](brokenGroups))
		if err != nil {
			t.Fatal(err)
		}
		if len(broken) > 0 {
			t.Errorf("%s at %s width breaks fingerprint groups %q across lines", name, size.name, broken)
		}
		shoot(t, ctx, name+"-"+size.name)
	}
}

// wantText fails t unless the element's visible text holds every want.
func wantText(t *testing.T, ctx context.Context, sel string, want ...string) {
	t.Helper()
	got := text(t, ctx, sel)
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%s says %q; want %q in it", sel, got, w)
		}
	}
}

// TestChromiumVerifyWithdrawAndDeleteAnAddress: a person who uses only a
// browser uploads a key, has a verification mail sent to one of its
// addresses, follows the mailed link (one click), and the address is
// served by VKS by-email; a manage link mailed to the address withdraws
// it (by-email 404) and deletes the key with a signed statement. Every
// page is checked for what it says and shot at 1280 and 390 px.
func TestChromiumVerifyWithdrawAndDeleteAnAddress(t *testing.T) {
	ctx := chromium(t)
	s := newKeySite(t)
	mountVKS(t, s)
	g := newGnuPG(t)
	fpr := g.newKey("Erin Example <erin@example.org>")
	g.run("", "--quick-add-uid", fpr, "Erin at work <erin@work.example>")
	// An ambiguous user ID carries no address: it gets no button.
	g.run("", "--quick-add-uid", fpr, "The CEO <ceo@example.org> <erin@example.org>")
	armored := g.run("", "--export", "--armor", fpr)
	const addr = "erin@example.org"

	// Upload: the result lists the key's addresses, each with a button.
	navigate(t, ctx, s.srv.URL+"/upload")
	step(t, ctx, "paste the key", chromedp.SetValue(chromedp.CSS("#keytext"), armored),
		chromedp.Click(chromedp.CSS(`form[action="/upload"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS("ul.addresses")))
	list := text(t, ctx, "ul.addresses")
	for _, want := range []string{addr, "erin@work.example", "unpublished"} {
		if !strings.Contains(list, want) {
			t.Errorf("upload result's addresses %q lack %q", list, want)
		}
	}
	if strings.Contains(list, "ceo@example.org") {
		t.Errorf("the ambiguous user ID's address is listed: %q", list)
	}
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('form[action="/upload/email"] button').length`))
	if err != nil || n != 2 {
		t.Errorf("%d mail buttons (%v), want 2", n, err)
	}
	shootBoth(t, ctx, "upload-result")

	// The button mails a verification link.
	button := `form[action="/upload/email"]:has(input[value="` + addr + `"]) button`
	step(t, ctx, "send a verification mail", chromedp.Click(chromedp.CSS(button)), chromedp.WaitVisible(chromedp.CSS("#notice")))
	wantText(t, ctx, "#notice", "A mail went to "+addr)
	wantText(t, ctx, "ul.addresses", "pending", "Send the mail again")
	shootBoth(t, ctx, "verify-mail-sent")
	link := mailedLink(t, s, addr, "Verify "+addr)

	// The link's page names the address, the key and the action; opening
	// it changes nothing.
	navigate(t, ctx, link)
	wantText(t, ctx, "h1", "Confirm your address")
	wantText(t, ctx, "#link-email", addr)
	wantText(t, ctx, "main", "Confirming publishes "+addr, "Confirm and publish")
	if href, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('main dd a.fp').getAttribute('href')`)); err != nil || href != "/keys/"+fpr {
		t.Errorf("key link %q (%v)", href, err)
	}
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('header.site') && !!document.querySelector('link[rel=stylesheet][href="/static/kith.css"]')`)); err != nil || !ok {
		t.Errorf("the link's page lacks the site's header or style sheet (%v)", err)
	}
	shootBoth(t, ctx, "confirm-verify")
	if code := byEmail(t, s, addr); code != http.StatusNotFound {
		t.Fatalf("by-email after opening the link (GET): %d, want 404", code)
	}
	step(t, ctx, "confirm", chromedp.Click(chromedp.CSS(`main form button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS("#notice")))
	wantText(t, ctx, "h1", "Address published")
	wantText(t, ctx, "#notice", addr+" is now published for the OpenPGP key")
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('main a[href="/keys/`+fpr+`"]') && !!document.querySelector('main a[href="/manage"]')`)); err != nil || !ok {
		t.Errorf("the done page does not link the key page and the manage page (%v)", err)
	}
	shootBoth(t, ctx, "confirm-verify-done")
	if code := byEmail(t, s, addr); code != http.StatusOK {
		t.Fatalf("by-email after the confirmation: %d, want 200", code)
	}

	// A withdrawal link (as VKS request-withdraw mails) opens a page of
	// its own wording.
	key, _ := identity.ParsePGPFingerprint(fpr)
	mailer := &maillink.Mailer{PublicURL: s.srv.URL, Server: s.server, Mail: &mail.SMTP{Address: s.smtp.Addr, From: "kith@keys.example.org"}}
	if err := s.svc.RequestEmail(t.Context(), identity.EmailRequest{Action: identity.EmailWithdraw, Key: key,
		Email: identity.EmailFactor(addr), Send: mailer.Sender(identity.EmailWithdraw, key, addr)}); err != nil {
		t.Fatal(err)
	}
	navigate(t, ctx, mailedLink(t, s, addr, "Withdraw "+addr))
	wantText(t, ctx, "h1", "Withdraw your address")
	wantText(t, ctx, "main", "Withdrawing stops this server from publishing "+addr, "Withdraw "+addr)
	if strings.Contains(text(t, ctx, "main"), "Confirm your address") {
		t.Error("the withdrawal page says \"Confirm your address\"")
	}
	shootBoth(t, ctx, "confirm-withdraw")

	// Manage: a link mailed to the address opens the key's manage page.
	navigate(t, ctx, s.srv.URL+"/manage")
	wantText(t, ctx, "h1", "Manage your key")
	shootBoth(t, ctx, "manage-request")
	step(t, ctx, "ask for a manage link", chromedp.SetValue(chromedp.CSS("#q"), addr),
		chromedp.Click(chromedp.CSS(`form[action="/manage"] button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS("#notice")))
	wantText(t, ctx, "#notice", "If a key on this server carries "+addr+", a mail with a link to its manage page went to that address.")
	shootBoth(t, ctx, "manage-request-sent")
	navigate(t, ctx, mailedLink(t, s, addr, "Manage your OpenPGP key"))
	wantText(t, ctx, "h1", "Manage your key")
	wantText(t, ctx, "main", "opened with the link mailed to "+addr)
	wantText(t, ctx, "ul.addresses", addr, "published", "erin@work.example", "unpublished")
	shootBoth(t, ctx, "manage")
	withdraw := `form[action$="/withdraw"]:has(input[value="` + addr + `"]) button`
	step(t, ctx, "withdraw", chromedp.Click(chromedp.CSS(withdraw)), chromedp.WaitVisible(chromedp.CSS("#notice")))
	wantText(t, ctx, "#notice", addr+" is no longer published for this key")
	shootBoth(t, ctx, "manage-withdrawn")
	if code := byEmail(t, s, addr); code != http.StatusNotFound {
		t.Fatalf("by-email after the withdrawal: %d, want 404", code)
	}

	// Deletion: the manage page's button leads to a statement the key's
	// primary key signs.
	step(t, ctx, "ask for deletion", chromedp.Click(chromedp.CSS(`form[action$="/delete"] button`)), chromedp.WaitVisible(chromedp.CSS("#statement")))
	wantText(t, ctx, "#command", "gpg --local-user "+fpr+"! --clearsign")
	shootBoth(t, ctx, "delete-sign")
	statement := text(t, ctx, "#statement")
	sig := g.run(strings.TrimSpace(statement)+"\n", "--local-user", fpr+"!", "--clearsign")
	step(t, ctx, "paste the signature", chromedp.SetValue(chromedp.CSS("#signature"), sig),
		chromedp.Click(chromedp.CSS(`main form button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS("#notice")))
	wantText(t, ctx, "h1", "Key deleted")
	wantText(t, ctx, "#notice", "is deleted")
	shootBoth(t, ctx, "key-deleted")
	found, _, err := s.store.FindKeys(t.Context(), keys.Query{Email: "erin@work.example"})
	if err != nil || len(found) != 0 {
		t.Errorf("the deleted key is still found by its address: %d keys, %v", len(found), err)
	}
}
