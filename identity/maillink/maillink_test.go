package maillink_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/maillink"
)

var key = identity.Factor{Kind: identity.KindPGP, Value: "85BE85484D7D10932441F2E3D982BBEAAC5ED154"}

func TestEachActionsMailSaysWhatTheLinkDoes(t *testing.T) {
	for _, tc := range []struct {
		action        identity.EmailAction
		path, subject string
		says          string
	}{
		{identity.EmailVerify, "/email/confirm/", "Verify erin@example.org", "to publish the OpenPGP key"},
		{identity.EmailWithdraw, "/email/confirm/", "Withdraw erin@example.org", "to stop publishing"},
		{identity.EmailManage, "/manage/", "Manage your OpenPGP key", "withdraw any of them or ask for the key's deletion"},
	} {
		path := maillink.LinkPath(tc.action, key, "TOKEN")
		if path != tc.path+key.Value+"/TOKEN" {
			t.Errorf("%s: path %s", tc.action, path)
		}
		m := maillink.Compose("Kith <https://keys.example.org>", tc.action, key, "erin@example.org", "https://keys.example.org"+path)
		if m.To != "erin@example.org" || !strings.HasPrefix(m.Subject, tc.subject) {
			t.Errorf("%s: to %s, subject %q", tc.action, m.To, m.Subject)
		}
		for _, want := range []string{tc.says, "85BE 8548 4D7D 1093 2441 F2E3 D982 BBEA AC5E D154", "https://keys.example.org" + path, "24 hours", "ignore this mail"} {
			if !strings.Contains(m.Body, want) {
				t.Errorf("%s: the mail lacks %q:\n%s", tc.action, want, m.Body)
			}
		}
	}
}

type fakeReader struct{ verified, pending []string }

func (f fakeReader) VerifiedKeys(ctx context.Context, email string) ([]identity.Factor, error) {
	return nil, nil
}
func (f fakeReader) VerifiedEmails(ctx context.Context, fp string) ([]string, error) {
	return f.verified, nil
}
func (f fakeReader) PendingEmails(ctx context.Context, key identity.Factor, emails []string) ([]string, error) {
	var out []string
	for _, e := range emails {
		for _, p := range f.pending {
			if e == p {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

func TestStatusesOfAKeysAddresses(t *testing.T) {
	k := &keys.Stored{Fingerprint: []byte{0x85, 0xBE}, UserIDs: []keys.StoredUserID{
		{Email: "a@example.org"},
		{Email: "b@example.org"},
		{Email: "c@example.org"},
		{Email: "d@example.org", Revoked: true},
		{Email: "e@example.org", Revoked: true}, {Email: "e@example.org"},
		{Email: ""}, // an ambiguous user ID: no address
	}}
	f := fakeReader{verified: []string{"a@example.org"}, pending: []string{"b@example.org", "a@example.org"}}
	got, err := maillink.Statuses(context.Background(), k, f, f)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a@example.org": "published", "b@example.org": "pending", "c@example.org": "unpublished",
		"d@example.org": "revoked", "e@example.org": "unpublished"}
	if len(got) != len(want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
	for a, st := range want {
		if got[a] != st {
			t.Errorf("%s: %q, want %q", a, got[a], st)
		}
	}
}

func TestMailableOnlyWhereALinkCanChangeSomething(t *testing.T) {
	for _, c := range []struct {
		action identity.EmailAction
		status string
		want   bool
	}{
		{identity.EmailVerify, maillink.StatusUnpublished, true},
		{identity.EmailVerify, maillink.StatusPending, true},
		{identity.EmailVerify, maillink.StatusPublished, false},
		{identity.EmailVerify, maillink.StatusRevoked, false},
		{identity.EmailVerify, "", false},
		{identity.EmailWithdraw, maillink.StatusPublished, true},
		{identity.EmailWithdraw, maillink.StatusUnpublished, false},
		{identity.EmailWithdraw, maillink.StatusPending, false},
		{identity.EmailWithdraw, maillink.StatusRevoked, false},
		{identity.EmailManage, maillink.StatusPublished, false},
	} {
		if got := maillink.Mailable(c.action, c.status); got != c.want {
			t.Errorf("Mailable(%s, %q) = %v, want %v", c.action, c.status, got, c.want)
		}
	}
}
