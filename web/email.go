// email.go: email addresses in the browser, as keys.openpgp.org does it.
// The upload result lists a key's addresses with a button that mails a
// verification link; the link opens a page that names the address, the
// key and the action, and one click (a POST: mail scanners follow links
// with GET) follows it. The manage flow mails a link to an address of a
// key; that link opens the key's manage page, which withdraws published
// addresses and starts the key's deletion.
//
// Every mail goes through Deps.Emails (identity.Service's RequestEmail,
// with its per-address window and per-recipient cap) and Deps.Mailer
// (package maillink's mails), as the VKS API's do; the pages add a
// per-client limit of their own.

package web

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/maillink"
	"github.com/kith-keyserver/kith/identity/session"
)

// Emails is what the email pages need of the identity service
// (*identity.Service is one): mailed links, and the key deletion the
// manage page offers.
type Emails interface {
	maillink.Pending
	// RequestEmail mails a link (verify, withdraw or manage).
	RequestEmail(ctx context.Context, req identity.EmailRequest) error
	// EmailLink says what a link does without following it;
	// ConfirmEmail follows it.
	EmailLink(ctx context.Context, key identity.Factor, token string) (identity.EmailConfirmation, error)
	ConfirmEmail(ctx context.Context, key identity.Factor, token string) (identity.EmailConfirmation, error)
	// ManageLink checks a manage link; WithdrawWithManageLink withdraws
	// an address with one.
	ManageLink(ctx context.Context, key identity.Factor, token string) (identity.EmailConfirmation, error)
	WithdrawWithManageLink(ctx context.Context, key identity.Factor, token string, email identity.Factor) (identity.EmailConfirmation, error)
	// IssueKeyDeletion and DeleteKey delete a key with a statement its
	// primary key signs.
	IssueKeyDeletion(ctx context.Context, f identity.Factor) (*identity.Challenge, error)
	DeleteKey(ctx context.Context, statement, signature []byte) (identity.Factor, identity.BlockOutcome, error)
}

// DefaultMailRequestsPerMinute is how many mail requests (one button
// each) one client (package ratelimit's) may make a minute unless
// Options say otherwise: as the VKS API's.
const DefaultMailRequestsPerMinute = 10

// maxManageKeys caps the keys one manage request by address mails links
// for.
const maxManageKeys = 5

// addressView is one address of a key with its status (maillink's).
type addressView struct {
	Email  string
	Status string
}

// emailsView is a key's addresses on the upload result and the pages
// after a mail button.
type emailsView struct {
	Fingerprint string
	Addresses   []addressView
	// Notice says what a button did; Error why it did nothing.
	Notice, Error string
}

// mailEnabled reports whether the pages mail links.
func (h *Handler) mailEnabled() bool {
	return h.deps.Emails != nil && h.deps.Mailer != nil && h.deps.VerifiedEmails != nil
}

// addresses returns the stored key's addresses with their status, in
// the order of its user IDs.
func (h *Handler) addresses(ctx context.Context, k *keys.Stored) ([]addressView, error) {
	st, err := maillink.Statuses(ctx, k, h.deps.VerifiedEmails, h.deps.Emails)
	if err != nil {
		return nil, fmt.Errorf("web: addresses: %w", err)
	}
	var out []addressView
	for _, u := range k.UserIDs {
		if s, ok := st[u.Email]; ok && !slices.ContainsFunc(out, func(a addressView) bool { return a.Email == u.Email }) {
			out = append(out, addressView{Email: u.Email, Status: s})
		}
	}
	return out, nil
}

// uploadAddresses adds each stored key's addresses to the upload
// results.
func (h *Handler) uploadAddresses(ctx context.Context, results []uploadResult) {
	if !h.mailEnabled() {
		return
	}
	for i, res := range results {
		if res.Fingerprint == "" || res.Result == "rejected" || res.Result == "error" {
			continue
		}
		k, err := h.storedKey(ctx, res.Fingerprint)
		if err != nil || k == nil {
			if err != nil {
				h.log.WarnContext(ctx, "web: upload: addresses", slog.Any("error", err))
			}
			continue
		}
		a, err := h.addresses(ctx, k)
		if err != nil {
			h.log.WarnContext(ctx, "web: upload: addresses", slog.Any("error", err))
			continue
		}
		results[i].Addresses = a
	}
}

// storedKey returns the stored key with the fingerprint (hex), nil when
// none is stored or the fingerprint is malformed.
func (h *Handler) storedKey(ctx context.Context, fpr string) (*keys.Stored, error) {
	f, err := identity.ParsePGPFingerprint(strings.ToUpper(strings.Join(strings.Fields(fpr), "")))
	if err != nil {
		return nil, nil
	}
	fp, err := hex.DecodeString(f.Value)
	if err != nil {
		return nil, nil
	}
	return h.findKey(ctx, fp, false)
}

// mailPost begins a form's POST that mails links: the CSRF check of the
// request's session (or visitor cookie), then a 404 saying noMail where
// the pages mail nothing. It returns the answer's page, titled title,
// whose forms carry the token, or false having answered.
func (h *Handler) mailPost(w http.ResponseWriter, r *http.Request, title, noMail string) (page, bool) {
	s, ok := h.postSession(w, r)
	if !ok {
		return page{}, false
	}
	if !h.mailEnabled() {
		h.fail(w, r, http.StatusNotFound, "No mail", noMail)
		return page{}, false
	}
	p := h.pageFor(w, r, s, title)
	p.CSRF = h.csrfToken(w, r, s)
	return p, true
}

// serveUploadEmail answers a mail button of the upload result: a
// verification mail to one address of the key.
func (h *Handler) serveUploadEmail(w http.ResponseWriter, r *http.Request) {
	p, ok := h.mailPost(w, r, "Verify an address", "This server does not mail verification links.")
	if !ok {
		return
	}
	k, err := h.storedKey(r.Context(), r.PostFormValue("fingerprint"))
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if k == nil {
		h.fail(w, r, http.StatusNotFound, "No such key", "No key with that fingerprint is stored: upload it first.")
		return
	}
	key := identity.PGPFactor(k.Fingerprint)
	v := emailsView{Fingerprint: key.Value}
	addr := strings.ToLower(strings.TrimSpace(r.PostFormValue("email")))
	status := http.StatusOK
	if !h.mailLimit.Allow(w, r) {
		status, v.Error = http.StatusTooManyRequests, "Too many requests from your network: wait a minute, then try again. No mail was sent."
	} else {
		status, v.Notice, v.Error = h.requestMail(r, identity.EmailVerify, key, addr)
	}
	if v.Addresses, err = h.addresses(r.Context(), k); err != nil {
		h.internal(w, r, err)
		return
	}
	h.render(w, r, status, mailSentPage(p, v))
}

// requestMail asks for one mail and says what happened, for people: a
// notice when a mail went out (or one is still out), else an error and
// its HTTP status.
func (h *Handler) requestMail(r *http.Request, action identity.EmailAction, key identity.Factor, addr string) (int, string, string) {
	err := h.deps.Emails.RequestEmail(r.Context(), identity.EmailRequest{Action: action, Key: key,
		Email: identity.EmailFactor(addr), Send: h.deps.Mailer.Sender(action, key, addr)})
	sent := "A mail went to " + addr + ". Open the link in it within " + maillink.LinkLifetime() + " and confirm there."
	if action == identity.EmailManage {
		sent = "A mail with a link to this key's manage page went to " + addr + "."
	}
	var e *identity.Error
	errors.As(err, &e)
	switch identity.CodeOf(err) {
	case "":
		if err != nil {
			h.log.ErrorContext(r.Context(), "web: request mail", slog.Any("error", err))
			return http.StatusInternalServerError, "", "The server failed; no mail was sent. Try again later."
		}
		h.log.InfoContext(r.Context(), "web: mail requested", slog.String("action", string(action)), slog.String("fingerprint", key.Value))
		return http.StatusOK, sent, ""
	case identity.CodeRateLimited:
		return http.StatusOK, "A mail went to " + addr + " less than " + strconv.Itoa(int(identity.EmailWindow.Minutes())) +
			" minutes ago: follow the link in it (and look in your spam folder). No second mail was sent.", ""
	case identity.CodeRecipientCapped:
		return http.StatusTooManyRequests, "", addr + " has had the most mails this server sends one address in an hour. No mail was sent: try again in an hour."
	case identity.CodeMailUnavailable:
		h.log.WarnContext(r.Context(), "web: mail not sent", slog.Any("error", err))
		return http.StatusServiceUnavailable, "", "The mail server is unavailable: nothing was sent to " + addr + ". Try again later."
	case identity.CodeBadFactor:
		return http.StatusBadRequest, "", "That is not an email address."
	}
	return http.StatusBadRequest, "", refusalText(e) + ". No mail was sent."
}

// linkView is what the page a mailed link opens shows.
type linkView struct {
	Action      identity.EmailAction
	Email       string
	Fingerprint string
	// Path is the link's path, where its form posts.
	Path string
}

// linkFactor reads the key of a link's path.
func (h *Handler) linkFactor(w http.ResponseWriter, r *http.Request) (identity.Factor, bool) {
	if !h.mailEnabled() {
		h.fail(w, r, http.StatusNotFound, "Not found", "This server does not mail links.")
		return identity.Factor{}, false
	}
	key, err := identity.ParsePGPFingerprint(r.PathValue("fpr"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "Not a link from this server", "The link's key fingerprint is malformed: copy the whole link from the mail.")
		return identity.Factor{}, false
	}
	return key, true
}

// linkRefusal shows why a link does not work.
func (h *Handler) linkRefusal(w http.ResponseWriter, r *http.Request, err error) {
	code := identity.CodeOf(err)
	if code == "" {
		h.internal(w, r, err)
		return
	}
	status := http.StatusBadRequest
	switch code {
	case identity.CodeTokenUsed, identity.CodeTokenExpired:
		status = http.StatusGone
	case identity.CodeUnknownToken:
		status = http.StatusNotFound
	}
	var e *identity.Error
	errors.As(err, &e)
	h.fail(w, r, status, "This link does not work", refusalText(e)+". Ask for a new mail on the key's manage page: /manage.")
}

// serveEmailLink shows what a mailed link does and the button that does
// it; opening it changes nothing.
func (h *Handler) serveEmailLink(w http.ResponseWriter, r *http.Request) {
	key, ok := h.linkFactor(w, r)
	if !ok {
		return
	}
	c, err := h.deps.Emails.EmailLink(r.Context(), key, r.PathValue("token"))
	if err != nil {
		h.linkRefusal(w, r, err)
		return
	}
	if c.Action == identity.EmailManage {
		http.Redirect(w, r, maillink.LinkPath(c.Action, c.Key, r.PathValue("token")), http.StatusSeeOther)
		return
	}
	title := "Confirm your address"
	if c.Action == identity.EmailWithdraw {
		title = "Withdraw your address"
	}
	p := h.page(w, r, title)
	h.render(w, r, http.StatusOK, emailLinkPage(p, linkView{Action: c.Action, Email: c.Email.Value, Fingerprint: c.Key.Value, Path: r.URL.Path}))
}

// serveEmailConfirm follows a mailed link. It takes no CSRF token: the
// link's token is the secret a forged form would lack.
func (h *Handler) serveEmailConfirm(w http.ResponseWriter, r *http.Request) {
	key, ok := h.linkFactor(w, r)
	if !ok {
		return
	}
	c, err := h.deps.Emails.ConfirmEmail(r.Context(), key, r.PathValue("token"))
	if err != nil {
		h.linkRefusal(w, r, err)
		return
	}
	h.log.InfoContext(r.Context(), "web: mailed link followed", slog.String("action", string(c.Action)), slog.String("fingerprint", c.Key.Value), slog.Int64("seq", c.Seq))
	title := "Address published"
	if c.Action == identity.EmailWithdraw {
		title = "Address withdrawn"
	}
	p := h.page(w, r, title)
	h.render(w, r, http.StatusOK, emailDonePage(p, linkView{Action: c.Action, Email: c.Email.Value, Fingerprint: c.Key.Value}))
}

// serveManageForm asks for an address or a fingerprint.
func (h *Handler) serveManageForm(w http.ResponseWriter, r *http.Request) {
	s, err := h.current(r)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	p := h.pageFor(w, r, s, "Manage your key")
	p.CSRF = h.csrfToken(w, r, s)
	h.render(w, r, http.StatusOK, manageRequestPage(p, "", "", ""))
}

// serveManageRequest mails manage links: for an address, to it, for each
// key (up to maxManageKeys) that carries it; for a fingerprint, to each
// published address of the key.
func (h *Handler) serveManageRequest(w http.ResponseWriter, r *http.Request) {
	p, ok := h.mailPost(w, r, "Manage your key", "This server does not mail links.")
	if !ok {
		return
	}
	q := strings.TrimSpace(r.PostFormValue("q"))
	answer := func(status int, notice, problem string) {
		h.render(w, r, status, manageRequestPage(p, q, notice, problem))
	}
	if q == "" {
		answer(http.StatusBadRequest, "", "Enter an email address or a key fingerprint.")
		return
	}
	if !h.mailLimit.Allow(w, r) {
		answer(http.StatusTooManyRequests, "", "Too many requests from your network: wait a minute, then try again. No mail was sent.")
		return
	}
	type mailTo struct {
		key  identity.Factor
		addr string
	}
	var mails []mailTo
	var notice string
	if strings.Contains(q, "@") {
		addr := strings.ToLower(q)
		found, _, err := h.deps.Keys.FindKeys(r.Context(), keys.Query{Email: addr, Limit: maxManageKeys, InlineBytes: -1})
		if err != nil {
			h.internal(w, r, err)
			return
		}
		for _, k := range found {
			if slices.ContainsFunc(k.UserIDs, func(u keys.StoredUserID) bool { return u.Email == addr && !u.Revoked }) {
				mails = append(mails, mailTo{identity.PGPFactor(k.Fingerprint), addr})
			}
		}
		// The same answer whether or not a key carries the address: the
		// page tells no one which addresses have keys here.
		notice = "If a key on this server carries " + addr + ", a mail with a link to its manage page went to that address."
	} else {
		k, err := h.storedKey(r.Context(), q)
		if err != nil {
			h.internal(w, r, err)
			return
		}
		if k == nil {
			answer(http.StatusNotFound, "", "No key with that fingerprint is stored here. Enter the full fingerprint (40 or 64 hex digits), or an email address of the key.")
			return
		}
		addrs, err := h.addresses(r.Context(), k)
		if err != nil {
			h.internal(w, r, err)
			return
		}
		var to []string
		for _, a := range addrs {
			if a.Status == maillink.StatusPublished {
				mails = append(mails, mailTo{identity.PGPFactor(k.Fingerprint), a.Email})
				to = append(to, a.Email)
			}
		}
		if len(to) == 0 {
			answer(http.StatusOK, "", "No address of this key is published, so there is nowhere to mail a manage link. Enter one of the key's addresses instead: the link goes to it.")
			return
		}
		notice = "A mail with a link to the key's manage page went to its published " + addressesWord(len(to)) + " (" + strings.Join(to, ", ") + ")."
	}
	byAddress := strings.Contains(q, "@")
	for _, m := range mails {
		status, _, problem := h.requestMail(r, identity.EmailManage, m.key, m.addr)
		if problem == "" {
			continue
		}
		if byAddress {
			// Shown, a refusal would tell that a key here carries the
			// address: the asker gets the same notice either way.
			h.log.InfoContext(r.Context(), "web: manage link not sent", slog.Int("status", status), slog.String("fingerprint", m.key.Value))
			continue
		}
		answer(status, "", problem)
		return
	}
	answer(http.StatusOK, notice, "")
}

// addressesWord is "address" or "addresses", for n of them.
func addressesWord(n int) string {
	if n == 1 {
		return "address"
	}
	return "addresses"
}

// manageView is a key's manage page.
type manageView struct {
	Fingerprint string
	// Email is the address the manage link was mailed to.
	Email     string
	Addresses []addressView
	// Path is the manage link's path, below which its forms post.
	Path          string
	Notice, Error string
}

// manageLink checks the manage link of the request's path and returns
// the page's view (without a notice) and its key, answering itself when
// it cannot.
func (h *Handler) manageLink(w http.ResponseWriter, r *http.Request) (manageView, *keys.Stored, bool) {
	key, ok := h.linkFactor(w, r)
	if !ok {
		return manageView{}, nil, false
	}
	c, err := h.deps.Emails.ManageLink(r.Context(), key, r.PathValue("token"))
	if err != nil {
		h.linkRefusal(w, r, err)
		return manageView{}, nil, false
	}
	fp, _ := hex.DecodeString(c.Key.Value)
	k, err := h.findKey(r.Context(), fp, false)
	if err != nil {
		h.internal(w, r, err)
		return manageView{}, nil, false
	}
	if k == nil {
		h.fail(w, r, http.StatusNotFound, "No such key", "The key of this link is no longer stored here.")
		return manageView{}, nil, false
	}
	return manageView{Fingerprint: c.Key.Value, Email: c.Email.Value,
		Path: maillink.LinkPath(identity.EmailManage, c.Key, r.PathValue("token"))}, k, true
}

// serveManage shows a key's manage page: its addresses, withdraw buttons
// for the published ones, and the deletion button.
func (h *Handler) serveManage(w http.ResponseWriter, r *http.Request) {
	v, k, ok := h.manageLink(w, r)
	if !ok {
		return
	}
	s, err := h.current(r)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	h.renderManage(w, r, s, http.StatusOK, v, k)
}

// renderManage renders the manage page v of key k for the request's
// session s (nil for a visitor).
func (h *Handler) renderManage(w http.ResponseWriter, r *http.Request, s *session.Session, status int, v manageView, k *keys.Stored) {
	var err error
	if v.Addresses, err = h.addresses(r.Context(), k); err != nil {
		h.internal(w, r, err)
		return
	}
	p := h.pageFor(w, r, s, "Manage your key")
	p.CSRF = h.csrfToken(w, r, s)
	h.render(w, r, status, managePage(p, v))
}

// serveManageWithdraw withdraws one published address with the manage
// link.
func (h *Handler) serveManageWithdraw(w http.ResponseWriter, r *http.Request) {
	s, ok := h.postSession(w, r)
	if !ok {
		return
	}
	v, k, ok := h.manageLink(w, r)
	if !ok {
		return
	}
	addr := strings.ToLower(strings.TrimSpace(r.PostFormValue("email")))
	key := identity.PGPFactor(k.Fingerprint)
	_, err := h.deps.Emails.WithdrawWithManageLink(r.Context(), key, r.PathValue("token"), identity.EmailFactor(addr))
	status := http.StatusOK
	switch identity.CodeOf(err) {
	case "":
		if err != nil {
			h.internal(w, r, err)
			return
		}
		h.log.InfoContext(r.Context(), "web: address withdrawn with a manage link", slog.String("fingerprint", key.Value))
		v.Notice = addr + " is no longer published for this key: searches by that address no longer find it."
	default:
		var e *identity.Error
		errors.As(err, &e)
		status, v.Error = http.StatusBadRequest, "Not withdrawn: "+refusalText(e)+"."
	}
	h.renderManage(w, r, s, status, v, k)
}

// serveManageDelete starts the key's deletion: the statement its primary
// key signs.
func (h *Handler) serveManageDelete(w http.ResponseWriter, r *http.Request) {
	s, ok := h.postSession(w, r)
	if !ok {
		return
	}
	v, _, ok := h.manageLink(w, r)
	if !ok {
		return
	}
	key, _ := identity.ParsePGPFingerprint(v.Fingerprint)
	c, err := h.deps.Emails.IssueKeyDeletion(r.Context(), key)
	if err != nil {
		h.refusal(w, r, "The key cannot be deleted", err)
		return
	}
	p := h.pageFor(w, r, s, "Delete your key")
	p.CSRF = h.csrfToken(w, r, s)
	sv := deleteSignView(c)
	h.offerDownload(&sv, c.Statement)
	h.render(w, r, http.StatusOK, signPage(p, sv))
}

// deleteSignView is the sign page of a key deletion statement.
func deleteSignView(c *identity.Challenge) signView {
	return signView{Kind: string(c.Factor.Kind), Factor: c.Factor.Value, Statement: string(c.Statement),
		Encoded: base64.StdEncoding.EncodeToString(c.Statement), Command: "gpg --local-user " + c.Factor.Value + "! --clearsign " + statementFile,
		Action: "/manage/delete", Intro: "To delete the key", Button: "Delete the key for good"}
}

// serveManageDeleteVerify deletes the key with the signed statement.
func (h *Handler) serveManageDeleteVerify(w http.ResponseWriter, r *http.Request) {
	if !h.mailEnabled() {
		h.fail(w, r, http.StatusNotFound, "Not found", "This server does not delete keys from its pages.")
		return
	}
	c, statement, sig, ok := h.signedForm(w, r, identity.PurposeDeleteKey)
	if !ok {
		return
	}
	v := deleteSignView(c)
	if sig == nil {
		v.Error = "Paste the signature first."
		h.signAgain(w, r, c, v, http.StatusBadRequest, nil)
		return
	}
	f, out, err := h.deps.Emails.DeleteKey(r.Context(), statement, sig)
	if err != nil {
		h.signAgain(w, r, c, v, http.StatusBadRequest, err)
		return
	}
	h.log.InfoContext(r.Context(), "web: key deleted by its holder", slog.String("fingerprint", f.Value), slog.String("outcome", string(out)))
	p := h.page(w, r, "Key deleted")
	h.render(w, r, http.StatusOK, keyDeletedPage(p, f.Value))
}
