package identity_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
)

// mailbox is what a test's sender saw: the tokens it was handed.
type mailbox struct {
	tokens []string
	fail   error
}

func (m *mailbox) send(ctx context.Context, token string) error {
	if m.fail != nil {
		return m.fail
	}
	m.tokens = append(m.tokens, token)
	return nil
}

func (e *env) requestEmail(action identity.EmailAction, key identity.Factor, addr string, m *mailbox) error {
	return e.svc.RequestEmail(e.ctx, identity.EmailRequest{Action: action, Key: key, Email: identity.EmailFactor(addr), Send: m.send})
}

func (e *env) emailRecords(key identity.Factor) []identity.Evidence {
	e.t.Helper()
	recs, err := e.st.KeyRecords(e.ctx, key)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []identity.Evidence
	for _, r := range recs {
		if r.Method == identity.MethodEmailVerified {
			out = append(out, r)
		}
	}
	return out
}

func TestEmailVerification(t *testing.T) {
	pA, pB := pgpKey("alice"), pgpKey("mallory")
	const addr = "alice@example.org"
	mail := identity.EmailFactor(addr)
	tests := []struct {
		name string
		run  func(t *testing.T, e *env)
	}{
		{"a followed link records email.verified and proves the email for the key's identity", func(t *testing.T, e *env) {
			e.storeKey(pA, uid(addr))
			e.claim("alice", pA)
			var m mailbox
			if err := e.requestEmail(identity.EmailVerify, pA, addr, &m); err != nil {
				t.Fatal(err)
			}
			if len(m.tokens) != 1 {
				t.Fatalf("mails sent: %d, want 1", len(m.tokens))
			}
			e.wantLevel("alice", mail, identity.LevelClaimed)
			c, err := e.svc.ConfirmEmail(e.ctx, pA, m.tokens[0])
			if err != nil {
				t.Fatal(err)
			}
			if c.Action != identity.EmailVerify || !c.Email.Same(mail) || c.Seq == 0 {
				t.Errorf("confirmation %+v", c)
			}
			e.wantLevel("alice", mail, identity.LevelProven)
			if recs := e.emailRecords(pA); len(recs) != 1 || recs[0].Purpose != "" {
				t.Errorf("records %+v", recs)
			}
		}},
		{"a withdrawn address is claimed again", func(t *testing.T, e *env) {
			e.storeKey(pA, uid(addr))
			e.claim("alice", pA)
			var m mailbox
			e.requestEmail(identity.EmailVerify, pA, addr, &m)
			if _, err := e.svc.ConfirmEmail(e.ctx, pA, m.tokens[0]); err != nil {
				t.Fatal(err)
			}
			if err := e.requestEmail(identity.EmailWithdraw, pA, addr, &m); err != nil {
				t.Fatal(err)
			}
			if _, err := e.svc.ConfirmEmail(e.ctx, pA, m.tokens[1]); err != nil {
				t.Fatal(err)
			}
			e.wantLevel("alice", mail, identity.LevelClaimed)
			recs := e.emailRecords(pA)
			if len(recs) != 2 || recs[1].Purpose != identity.PurposeRevoke {
				t.Errorf("records %+v", recs)
			}
			if identity.EmailVerifiedIn(recs, pA, mail) {
				t.Error("still verified after the withdrawal")
			}
		}},
		{"a manage link withdraws verified addresses until it expires, and confirms nothing", func(t *testing.T, e *env) {
			const work = "alice@work.example"
			e.storeKey(pA, uid(addr), uid(work))
			var m mailbox
			for _, a := range []string{addr, work} {
				e.requestEmail(identity.EmailVerify, pA, a, &m)
				if _, err := e.svc.ConfirmEmail(e.ctx, pA, m.tokens[len(m.tokens)-1]); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.requestEmail(identity.EmailManage, pA, "nobody@example.org", &m); identity.CodeOf(err) != identity.CodeAddressNotInKey {
				t.Errorf("manage link to an address the key lacks: %v", err)
			}
			if err := e.requestEmail(identity.EmailManage, pA, addr, &m); err != nil {
				t.Fatal(err)
			}
			manage := m.tokens[len(m.tokens)-1]
			if c, err := e.svc.EmailLink(e.ctx, pA, manage); err != nil || c.Action != identity.EmailManage || !c.Email.Same(mail) {
				t.Errorf("EmailLink: %+v %v", c, err)
			}
			_, err := e.svc.ConfirmEmail(e.ctx, pA, manage)
			wantCode(t, err, identity.CodeWrongToken)
			_, err = e.svc.WithdrawWithManageLink(e.ctx, pB, manage, mail)
			wantCode(t, err, identity.CodeWrongToken)
			for _, a := range []string{work, addr} {
				if c, err := e.svc.WithdrawWithManageLink(e.ctx, pA, manage, identity.EmailFactor(a)); err != nil || c.Seq == 0 {
					t.Fatalf("withdraw %s: %+v %v", a, c, err)
				}
			}
			_, err = e.svc.WithdrawWithManageLink(e.ctx, pA, manage, mail)
			wantCode(t, err, identity.CodeNotVerified)
			recs := e.emailRecords(pA)
			if len(recs) != 4 || identity.EmailVerifiedIn(recs, pA, mail) || identity.EmailVerifiedIn(recs, pA, identity.EmailFactor(work)) {
				t.Errorf("records %+v", recs)
			}
			e.clock = e.clock.Add(identity.EmailTokenTTL + time.Second)
			_, err = e.svc.ManageLink(e.ctx, pA, manage)
			wantCode(t, err, identity.CodeTokenExpired)
		}},
		{"an unknown token is refused", func(t *testing.T, e *env) {
			e.storeKey(pA, uid(addr))
			_, err := e.svc.ConfirmEmail(e.ctx, pA, "not-a-token")
			wantCode(t, err, identity.CodeUnknownToken)
			if n := len(e.emailRecords(pA)); n != 0 {
				t.Errorf("%d records", n)
			}
		}},
		{"a link works once", func(t *testing.T, e *env) {
			e.storeKey(pA, uid(addr))
			var m mailbox
			e.requestEmail(identity.EmailVerify, pA, addr, &m)
			if _, err := e.svc.ConfirmEmail(e.ctx, pA, m.tokens[0]); err != nil {
				t.Fatal(err)
			}
			_, err := e.svc.ConfirmEmail(e.ctx, pA, m.tokens[0])
			wantCode(t, err, identity.CodeTokenUsed)
			if n := len(e.emailRecords(pA)); n != 1 {
				t.Errorf("%d records, want 1", n)
			}
		}},
		{"an expired link is refused and records nothing", func(t *testing.T, e *env) {
			e.storeKey(pA, uid(addr))
			var m mailbox
			e.requestEmail(identity.EmailVerify, pA, addr, &m)
			e.clock = e.clock.Add(identity.EmailTokenTTL + time.Second)
			_, err := e.svc.ConfirmEmail(e.ctx, pA, m.tokens[0])
			wantCode(t, err, identity.CodeTokenExpired)
			if n := len(e.emailRecords(pA)); n != 0 {
				t.Errorf("%d records", n)
			}
		}},
		{"a link for another key is refused and stays usable for its own", func(t *testing.T, e *env) {
			e.storeKey(pA, uid(addr))
			e.storeKey(pB, uid(addr))
			var m mailbox
			e.requestEmail(identity.EmailVerify, pA, addr, &m)
			_, err := e.svc.ConfirmEmail(e.ctx, pB, m.tokens[0])
			wantCode(t, err, identity.CodeWrongToken)
			if n := len(e.emailRecords(pB)); n != 0 {
				t.Errorf("%d records for the other key", n)
			}
			if _, err := e.svc.ConfirmEmail(e.ctx, pA, m.tokens[0]); err != nil {
				t.Errorf("the link's own key: %v", err)
			}
		}},
		{"an address not in the key sends nothing", func(t *testing.T, e *env) {
			e.storeKey(pA, uid("other@example.org"))
			var m mailbox
			wantCode(t, e.requestEmail(identity.EmailVerify, pA, addr, &m), identity.CodeAddressNotInKey)
			if len(m.tokens) != 0 {
				t.Errorf("%d mails sent", len(m.tokens))
			}
		}},
		{"an unknown key sends nothing", func(t *testing.T, e *env) {
			var m mailbox
			wantCode(t, e.requestEmail(identity.EmailVerify, pA, addr, &m), identity.CodeUnknownKey)
			if len(m.tokens) != 0 {
				t.Errorf("%d mails sent", len(m.tokens))
			}
		}},
		{"a flood of requests sends one mail within the window", func(t *testing.T, e *env) {
			e.storeKey(pA, uid(addr))
			var m mailbox
			if err := e.requestEmail(identity.EmailVerify, pA, addr, &m); err != nil {
				t.Fatal(err)
			}
			for range 20 {
				wantCode(t, e.requestEmail(identity.EmailVerify, pA, addr, &m), identity.CodeRateLimited)
			}
			if len(m.tokens) != 1 {
				t.Errorf("%d mails sent, want 1", len(m.tokens))
			}
			e.clock = e.clock.Add(identity.EmailWindow + time.Second)
			if err := e.requestEmail(identity.EmailVerify, pA, addr, &m); err != nil {
				t.Errorf("after the window: %v", err)
			}
		}},
		{"a mail server that fails records nothing and keeps no token", func(t *testing.T, e *env) {
			e.storeKey(pA, uid(addr))
			m := mailbox{fail: errors.New("connection refused")}
			wantCode(t, e.requestEmail(identity.EmailVerify, pA, addr, &m), identity.CodeMailUnavailable)
			// Not rate-limited: the failed mail left no token behind.
			m.fail = nil
			if err := e.requestEmail(identity.EmailVerify, pA, addr, &m); err != nil {
				t.Fatalf("retry: %v", err)
			}
			if n := len(e.emailRecords(pA)); n != 0 {
				t.Errorf("%d records", n)
			}
		}},
		{"withdrawing an address that is not verified sends nothing", func(t *testing.T, e *env) {
			e.storeKey(pA, uid(addr))
			var m mailbox
			wantCode(t, e.requestEmail(identity.EmailWithdraw, pA, addr, &m), identity.CodeNotVerified)
			if len(m.tokens) != 0 {
				t.Errorf("%d mails sent", len(m.tokens))
			}
		}},
		{"a stranger's key verified for its own address proves nothing for another identity", func(t *testing.T, e *env) {
			e.storeKey(pA, uid(addr))
			e.storeKey(pB, uid(addr))
			e.claim("alice", pA)
			var m mailbox
			e.requestEmail(identity.EmailVerify, pB, addr, &m)
			if _, err := e.svc.ConfirmEmail(e.ctx, pB, m.tokens[0]); err != nil {
				t.Fatal(err)
			}
			// alice's key was never verified: her email stays a claim.
			e.wantLevel("alice", mail, identity.LevelClaimed)
		}},
		{"a key that dropped the address cannot be verified for it", func(t *testing.T, e *env) {
			e.storeKey(pA, uid(addr))
			var m mailbox
			e.requestEmail(identity.EmailVerify, pA, addr, &m)
			e.storeKey(pA)
			_, err := e.svc.ConfirmEmail(e.ctx, pA, m.tokens[0])
			wantCode(t, err, identity.CodeAddressNotInKey)
			if n := len(e.emailRecords(pA)); n != 0 {
				t.Errorf("%d records", n)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, newEnv(t)) })
	}
}

// withMailCap rebuilds e's Service with ServiceOptions.MailsPerAddress n.
func withMailCap(e *env, n int) {
	e.t.Helper()
	svc, err := identity.NewService(e.st, e.v, identity.ServiceOptions{Server: server, Now: func() time.Time { return e.clock },
		MailsPerAddress: n})
	if err != nil {
		e.t.Fatal(err)
	}
	e.svc = svc
}

// TestRecipientCap: fresh keys naming someone else's address buy no more
// mails to it than the cap, whatever the key, action or spelling; other
// addresses keep their own budgets; the hour ends the cap.
func TestRecipientCap(t *testing.T) {
	victim := "victim@example.net"
	spellings := []string{victim, "Victim@Example.NET", "VICTIM@EXAMPLE.NET"}
	keys := make([]identity.Factor, 6)
	for i := range keys {
		keys[i] = pgpKey(fmt.Sprintf("stranger %d", i))
	}
	tests := []struct {
		name string
		run  func(t *testing.T, e *env)
	}{
		{"by default an address receives three mails an hour, across keys and spellings", func(t *testing.T, e *env) {
			var m mailbox
			for i, k := range keys {
				e.storeKey(k, uid(spellings[i%len(spellings)]))
				err := e.requestEmail(identity.EmailVerify, k, spellings[i%len(spellings)], &m)
				if i < identity.DefaultMailsPerAddress {
					if err != nil {
						t.Fatalf("mail %d: %v", i+1, err)
					}
					continue
				}
				wantCode(t, err, identity.CodeRecipientCapped)
				if msg := err.Error(); strings.Contains(msg, k.Value) || strings.Contains(msg, keys[0].Value) || strings.Contains(msg, "3") {
					t.Errorf("the refusal says more than that the address had its mails: %q", msg)
				}
			}
			if len(m.tokens) != identity.DefaultMailsPerAddress {
				t.Errorf("%d mails sent, want %d", len(m.tokens), identity.DefaultMailsPerAddress)
			}
			pending, err := e.svc.PendingEmails(e.ctx, keys[len(keys)-1], []string{victim})
			if err != nil || len(pending) != 0 {
				t.Errorf("a refused request left a pending link: %v %v", pending, err)
			}
		}},
		{"another address is unaffected", func(t *testing.T, e *env) {
			var m mailbox
			for i := range identity.DefaultMailsPerAddress {
				e.storeKey(keys[i], uid(victim), uid("other@example.net"))
				if err := e.requestEmail(identity.EmailVerify, keys[i], victim, &m); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.requestEmail(identity.EmailVerify, keys[0], "other@example.net", &m); err != nil {
				t.Errorf("another address: %v", err)
			}
		}},
		{"withdrawal mails count too", func(t *testing.T, e *env) {
			withMailCap(e, 2)
			var m mailbox
			e.storeKey(keys[0], uid(victim))
			e.requestEmail(identity.EmailVerify, keys[0], victim, &m)
			if _, err := e.svc.ConfirmEmail(e.ctx, keys[0], m.tokens[0]); err != nil {
				t.Fatal(err)
			}
			if err := e.requestEmail(identity.EmailWithdraw, keys[0], victim, &m); err != nil {
				t.Fatal(err)
			}
			e.storeKey(keys[1], uid(victim))
			wantCode(t, e.requestEmail(identity.EmailVerify, keys[1], victim, &m), identity.CodeRecipientCapped)
		}},
		{"the hour ends the cap", func(t *testing.T, e *env) {
			withMailCap(e, 1)
			var m mailbox
			e.storeKey(keys[0], uid(victim))
			e.storeKey(keys[1], uid(victim))
			if err := e.requestEmail(identity.EmailVerify, keys[0], victim, &m); err != nil {
				t.Fatal(err)
			}
			e.clock = e.clock.Add(identity.RecipientWindow - time.Second)
			wantCode(t, e.requestEmail(identity.EmailVerify, keys[1], victim, &m), identity.CodeRecipientCapped)
			e.clock = e.clock.Add(time.Second)
			if err := e.requestEmail(identity.EmailVerify, keys[1], victim, &m); err != nil {
				t.Errorf("an hour after the first mail: %v", err)
			}
		}},
		{"a mail that could not be sent does not count", func(t *testing.T, e *env) {
			withMailCap(e, 1)
			e.storeKey(keys[0], uid(victim))
			e.storeKey(keys[1], uid(victim))
			m := mailbox{fail: errors.New("connection refused")}
			wantCode(t, e.requestEmail(identity.EmailVerify, keys[0], victim, &m), identity.CodeMailUnavailable)
			m.fail = nil
			if err := e.requestEmail(identity.EmailVerify, keys[1], victim, &m); err != nil {
				t.Errorf("after a failed mail: %v", err)
			}
		}},
		{"the window of one key comes before the cap", func(t *testing.T, e *env) {
			withMailCap(e, 1)
			var m mailbox
			e.storeKey(keys[0], uid(victim))
			e.requestEmail(identity.EmailVerify, keys[0], victim, &m)
			wantCode(t, e.requestEmail(identity.EmailVerify, keys[0], victim, &m), identity.CodeRateLimited)
		}},
		{"a negative cap sends every mail", func(t *testing.T, e *env) {
			withMailCap(e, -1)
			var m mailbox
			for _, k := range keys {
				e.storeKey(k, uid(victim))
				if err := e.requestEmail(identity.EmailVerify, k, victim, &m); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, newEnv(t)) })
	}
}
