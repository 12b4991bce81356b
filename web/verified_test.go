package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/mail"
	"github.com/kith-keyserver/kith/identity/mail/mailtest"
	"github.com/kith-keyserver/kith/web"
)

// TestSearchMarksAddressesVerifiedByMail: after dana verifies her
// address by mail, the search and her key's page say "verified by mail"
// next to it; a stranger's key naming the same address stays a claim.
func TestSearchMarksAddressesVerifiedByMail(t *testing.T) {
	s := newSite(t, web.Options{})
	g := newGnuPG(t)
	dana := g.newKey("Dana Scully <dana@example.org>")
	stranger := g.newKey("Not Dana <dana@example.org>")
	b := s.browser()
	b.upload(g.run("", "--armor", "--export", dana))
	b.upload(g.run("", "--armor", "--export", stranger))

	smtp := mailtest.Start(t, mailtest.Options{})
	sender := &mail.SMTP{Address: smtp.Addr, From: "kith@example.org"}
	key, err := identity.ParsePGPFingerprint(dana)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.svc.RequestEmail(ctx, identity.EmailRequest{Action: identity.EmailVerify, Key: key, Email: identity.EmailFactor("dana@example.org"),
		Send: func(ctx context.Context, token string) error {
			return sender.Send(ctx, mail.Message{To: "dana@example.org", Subject: "link", Body: token + "\n"})
		}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.svc.ConfirmEmail(ctx, key, strings.TrimSpace(smtp.Wait(t, 30*time.Second).Body)); err != nil {
		t.Fatal(err)
	}

	p := b.get("/search?q=" + url.QueryEscape("dana@example.org"))
	if n := strings.Count(p.body, "verified by mail"); n != 1 {
		t.Fatalf("search shows %d marks, want 1:\n%s", n, p.body)
	}
	i, j := strings.Index(p.body, "/keys/"+dana), strings.Index(p.body, "/keys/"+stranger)
	mark := strings.Index(p.body, "verified by mail")
	if i < 0 || j < 0 || (i < j && (mark < i || mark > j)) || (j < i && mark < i) {
		t.Errorf("the mark is not on dana's key:\n%s", p.body)
	}
	if k := b.get("/keys/" + dana); !strings.Contains(k.body, `<span class="badge verified">verified by mail</span>`) {
		t.Errorf("dana's key page lacks the mark:\n%s", k.body)
	}
	if k := b.get("/keys/" + stranger); strings.Contains(k.body, `badge verified`) {
		t.Errorf("the stranger's key page has the mark:\n%s", k.body)
	}
}
