package client_test

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/hkp/vks"
	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/mail"
	"github.com/kith-keyserver/kith/identity/mail/mailtest"
)

var confirmLinkRE = regexp.MustCompile(`/email/confirm/([0-9A-F]+)/([A-Za-z0-9_-]+)`)

// TestRequestEmailVerifiesAndWithdrawsThroughVKS: the client uploads
// gpg's key and has the server mail a verify link, then a withdraw link;
// following them (as the page a link opens does) publishes and withdraws
// the address. An address the key lacks is refused before any mail.
func TestRequestEmailVerifiesAndWithdrawsThroughVKS(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t)
	smtp := mailtest.Start(t, mailtest.Options{})
	h, err := vks.NewHandler(srv.store, srv.keys, srv.store, srv.svc, vks.Options{PublicURL: srv.url, Server: "Kith <" + srv.url + ">",
		TokenKey: bytes.Repeat([]byte{9}, 32), Mailer: &mail.SMTP{Address: smtp.Addr, From: "kith@keys.example.org"},
		RequestsPerMinute: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h.Register(srv.mux)
	c := srv.client()
	u := newUser(t)
	key := u.pgpKey("Nora <nora@example.org>")
	const addr = "nora@example.org"

	follow := func(subject string) {
		t.Helper()
		m := smtp.Wait(t, 30*time.Second)
		if len(m.To) != 1 || m.To[0] != addr || !strings.HasPrefix(m.Subject, subject) {
			t.Fatalf("mail to %v, %q; want %s, %q", m.To, m.Subject, addr, subject)
		}
		l := confirmLinkRE.FindStringSubmatch(m.Body)
		if l == nil {
			t.Fatalf("no link in:\n%s", m.Body)
		}
		if _, err := srv.svc.ConfirmEmail(ctx, identity.Factor{Kind: identity.KindPGP, Value: l[1]}, l[2]); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := c.RequestEmail(ctx, key, identity.EmailVerify, "someone@example.org"); err == nil || !strings.Contains(err.Error(), "has no user ID with this address (it has: nora@example.org)") {
		t.Errorf("an address the key lacks: %v", err)
	}
	st, err := c.RequestEmail(ctx, key, identity.EmailVerify, "Nora@Example.org")
	if err != nil || st.KeyFpr != key.ID || st.Status[addr] != "pending" {
		t.Fatalf("verify: %+v %v", st, err)
	}
	follow("Verify " + addr)
	if keys, err := srv.store.VerifiedKeys(ctx, addr); err != nil || len(keys) != 1 || keys[0].Value != key.ID {
		t.Fatalf("verified keys of %s: %v %v", addr, keys, err)
	}
	if st, err = c.RequestEmail(ctx, key, identity.EmailWithdraw, addr); err != nil || st.Status[addr] != "published" {
		t.Fatalf("withdraw: %+v %v", st, err)
	}
	follow("Withdraw " + addr)
	if keys, err := srv.store.VerifiedKeys(ctx, addr); err != nil || len(keys) != 0 {
		t.Errorf("verified keys of %s after the withdrawal: %v %v", addr, keys, err)
	}
	if n := smtp.Pending(); n != 0 {
		t.Errorf("%d more mails", n)
	}
}
