package hkp

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/mail"
	"github.com/kith-keyserver/kith/identity/mail/mailtest"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/pgp"
)

// TestEmailLookupVerified: by default an email search answers every key
// naming the address, as SKS does; with VerifiedEmails set (the
// hkp.email_lookup = "verified" setting) only the key the address is
// verified for by mail, and nothing once it is withdrawn.
func TestEmailLookupVerified(t *testing.T) {
	st := pgtest.NewStore(t)
	all := newTestServerOn(t, st, Options{})
	verified := newTestServerOn(t, st, Options{VerifiedEmails: st})
	alice := newEntity(t, "Alice", "alice@example.org", 1)
	mallory := newEntity(t, "Not Alice", "alice@example.org", 2)
	all.mustAdd(armored(t, binaryKey(t, alice)))
	all.mustAdd(armored(t, binaryKey(t, mallory)))

	count := func(ts *testServer) int {
		t.Helper()
		r := ts.lookup("op=index&options=mr&search=alice@example.org")
		if r.code == 404 {
			return 0
		}
		if r.code != 200 {
			t.Fatalf("index: %d %s", r.code, r.body)
		}
		return strings.Count(r.body, "\npub:")
	}
	if n := count(all); n != 2 {
		t.Errorf("all: %d keys, want 2", n)
	}
	if n := count(verified); n != 0 {
		t.Errorf("verified, before any verification: %d keys", n)
	}

	svc, err := identity.NewService(st, &verify.Verifier{Keys: st}, identity.ServiceOptions{Server: "Kith <http://test>"})
	if err != nil {
		t.Fatal(err)
	}
	smtp := mailtest.Start(t, mailtest.Options{})
	sender := &mail.SMTP{Address: smtp.Addr, From: "kith@example.org"}
	key, err := identity.ParsePGPFingerprint(fpHex(alice))
	if err != nil {
		t.Fatal(err)
	}
	follow := func(action identity.EmailAction) {
		t.Helper()
		ctx := context.Background()
		err := svc.RequestEmail(ctx, identity.EmailRequest{Action: action, Key: key, Email: identity.EmailFactor("alice@example.org"),
			Send: func(ctx context.Context, token string) error {
				return sender.Send(ctx, mail.Message{To: "alice@example.org", Subject: "link", Body: token + "\n"})
			}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.ConfirmEmail(ctx, key, strings.TrimSpace(smtp.Wait(t, 30*time.Second).Body)); err != nil {
			t.Fatal(err)
		}
	}
	follow(identity.EmailVerify)
	r := verified.lookup("op=get&search=alice@example.org")
	if r.code != 200 {
		t.Fatalf("get: %d %s", r.code, r.body)
	}
	keys, err := pgp.ReadKeys(strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || identity.PGPFactor(keys[0].Fingerprint()).Value != key.Value {
		t.Errorf("verified get: %d keys, want only alice's", len(keys))
	}
	if n := count(all); n != 2 {
		t.Errorf("all, after verification: %d keys, want 2", n)
	}
	follow(identity.EmailWithdraw)
	if n := count(verified); n != 0 {
		t.Errorf("verified, after withdrawal: %d keys", n)
	}
}
