// login.go: OpenID Connect login pages: the provider list, the start of a
// login, the callback (a first login, a returning one, or linking another
// account while logged in), the handle choice of a first login, and
// logout.

package web

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/session"
	"github.com/kith-keyserver/kith/oidc"
)

// serveLoginPage lists the providers, one button each.
func (h *Handler) serveLoginPage(w http.ResponseWriter, r *http.Request) {
	s, err := h.current(r)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	p := h.pageFor(w, r, s, "Log in")
	p.CSRF = h.csrfToken(w, r, s)
	var names []string
	if h.deps.Providers != nil {
		names = h.deps.Providers.Names()
	}
	linking := s != nil && s.Handle != ""
	h.render(w, r, http.StatusOK, loginPage(p, names, oidc.SafeNext(r.URL.Query().Get("next")), linking))
}

// serveBegin starts a login at the provider. A visitor may start one with
// a plain link (GET) or the login page's form; a logged-in person is
// linking another account to their identity, which only the form (POST,
// with its CSRF token) may start: a GET shows the form to confirm.
func (h *Handler) serveBegin(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("provider")
	if h.deps.Providers == nil {
		h.fail(w, r, http.StatusNotFound, "Login unavailable", "This server has no login providers configured.")
		return
	}
	if _, ok := h.deps.Providers.Get(name); !ok {
		h.fail(w, r, http.StatusNotFound, "Unknown provider", "This server has no login provider of that name.")
		return
	}
	s, err := h.current(r)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	linking := s != nil && s.Handle != ""
	next := r.URL.Query().Get("next")
	if r.Method == http.MethodPost {
		if !h.checkCSRF(w, r, s) {
			return
		}
		next = r.PostFormValue("next")
	} else if linking {
		p := h.pageFor(w, r, s, "Link an account")
		h.render(w, r, http.StatusOK, loginPage(p, []string{name}, oidc.SafeNext(next), true))
		return
	}
	if linking && (next == "" || next == "/") {
		next = "/account"
	}
	if err := h.deps.Providers.Begin(w, r, name, next); err != nil {
		h.log.WarnContext(r.Context(), "web: login begin", slog.String("provider", name), slog.Any("error", err))
		h.fail(w, r, http.StatusServiceUnavailable, "Provider unavailable",
			"The login provider cannot be reached right now; try again in a little while.")
	}
}

// loginFailure says in words why a callback was refused.
func loginFailure(err error) (status int, msg string) {
	status = http.StatusForbidden
	switch {
	case errors.Is(err, oidc.ErrNoLogin):
		msg = "This login was not started in this browser, took too long, or was already finished (a login link can be used once). Nothing was stored. Start again from the login page."
	case errors.Is(err, oidc.ErrState):
		msg = "The provider's answer does not belong to the login this browser started (state mismatch): it may be forged. Nothing was stored."
	case errors.Is(err, oidc.ErrDenied):
		msg = "The provider did not complete the login (it was declined or failed there). Nothing was stored."
	case errors.Is(err, oidc.ErrExchange):
		msg = "The provider refused to confirm this login (the authorization code was already used, expired, or was not issued for this server). Nothing was stored."
	case errors.Is(err, oidc.ErrUnknownKey):
		msg = "The provider's ID token is signed by a key the provider does not publish. Nothing was stored."
	case errors.Is(err, oidc.ErrSignature):
		msg = "The provider's ID token has a bad signature. Nothing was stored."
	case errors.Is(err, oidc.ErrIssuer):
		msg = "The ID token was issued by another provider than the one configured. Nothing was stored."
	case errors.Is(err, oidc.ErrAudience):
		msg = "The ID token was issued to another application, not this server. Nothing was stored."
	case errors.Is(err, oidc.ErrExpired):
		msg = "The ID token has expired. Nothing was stored."
	case errors.Is(err, oidc.ErrNonce):
		msg = "The ID token does not belong to the login this browser started (nonce mismatch). Nothing was stored."
	case errors.Is(err, oidc.ErrIDToken):
		msg = "The provider's ID token is not valid. Nothing was stored."
	case errors.Is(err, oidc.ErrEmailDomain):
		msg = "This server accepts logins from this provider only for accounts with a verified email in its allowed domains."
	case errors.Is(err, oidc.ErrProviderUnavailable):
		status, msg = http.StatusServiceUnavailable, "The login provider cannot be reached right now; try again in a little while."
	case errors.Is(err, oidc.ErrUnknownProvider):
		status, msg = http.StatusNotFound, "This server has no login provider of that name."
	default:
		status, msg = http.StatusBadGateway, "The login failed. Nothing was stored."
	}
	return status, msg
}

// serveCallback finishes a login. Logged in, the account is linked to
// the session's identity; otherwise a known account opens a session for
// its identity and a new one goes on to choose a handle.
func (h *Handler) serveCallback(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("provider")
	if h.deps.Providers == nil {
		h.fail(w, r, http.StatusNotFound, "Login unavailable", "This server has no login providers configured.")
		return
	}
	ctx := r.Context()
	login, err := h.deps.Providers.Finish(w, r, name)
	if err != nil {
		status, msg := loginFailure(err)
		h.log.InfoContext(ctx, "web: login refused", slog.String("provider", name), slog.Any("error", err))
		h.fail(w, r, status, "Login refused", msg)
		return
	}
	p, _ := h.deps.Providers.Get(name)
	l := newLoginData(login, p.Config().ClientID)
	// The account is recorded under a pseudonym unless it is known by
	// its subject already (identity.Service.OIDCAccount).
	if _, l.SubjectSalt, err = h.deps.Identities.OIDCAccount(ctx, l.Issuer, l.Subject); err != nil {
		h.internal(w, r, err)
		return
	}
	acct := l.account()
	if login.Pending != "" {
		h.finishConsent(w, r, login, l)
		return
	}

	cur, err := h.current(r)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if cur != nil && cur.Handle != "" {
		h.linkLogin(w, r, cur, l)
		return
	}
	handle, err := h.deps.Identities.WhoProves(ctx, acct)
	switch {
	case identity.CodeOf(err) == identity.CodeNotLinked:
		// A first login: a pending session until a handle is chosen.
		if err := h.endSession(w, r); err != nil {
			h.internal(w, r, err)
			return
		}
		if _, err := h.openSession(w, r, "", l); err != nil {
			h.internal(w, r, err)
			return
		}
		h.log.InfoContext(ctx, "web: first login", slog.String("provider", name))
		http.Redirect(w, r, "/login/choose-handle", http.StatusSeeOther)
		return
	case err != nil:
		h.internal(w, r, err)
		return
	}
	if err := h.recordEmail(ctx, handle, l); err != nil {
		h.internal(w, r, err)
		return
	}
	if err := h.endSession(w, r); err != nil {
		h.internal(w, r, err)
		return
	}
	if _, err := h.openSession(w, r, handle, l); err != nil {
		h.internal(w, r, err)
		return
	}
	h.log.InfoContext(ctx, "web: login", slog.String("provider", name), slog.String("handle", string(handle)))
	http.Redirect(w, r, oidc.SafeNext(l.Next), http.StatusSeeOther)
}

// linkLogin links a login made while logged in to the session's identity.
func (h *Handler) linkLogin(w http.ResponseWriter, r *http.Request, cur *session.Session, l *loginData) {
	ctx := r.Context()
	if cur.Account.Same(l.account()) {
		http.Redirect(w, r, "/account?done=same-account", http.StatusSeeOther)
		return
	}
	by, err := decodeLogin(cur.Login)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if by.byKey() {
		h.fail(w, r, http.StatusForbidden, "Account not linked", "You logged in with a key; to link an OpenID account, log out and log in with it, or link it from a session opened with an account already linked. Nothing was stored.")
		return
	}
	switch other, err := h.deps.Identities.WhoProves(ctx, l.account()); {
	case err == nil && other == cur.Handle:
		http.Redirect(w, r, "/account?done=already-linked", http.StatusSeeOther)
		return
	case err == nil:
		h.refusal(w, r, "Account not linked", identity.Refuse(identity.CodeFactorLinked,
			"this account is linked to another identity: log in with it and unlink it there first"))
		return
	case identity.CodeOf(err) != identity.CodeNotLinked:
		h.internal(w, r, err)
		return
	}
	// The session's account approves the link with a consent login at
	// its provider, which the new account's login rides along to.
	c, err := h.deps.Identities.IssueChallenge(ctx, identity.PurposeAdd, string(cur.Handle), l.account())
	if identity.CodeOf(err) == identity.CodeAlreadyLinked {
		http.Redirect(w, r, "/account?done=already-linked", http.StatusSeeOther)
		return
	}
	if err != nil {
		h.refusal(w, r, "Account not linked", err)
		return
	}
	h.beginConsent(w, r, cur, pendingConsent{Action: consentLink, Handle: cur.Handle, Statement: string(c.Statement), Link: l}, "/account")
}

// pendingLogin returns the request's pending session and its login, or
// renders why there is none.
func (h *Handler) pendingLogin(w http.ResponseWriter, r *http.Request) (*session.Session, *loginData, bool) {
	s, err := h.current(r)
	if err != nil {
		h.internal(w, r, err)
		return nil, nil, false
	}
	if s != nil && s.Handle != "" {
		http.Redirect(w, r, "/account", http.StatusSeeOther)
		return nil, nil, false
	}
	if s == nil {
		h.fail(w, r, http.StatusForbidden, "No login in progress",
			"Choosing a handle follows a first login, which has not happened in this browser or has expired. Log in again.")
		return nil, nil, false
	}
	l, err := decodeLogin(s.Login)
	if err != nil {
		h.internal(w, r, err)
		return nil, nil, false
	}
	return s, l, true
}

// proposal returns the handle to propose: the provider's, when it is
// valid, claimable (no system account's name) and free.
func (h *Handler) proposal(r *http.Request, l *loginData) string {
	hd, err := identity.ParseHandle(l.ProposedHandle)
	if err != nil || identity.IsSystemAccount(string(hd)) {
		return ""
	}
	if _, _, _, err := h.deps.Identities.Lookup(r.Context(), string(hd)); identity.CodeOf(err) != identity.CodeUnknownIdentity {
		return ""
	}
	return string(hd)
}

// serveChooseHandle shows the handle form of a first login.
func (h *Handler) serveChooseHandle(w http.ResponseWriter, r *http.Request) {
	s, l, ok := h.pendingLogin(w, r)
	if !ok {
		return
	}
	p := h.pageFor(w, r, s, "Choose a handle")
	h.render(w, r, http.StatusOK, chooseHandlePage(p, h.proposal(r, l), l.Provider, ""))
}

// serveClaimHandle creates the identity of a first login with the chosen
// handle.
func (h *Handler) serveClaimHandle(w http.ResponseWriter, r *http.Request) {
	s, l, ok := h.pendingLogin(w, r)
	if !ok || !h.checkCSRF(w, r, s) {
		return
	}
	ctx := r.Context()
	want := strings.TrimSpace(r.PostFormValue("handle"))
	again := func(status int, msg string) {
		p := h.pageFor(w, r, s, "Choose a handle")
		h.render(w, r, status, chooseHandlePage(p, want, l.Provider, msg))
	}
	hd, err := identity.ParseHandle(want)
	switch {
	case errors.Is(err, identity.ErrReservedHandle):
		again(http.StatusBadRequest, "That name is reserved for the server; choose another.")
		return
	case err != nil:
		again(http.StatusBadRequest, "A handle is 2 to 39 lower-case letters, digits and hyphens, not starting or ending with a hyphen.")
		return
	}
	// The claim is approved by a consent login at the provider, whose
	// nonce commits to the claim statement; finishClaim then creates the
	// identity.
	c, err := h.deps.Identities.IssueChallenge(ctx, identity.PurposeClaim, string(hd), l.account())
	switch identity.CodeOf(err) {
	case "":
		if err != nil {
			h.internal(w, r, err)
			return
		}
	case identity.CodeHandleTaken:
		again(http.StatusConflict, "That handle is taken; choose another.")
		return
	case identity.CodeReservedHandle:
		again(http.StatusBadRequest, "That name is reserved: it is a system account on many servers, which an SSH certificate for it could log in as; choose another.")
		return
	default:
		h.refusal(w, r, "Handle not claimed", err)
		return
	}
	h.beginConsent(w, r, s, pendingConsent{Action: consentClaim, Statement: string(c.Statement)}, l.Next)
}

// serveLogout ends the session.
func (h *Handler) serveLogout(w http.ResponseWriter, r *http.Request) {
	s, err := h.current(r)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if s == nil {
		// Nothing to end: the session is already gone.
		h.setCookie(w, r, sessionCookie, "", 0)
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if !h.checkCSRF(w, r, s) {
		return
	}
	if err := h.endSession(w, r); err != nil {
		h.internal(w, r, err)
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
