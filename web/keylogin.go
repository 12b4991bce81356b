// keylogin.go: the pages that need no OpenID provider: claiming a handle
// with a key (/claim) and logging in with a proven key (/login/key). Each
// issues a statement, shows it with the command that signs it, and takes
// the pasted signature back. A login by key opens the same kind of
// session an OpenID Connect login does; its account is the key, so the
// session ends once the key is no longer proven (see stillLinked).

package web

import (
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/ssh"
)

// keyForm is the form that names a handle and a key.
type keyForm struct {
	Action, Title, Intro, Button string
	Handle, Key                  string
	Error                        string
}

// parseKeyField reads a key as the forms take it: an SSH public key line
// or an OpenPGP fingerprint. It returns the factor and an SSH key's
// comment.
func parseKeyField(s string) (identity.Factor, string, error) {
	s = strings.TrimSpace(s)
	if f, err := identity.ParsePGPFingerprint(s); err == nil {
		return f, "", nil
	}
	k, err := ssh.ParseAuthorizedKey([]byte(s))
	if err != nil || k.Cert != nil || len(k.Options) > 0 {
		return identity.Factor{}, "", errors.New("paste one SSH public key line (the content of ~/.ssh/id_ed25519.pub) or an OpenPGP fingerprint (40 or 64 hex digits)")
	}
	return identity.SSHFactor(k.Fingerprint().String(), k.Underlying().Marshal()), ssh.SanitizeComment(k.Comment), nil
}

func claimForm() keyForm {
	return keyForm{Action: "/claim", Title: "Claim a handle", Button: "Get the statement to sign",
		Intro: "Create an identity with a key you hold: an SSH key or an OpenPGP key (upload an OpenPGP key first). You prove you hold it by signing a statement; no account elsewhere is needed."}
}

func keyLoginForm() keyForm {
	return keyForm{Action: "/login/key", Title: "Log in with a key", Button: "Get the statement to sign",
		Intro: "Log in with a key proven for your identity by signing a login statement. The session lasts until you log out, it expires, or the key is no longer proven."}
}

// visitorPage is the layout data of a page with forms for visitors.
func (h *Handler) visitorPage(w http.ResponseWriter, r *http.Request, title string) page {
	s, err := h.current(r)
	if err != nil {
		h.log.WarnContext(r.Context(), "web: session lookup", slog.Any("error", err))
	}
	p := h.pageFor(w, r, s, title)
	p.CSRF = h.csrfToken(w, r, s)
	return p
}

func (h *Handler) serveClaimForm(w http.ResponseWriter, r *http.Request) {
	f := claimForm()
	f.Handle = r.URL.Query().Get("handle")
	h.render(w, r, http.StatusOK, keyFormPage(h.visitorPage(w, r, f.Title), f))
}

func (h *Handler) serveKeyLoginForm(w http.ResponseWriter, r *http.Request) {
	f := keyLoginForm()
	f.Handle = r.URL.Query().Get("handle")
	h.render(w, r, http.StatusOK, keyFormPage(h.visitorPage(w, r, f.Title), f))
}

// keyChallenge issues a statement for the form's handle and key, or shows
// the form again with the reason.
func (h *Handler) keyChallenge(w http.ResponseWriter, r *http.Request, purpose identity.Purpose, form keyForm) {
	if _, ok := h.postSession(w, r); !ok {
		return
	}
	form.Handle = identity.FoldHandle(strings.TrimSpace(r.PostFormValue("handle")))
	form.Key = r.PostFormValue("key")
	again := func(status int, msg string) {
		form.Error = msg
		h.render(w, r, status, keyFormPage(h.visitorPage(w, r, form.Title), form))
	}
	f, label, err := parseKeyField(form.Key)
	if err != nil {
		again(http.StatusBadRequest, "Not a key: "+err.Error()+".")
		return
	}
	c, err := h.deps.Identities.IssueChallenge(r.Context(), purpose, form.Handle, f)
	if err != nil {
		var e *identity.Error
		if !errors.As(err, &e) {
			h.internal(w, r, err)
			return
		}
		again(http.StatusBadRequest, refusalText(e)+".")
		return
	}
	v := signView{Kind: string(f.Kind), Factor: f.Value, Label: label, Statement: string(c.Statement),
		Encoded: base64.StdEncoding.EncodeToString(c.Statement), Command: commandFor(string(f.Kind))}
	h.offerDownload(&v, c.Statement)
	if purpose == identity.PurposeClaim {
		v.Action, v.Intro, v.Button = "/claim/verify", "To claim "+form.Handle+" with", "Claim "+form.Handle
	} else {
		v.Action, v.Intro, v.Button = "/login/key/verify", "To log in as "+form.Handle+" with", "Log in"
	}
	h.render(w, r, http.StatusOK, signPage(h.visitorPage(w, r, "Sign the statement"), v))
}

// signAction is where a sign page's form goes.
func signAction(v signView) string {
	if v.Action != "" {
		return v.Action
	}
	return "/account/verify"
}

// offerDownload gives a sign page the statement's download link and the
// one command that fetches and signs it: the page's own signing command
// (v.Command, set before), reading the statement from standard input.
func (h *Handler) offerDownload(v *signView, statement []byte) {
	v.Download = statementPath(statement)
	v.OneLiner = "curl -fsS '" + h.publicURL() + v.Download + "' | " + strings.TrimSuffix(v.Command, " "+statementFile)
}

// statementPath is the URL path that serves statement as a file.
func statementPath(statement []byte) string {
	return "/statement?s=" + base64.RawURLEncoding.EncodeToString(statement)
}

// serveStatement serves a statement this server issued as the file to
// sign, byte for byte, final newline included: a copy pasted into an
// editor is easily saved without it, and then no signature verifies. It
// serves only statements (named by the URL, which carries it whole):
// nothing else can be made to look like a download from this server.
func (h *Handler) serveStatement(w http.ResponseWriter, r *http.Request) {
	b, err := base64.RawURLEncoding.DecodeString(r.URL.Query().Get("s"))
	c, perr := identity.ParseStatement(b)
	if err != nil || perr != nil || c.Server != h.deps.Identities.Server() {
		h.fail(w, r, http.StatusNotFound, "No such statement", "This link does not carry a statement this server issued. Ask for a new one.")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+statementFile+`"`)
	w.Header().Set("Cache-Control", "no-store")
	if _, err := w.Write(c.Statement); err != nil && r.Context().Err() == nil {
		h.log.WarnContext(r.Context(), "web: write statement", slog.Any("error", err))
	}
}

func commandFor(kind string) string {
	if kind == string(identity.KindPGP) {
		return pgpCommand
	}
	return sshCommand
}

func (h *Handler) serveClaimChallenge(w http.ResponseWriter, r *http.Request) {
	h.keyChallenge(w, r, identity.PurposeClaim, claimForm())
}

func (h *Handler) serveKeyLoginChallenge(w http.ResponseWriter, r *http.Request) {
	h.keyChallenge(w, r, identity.PurposeLogin, keyLoginForm())
}

// signedForm reads a sign page's answer: the statement it carried back
// (which must have purpose) and the pasted signature. On failure it has
// rendered the reason.
func (h *Handler) signedForm(w http.ResponseWriter, r *http.Request, purpose identity.Purpose) (*identity.Challenge, []byte, []byte, bool) {
	if _, ok := h.postSession(w, r); !ok {
		return nil, nil, nil, false
	}
	statement, err := base64.StdEncoding.DecodeString(r.PostFormValue("statement"))
	c, perr := identity.ParseStatement(statement)
	if err != nil || perr != nil || c.Purpose != purpose {
		h.fail(w, r, http.StatusBadRequest, "Not a statement", "The form did not carry a statement this server issued. Start again.")
		return nil, nil, nil, false
	}
	return c, statement, pastedSignature(r.PostFormValue("signature")), true
}

// pastedSignature normalises a pasted signature: browsers send CRLF line
// ends; armor does not care, and OpenPGP's cleartext signatures are over
// canonical line ends.
func pastedSignature(s string) []byte {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	return []byte(strings.ReplaceAll(s, "\r\n", "\n") + "\n")
}

// signAgain shows the sign page again with a problem.
func (h *Handler) signAgain(w http.ResponseWriter, r *http.Request, c *identity.Challenge, v signView, status int, err error) {
	var e *identity.Error
	if err != nil && !errors.As(err, &e) {
		h.internal(w, r, err)
		return
	}
	v.Kind, v.Factor, v.Statement = string(c.Factor.Kind), c.Factor.Value, string(c.Statement)
	v.Encoded, v.Label = r.PostFormValue("statement"), ssh.SanitizeComment(r.PostFormValue("label"))
	if v.Command == "" {
		v.Command = commandFor(string(c.Factor.Kind))
	}
	h.offerDownload(&v, c.Statement)
	if e != nil {
		v.Error = "Not done: " + refusalText(e) + "."
		switch e.Code {
		case identity.CodeHandleTaken, identity.CodeFactorLinked, identity.CodeAlreadyLinked, identity.CodeNonceUsed:
			status = http.StatusConflict
		case identity.CodeNotProven, identity.CodeNotAuthorized:
			status = http.StatusForbidden
		}
	}
	h.render(w, r, status, signPage(h.visitorPage(w, r, "Sign the statement"), v))
}

func (h *Handler) serveClaimVerify(w http.ResponseWriter, r *http.Request) {
	c, statement, sig, ok := h.signedForm(w, r, identity.PurposeClaim)
	if !ok {
		return
	}
	v := signView{Action: "/claim/verify", Intro: "To claim " + string(c.Handle) + " with", Button: "Claim " + string(c.Handle)}
	if sig == nil {
		v.Error = "Paste the signature first."
		h.signAgain(w, r, c, v, http.StatusBadRequest, nil)
		return
	}
	_, err := h.deps.Identities.Claim(r.Context(), identity.ClaimRequest{
		Statement: statement, Proof: identity.Proof{Signature: sig}, Label: ssh.SanitizeComment(r.PostFormValue("label")),
	})
	if err != nil {
		h.signAgain(w, r, c, v, http.StatusBadRequest, err)
		return
	}
	h.log.InfoContext(r.Context(), "web: handle claimed by key", slog.String("handle", string(c.Handle)), slog.String("kind", string(c.Factor.Kind)))
	if name, host := c.Handle.Host(); host {
		// A host identity never logs in: show what is now published.
		http.Redirect(w, r, "/hosts/"+url.PathEscape(name)+".known_hosts", http.StatusSeeOther)
		return
	}
	// The one signature that created the identity also logs this browser
	// in, with the key it proved, as a login statement would: the claim
	// proved the same possession, for the same handle, just now.
	if err := h.keySession(w, r, c.Handle, c.Factor); err != nil {
		h.internal(w, r, err)
		return
	}
	http.Redirect(w, r, "/claim/done", http.StatusSeeOther)
}

// keySession replaces the browser's session with one opened by the key,
// for the identity handle.
func (h *Handler) keySession(w http.ResponseWriter, r *http.Request, handle identity.Handle, key identity.Factor) error {
	if err := h.endSession(w, r); err != nil {
		return err
	}
	provider := "SSH key"
	if key.Kind == identity.KindPGP {
		provider = "OpenPGP key"
	}
	l := &loginData{Provider: provider, KeyKind: key.Kind, KeyValue: key.Value, AuthTime: h.now().UTC()}
	_, err := h.openSession(w, r, handle, l)
	return err
}

// serveClaimed tells the person who just claimed a handle that it is
// theirs, and what to do next.
func (h *Handler) serveClaimed(w http.ResponseWriter, r *http.Request) {
	s, l, ok := h.requireUser(w, r)
	if !ok {
		return
	}
	p := h.pageFor(w, r, s, "You now own "+string(s.Handle))
	h.render(w, r, http.StatusOK, claimedPage(p, claimedView{Handle: string(s.Handle), Key: l.KeyValue, Kind: string(l.KeyKind), Server: h.publicURL()}))
}

// claimedView is the page after a claim.
type claimedView struct {
	Handle string
	// Key and Kind are the key that claimed it (and logged in).
	Key, Kind string
	Server    string
}

func (h *Handler) serveKeyLoginVerify(w http.ResponseWriter, r *http.Request) {
	c, statement, sig, ok := h.signedForm(w, r, identity.PurposeLogin)
	if !ok {
		return
	}
	v := signView{Action: "/login/key/verify", Intro: "To log in as " + string(c.Handle) + " with", Button: "Log in"}
	if sig == nil {
		v.Error = "Paste the signature first."
		h.signAgain(w, r, c, v, http.StatusBadRequest, nil)
		return
	}
	handle, key, err := h.deps.Identities.LoginWithKey(r.Context(), statement, identity.Proof{Signature: sig})
	if err != nil {
		h.signAgain(w, r, c, v, http.StatusForbidden, err)
		return
	}
	// A new session replaces whatever this browser had.
	if err := h.keySession(w, r, handle, key); err != nil {
		h.internal(w, r, err)
		return
	}
	h.log.InfoContext(r.Context(), "web: logged in by key", slog.String("handle", string(handle)), slog.String("kind", string(key.Kind)))
	http.Redirect(w, r, "/account", http.StatusSeeOther)
}
