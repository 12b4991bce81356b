// account.go: the account page (/account) and its forms: linking SSH and
// OpenPGP keys by signing a challenge, unlinking factors, ending sessions.
// A session logged in with an OpenID account approves each change with a
// consent login at its provider (consent.go), the "factor already proven"
// of each link; one logged in by key signs each change with that key.

package web

import (
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/session"
	"github.com/kith-keyserver/kith/ssh"
)

// doneMessages are the notes the account page shows after an action (by
// a fixed key, so that no text from a URL reaches the page).
var doneMessages = map[string]string{
	"created":        "Welcome: your identity is created, with the account you logged in with as its first factor.",
	"account-linked": "The account is linked to your identity.",
	"already-linked": "That account was already linked to your identity.",
	"same-account":   "That is the account you are logged in with; nothing changed.",
	"key-linked":     "The key is linked to your identity.",
	"unlinked":       "The factor is unlinked.",
}

// sessionView is one session in the account page's list.
type sessionView struct {
	Provider string
	Created  string
	LastSeen string
	Expires  string
	Current  bool
}

// accountView is the account page.
type accountView struct {
	Handle  string
	Created string
	Done    string
	Factors []factorView
	// Certificates are the SSH certificates issued for the identity.
	Certificates []certificateView
	Sessions     []sessionView
	Providers    []string
	// ByKey: the session logged in with a key, whose signature each
	// change needs (there is no ID token to stand for consent).
	ByKey bool
}

// signView is the page that shows a statement to sign.
type signView struct {
	Kind   string // ssh or pgp
	Factor string
	// Label is an SSH key's comment, shown with the key once linked.
	Label     string
	Statement string
	// Encoded is the statement in base64, for the form to send back
	// byte for byte.
	Encoded string
	Command string
	// Download is the statement's own URL (served as a file, byte for
	// byte); OneLiner fetches it and signs it in one command.
	Download, OneLiner string
	Error              string
	// Action is where the form goes (the account page's link when
	// empty); Intro starts the sentence naming the factor ("To link");
	// Button labels the submit button.
	Action, Intro, Button string
	// By is the key a session logged in with, which must co-sign a link
	// (empty for OpenID Connect sessions); ByCommand signs with it.
	By, ByKind, ByCommand string
}

// requireUser returns the logged-in session, or sends the visitor to log
// in.
func (h *Handler) requireUser(w http.ResponseWriter, r *http.Request) (*session.Session, *loginData, bool) {
	s, err := h.user(r)
	if err != nil {
		h.internal(w, r, err)
		return nil, nil, false
	}
	if s == nil {
		if r.Method == http.MethodGet {
			http.Redirect(w, r, "/login?next="+r.URL.EscapedPath(), http.StatusSeeOther)
		} else {
			h.fail(w, r, http.StatusForbidden, "Not logged in", "Your session has ended (you logged out, or it expired). Nothing was changed. Log in again.")
		}
		return nil, nil, false
	}
	l, err := decodeLogin(s.Login)
	if err != nil {
		h.internal(w, r, err)
		return nil, nil, false
	}
	return s, l, true
}

// serveAccount shows the account page.
func (h *Handler) serveAccount(w http.ResponseWriter, r *http.Request) {
	s, l, ok := h.requireUser(w, r)
	if !ok {
		return
	}
	v, err := h.accountView(r, s, l)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	v.Done = doneMessages[r.URL.Query().Get("done")]
	h.render(w, r, http.StatusOK, accountPage(h.pageFor(w, r, s, "Your account"), v))
}

func (h *Handler) accountView(r *http.Request, s *session.Session, l *loginData) (accountView, error) {
	ctx := r.Context()
	id, a, recs, err := h.deps.Identities.Lookup(ctx, string(s.Handle))
	if err != nil {
		return accountView{}, err
	}
	v := accountView{Handle: string(id.Handle), Created: date(id.Created), Factors: factorViews(a, recs, true), ByKey: l.byKey(),
		Certificates: certificateViews(a, recs, h.now())}
	for i := range v.Factors {
		f := &v.Factors[i]
		f.Current = f.Kind == string(identity.KindOIDC) && f.Value == oidcValueView(s.Account) ||
			f.Kind == string(s.Account.Kind) && f.Value == s.Account.Value
		f.Unlinkable = !v.ByKey && f.Parent == "" && !f.Current && f.Kind != string(identity.KindEmail) &&
			(f.Level == "proven" || f.Level == "claimed" || f.Level == "expired")
	}
	list, err := h.deps.Sessions.IdentitySessions(ctx, s.Handle, h.now())
	if err != nil {
		return accountView{}, err
	}
	for _, o := range list {
		v.Sessions = append(v.Sessions, sessionView{
			Provider: o.Provider, Created: o.Created.Format("2006-01-02 15:04 MST"),
			LastSeen: o.LastSeen.Format("2006-01-02 15:04 MST"), Expires: date(o.Expires),
			Current: string(o.TokenHash) == string(s.TokenHash),
		})
	}
	if h.deps.Providers != nil && !v.ByKey {
		v.Providers = h.deps.Providers.Names()
	}
	return v, nil
}

// oidcValueView is how factorViews shows an OIDC account's value.
func oidcValueView(f identity.Factor) string {
	iss, sub, _ := strings.Cut(f.Value, " ")
	return sub + " at " + iss
}

// sshCommand and pgpCommand are what the sign page tells people to run,
// on the file statementFile.
const (
	statementFile = "kith-statement.txt"
	sshCommand    = "ssh-keygen -Y sign -n kith -f ~/.ssh/id_ed25519 " + statementFile
	pgpCommand    = "gpg --clearsign " + statementFile
)

// serveChallenge issues an add statement for an SSH key or OpenPGP key
// and shows it with the command that signs it.
func (h *Handler) serveChallenge(w http.ResponseWriter, r *http.Request) {
	s, l, ok := h.requireUser(w, r)
	if !ok || !h.checkCSRF(w, r, s) {
		return
	}
	var f identity.Factor
	var label string
	kind := r.PostFormValue("kind")
	switch kind {
	case "ssh":
		k, err := ssh.ParseAuthorizedKey([]byte(strings.TrimSpace(r.PostFormValue("key"))))
		if err != nil {
			h.fail(w, r, http.StatusBadRequest, "Not an SSH key", "Paste one public key line, as in ~/.ssh/id_ed25519.pub.")
			return
		}
		blob := k.Underlying().Marshal()
		f = identity.SSHFactor(k.Fingerprint().String(), blob)
		label = ssh.SanitizeComment(k.Comment)
	case "pgp":
		var err error
		if f, err = identity.ParsePGPFingerprint(r.PostFormValue("fingerprint")); err != nil {
			h.fail(w, r, http.StatusBadRequest, "Not a fingerprint", "Give the key's fingerprint: 40 or 64 hex digits, as gpg --fingerprint shows it.")
			return
		}
	default:
		h.fail(w, r, http.StatusBadRequest, "Unknown key type", "Link an SSH key or an OpenPGP key.")
		return
	}
	c, err := h.deps.Identities.IssueChallenge(r.Context(), identity.PurposeAdd, string(s.Handle), f)
	if err != nil {
		h.refusal(w, r, "Cannot link this key", err)
		return
	}
	v := signView{Kind: kind, Factor: f.Value, Label: label, Statement: string(c.Statement), Encoded: base64.StdEncoding.EncodeToString(c.Statement)}
	v.Command = commandFor(kind)
	h.offerDownload(&v, c.Statement)
	v.coSign(l)
	h.render(w, r, http.StatusOK, signPage(h.pageFor(w, r, s, "Sign the statement"), v))
}

// coSign asks a session logged in by key for that key's signature too.
func (v *signView) coSign(l *loginData) {
	if l.byKey() {
		v.By, v.ByKind, v.ByCommand = l.KeyValue, string(l.KeyKind), commandFor(string(l.KeyKind))
	}
}

// serveVerify takes the signed statement and links the key.
func (h *Handler) serveVerify(w http.ResponseWriter, r *http.Request) {
	s, l, ok := h.requireUser(w, r)
	if !ok || !h.checkCSRF(w, r, s) {
		return
	}
	statement, err := base64.StdEncoding.DecodeString(r.PostFormValue("statement"))
	c, perr := identity.ParseStatement(statement)
	if err != nil || perr != nil || c.Purpose != identity.PurposeAdd {
		h.fail(w, r, http.StatusBadRequest, "Not a statement", "The form did not carry a statement this server issued. Start again from your account page.")
		return
	}
	if c.Handle != s.Handle {
		h.fail(w, r, http.StatusForbidden, "Another identity's statement", "This statement is for another identity than yours. Nothing was changed.")
		return
	}
	// Browsers send pasted text with CRLF line ends; armor does not care,
	// and OpenPGP's cleartext signatures are over canonical line ends.
	sig := strings.ReplaceAll(strings.TrimSpace(r.PostFormValue("signature")), "\r\n", "\n") + "\n"
	kind := string(c.Factor.Kind)
	again := func(status int, msg string) {
		v := signView{Kind: kind, Factor: c.Factor.Value, Label: ssh.SanitizeComment(r.PostFormValue("label")),
			Statement: string(statement), Encoded: r.PostFormValue("statement"), Error: msg}
		v.Command = commandFor(kind)
		h.offerDownload(&v, statement)
		v.coSign(l)
		h.render(w, r, status, signPage(h.pageFor(w, r, s, "Sign the statement"), v))
	}
	if strings.TrimSpace(sig) == "" {
		again(http.StatusBadRequest, "Paste the signature first.")
		return
	}
	label := ssh.SanitizeComment(r.PostFormValue("label"))
	if !l.byKey() {
		// The session's provider approves the link: a login whose nonce
		// commits to the statement, after which finishConsent links.
		h.beginConsent(w, r, s, pendingConsent{Action: consentAdd, Handle: s.Handle, Statement: string(statement), Signature: sig, Label: label}, "/account")
		return
	}
	bySig := pastedSignature(r.PostFormValue("by_signature"))
	if bySig == nil {
		again(http.StatusBadRequest, "Paste the signature by the key you logged in with too.")
		return
	}
	err = h.deps.Identities.Add(r.Context(), identity.AddRequest{
		Statement: statement,
		New:       &identity.Proof{Signature: []byte(sig)},
		By:        &identity.Proof{Factor: h.byFactor(r, s), Signature: bySig},
		Label:     label,
	})
	if err != nil {
		code := identity.CodeOf(err)
		if code == "" {
			h.internal(w, r, err)
			return
		}
		var e *identity.Error
		errors.As(err, &e)
		status := http.StatusBadRequest
		if code == identity.CodeFactorLinked || code == identity.CodeAlreadyLinked || code == identity.CodeNonceUsed {
			status = http.StatusConflict
		}
		again(status, "Not linked: "+refusalText(e)+".")
		return
	}
	h.log.InfoContext(r.Context(), "web: key linked", slog.String("kind", kind), slog.String("handle", string(s.Handle)))
	http.Redirect(w, r, "/account?done=key-linked", http.StatusSeeOther)
}

// serveUnlink revokes a factor's link, with the session's consent.
func (h *Handler) serveUnlink(w http.ResponseWriter, r *http.Request) {
	s, l, ok := h.requireUser(w, r)
	if !ok || !h.checkCSRF(w, r, s) {
		return
	}
	if l.byKey() {
		h.fail(w, r, http.StatusForbidden, "Not unlinked", keySessionLimit)
		return
	}
	ctx := r.Context()
	_, a, _, err := h.deps.Identities.Lookup(ctx, string(s.Handle))
	if err != nil {
		h.refusal(w, r, "Not unlinked", err)
		return
	}
	st, found := a.Status(identity.Factor{Kind: identity.FactorKind(r.PostFormValue("kind")), Value: r.PostFormValue("value")})
	if !found {
		h.fail(w, r, http.StatusNotFound, "Not linked", "That factor is not linked to your identity. Nothing was changed.")
		return
	}
	if st.Factor.Same(s.Account) {
		h.fail(w, r, http.StatusConflict, "Logged in with it",
			"You are logged in with this account. To unlink it, log in with another linked account first. Nothing was changed.")
		return
	}
	c, err := h.deps.Identities.IssueChallenge(ctx, identity.PurposeRevoke, string(s.Handle), st.Factor)
	if err != nil {
		h.refusal(w, r, "Not unlinked", err)
		return
	}
	// The session's provider approves the unlinking (finishConsent).
	h.beginConsent(w, r, s, pendingConsent{Action: consentRevoke, Handle: s.Handle, Statement: string(c.Statement)}, "/account")
}

// keySessionLimit says what a session opened by a key cannot do.
const keySessionLimit = "You logged in with a key: unlinking and deleting need a signature for each change, which these pages do not take yet. Use kith id revoke HANDLE FACTOR, or log in with an OpenID account. Nothing was changed."

// byFactor is the session's key as the identity holds it (an SSH key
// with its blob), for the service to check its signature.
func (h *Handler) byFactor(r *http.Request, s *session.Session) identity.Factor {
	_, a, _, err := h.deps.Identities.Lookup(r.Context(), string(s.Handle))
	if err == nil {
		if st, ok := a.Status(s.Account); ok {
			return st.Factor
		}
	}
	return s.Account
}

// serveEndSessions logs the identity out everywhere.
func (h *Handler) serveEndSessions(w http.ResponseWriter, r *http.Request) {
	s, _, ok := h.requireUser(w, r)
	if !ok || !h.checkCSRF(w, r, s) {
		return
	}
	n, err := h.deps.Sessions.DeleteIdentitySessions(r.Context(), s.Handle)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	h.setCookie(w, r, sessionCookie, "", 0)
	h.log.InfoContext(r.Context(), "web: logged out everywhere", slog.String("handle", string(s.Handle)), slog.Int64("sessions", n))
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
