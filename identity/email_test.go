package identity_test

import (
	"context"
	"errors"
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
