// Package maillink owns the mails of mailed links (identity.Service's
// RequestEmail), for every frontend that asks for one: the URL a link
// opens, the text of the mail that carries it, and the publication
// status of a key's addresses that decides which mails make sense. The
// VKS API and the web pages both mail through it, so a mail says the
// same whoever asked. It does not decide who may ask (identity.Service
// does, with its per-address window and per-recipient cap) nor render
// the page a link opens (package web does).
package maillink

import (
	"context"
	"fmt"
	"slices"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/mail"
	"github.com/kith-keyserver/kith/pgp"
)

// The status values of an address, as keys.openpgp.org names them.
const (
	StatusUnpublished = "unpublished" // not verified: not served by email
	StatusPublished   = "published"   // verified by mail
	StatusRevoked     = "revoked"     // the user ID is revoked
	StatusPending     = "pending"     // a mail went out, its link not yet followed
)

// LinkPath is the path a mailed link opens, below the server's public
// URL: /manage/FINGERPRINT/TOKEN for a manage link, else
// /email/confirm/FINGERPRINT/TOKEN.
func LinkPath(action identity.EmailAction, key identity.Factor, token string) string {
	if action == identity.EmailManage {
		return "/manage/" + key.Value + "/" + token
	}
	return "/email/confirm/" + key.Value + "/" + token
}

// Mailer mails links through a mail.Sender.
type Mailer struct {
	// PublicURL is the server's URL as mails link to it, without a
	// trailing slash.
	PublicURL string
	// Server names the server in mails ("Kith <https://keys.example.org>").
	Server string
	// Mail sends the mails.
	Mail mail.Sender
}

// Sender returns the identity.EmailSender that mails addr the link with
// a token for action on key.
func (m *Mailer) Sender(action identity.EmailAction, key identity.Factor, addr string) identity.EmailSender {
	return func(ctx context.Context, token string) error {
		link := m.PublicURL + LinkPath(action, key, token)
		return m.Mail.Send(ctx, Compose(m.Server, action, key, addr, link))
	}
}

// Compose writes the mail for a link. It names the key and says what
// following the link does and what ignoring it does, and nothing about
// other keys or addresses.
func Compose(server string, action identity.EmailAction, key identity.Factor, addr, link string) mail.Message {
	fp := pgp.GroupFingerprint(key.Value)
	within := LinkLifetime()
	switch action {
	case identity.EmailWithdraw:
		return mail.Message{To: addr, Subject: "Withdraw " + addr + " from an OpenPGP key",
			Body: "Someone asked " + server + " to stop publishing the OpenPGP key\n\n    " + fp +
				"\n\nfor the address " + addr + ". To withdraw the address, open this link within " +
				within + " and confirm:\n\n    " + link +
				"\n\nIf you did not ask for this, ignore this mail: nothing changes without the link.\n"}
	case identity.EmailManage:
		return mail.Message{To: addr, Subject: "Manage your OpenPGP key on " + server,
			Body: "Someone asked " + server + " for a link to manage the OpenPGP key\n\n    " + fp +
				"\n\nwhich carries the address " + addr + ". To see which of its addresses are published,\n" +
				"withdraw any of them or ask for the key's deletion, open this link within " +
				within + ":\n\n    " + link +
				"\n\nIf you did not ask for this, ignore this mail: nothing changes without the link.\n"}
	}
	return mail.Message{To: addr, Subject: "Verify " + addr + " for your OpenPGP key",
		Body: "Someone asked " + server + " to publish the OpenPGP key\n\n    " + fp +
			"\n\nfor the address " + addr + ". If this is your key, open this link within " +
			within + " and confirm:\n\n    " + link +
			"\n\nIf it is not your key, ignore this mail: the address is not published for it without the link.\n"}
}

// LinkLifetime is how long a mailed link works (identity.EmailTokenTTL)
// in words, as the mails and the pages that mention it say it.
func LinkLifetime() string { return fmt.Sprintf("%.0f hours", identity.EmailTokenTTL.Hours()) }

// Mailable reports whether a link for action is worth a mail for an
// address whose status (Statuses) is st: a verify link while the address
// is unpublished or pending (a link out may have been lost), a withdraw
// link while it is published; never for a revoked user ID's address, an
// address the key does not carry (st empty), or another action.
func Mailable(action identity.EmailAction, st string) bool {
	switch action {
	case identity.EmailVerify:
		return st == StatusUnpublished || st == StatusPending
	case identity.EmailWithdraw:
		return st == StatusPublished
	}
	return false
}

// Pending is what Statuses needs of the identity service to tell the
// addresses with a verify link out (*identity.Service is one).
type Pending interface {
	PendingEmails(ctx context.Context, key identity.Factor, emails []string) ([]string, error)
}

// Statuses returns the status of each address the stored key's user IDs
// carry (the address pgp.UserIDAddress reads; a user ID without one,
// such as an ambiguous one, adds none): published when verified by mail,
// pending while a verify link is out, revoked when every user ID with it
// is revoked, unpublished otherwise.
func Statuses(ctx context.Context, k *keys.Stored, verified identity.VerifiedEmailReader, pending Pending) (map[string]string, error) {
	fp := identity.PGPFactor(k.Fingerprint)
	out := map[string]string{}
	ver, err := verified.VerifiedEmails(ctx, fp.Value)
	if err != nil {
		return nil, fmt.Errorf("maillink: statuses of %s: %w", fp.Value, err)
	}
	for _, u := range k.UserIDs {
		if u.Email == "" {
			continue
		}
		st := StatusUnpublished
		switch {
		case u.Revoked:
			st = StatusRevoked
		case slices.Contains(ver, u.Email):
			st = StatusPublished
		}
		if old, ok := out[u.Email]; !ok || old == StatusRevoked {
			out[u.Email] = st
		}
	}
	var unpublished []string
	for e, st := range out {
		if st == StatusUnpublished {
			unpublished = append(unpublished, e)
		}
	}
	if len(unpublished) > 0 {
		slices.Sort(unpublished)
		got, err := pending.PendingEmails(ctx, fp, unpublished)
		if err != nil {
			return nil, fmt.Errorf("maillink: statuses of %s: %w", fp.Value, err)
		}
		for _, e := range got {
			out[e] = StatusPending
		}
	}
	return out, nil
}
