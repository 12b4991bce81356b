package identity_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/inprocess"
)

// TestCorroboratedKeyEmailsNeedTheKeyAndTheAccountProvenForOneIdentity:
// a key's user-ID email is corroborated only when a provider verified it
// for an account proven for the same identity as the key; another key
// naming the address, or an email the provider did not assert, is not.
func TestCorroboratedKeyEmailsNeedTheKeyAndTheAccountProvenForOneIdentity(t *testing.T) {
	ctx := context.Background()
	st := inprocess.New()
	svc, err := identity.NewService(st, inprocess.NewVerifier(), identity.ServiceOptions{Server: "Kith test"})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := identity.ParsePGPFingerprint(strings.Repeat("AB", 20))
	stranger, _ := identity.ParsePGPFingerprint(strings.Repeat("CD", 20))
	acct := identity.OIDCFactor("https://accounts.example", "alice-1")
	home, work := identity.EmailFactor("alice@example.org"), identity.EmailFactor("alice@work.example")
	now := time.Now()
	err = st.Update(ctx, func(ctx context.Context, tx identity.Tx) error {
		if _, err := tx.CreateIdentity(ctx, "alice", now); err != nil {
			return err
		}
		for _, e := range []*identity.Evidence{
			{Method: identity.MethodOIDCLogin, Purpose: identity.PurposeClaim, Handle: "alice", From: acct, Created: now},
			{Method: identity.MethodOIDCEmailVerified, Handle: "alice", From: acct, To: home, Created: now},
			{Method: identity.MethodPGPChallenge, Purpose: identity.PurposeAdd, Handle: "alice", From: acct, To: key, Created: now},
			{Method: identity.MethodPGPChallenge, Purpose: identity.PurposeAdd, Handle: "alice", From: key, Created: now},
			{Method: identity.MethodPGPUIDSelfSig, From: key, To: home, Created: now},
			{Method: identity.MethodPGPUIDSelfSig, From: key, To: work, Created: now},
			{Method: identity.MethodPGPUIDSelfSig, From: stranger, To: home, Created: now},
		} {
			if err := tx.Append(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := svc.CorroboratedKeyEmails(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"alice@example.org"}) {
		t.Errorf("alice's key: corroborated %q, want only alice@example.org", got)
	}
	got, err = svc.CorroboratedKeyEmails(ctx, stranger)
	if err != nil || len(got) != 0 {
		t.Errorf("a stranger's key naming the address: corroborated %q (%v), want none", got, err)
	}
}
