// delete.go: deleting an account. The session's provider approves the
// deletion with a consent login whose nonce commits to a delete
// statement (finishConsent); then every link of the identity is revoked
// (a revocation record per factor, keeping the statement and the consent
// login's ID token, which holds the account, the client and the nonce:
// no email), the identity's private artifacts are erased, and every
// session ends. The evidence log keeps its records (it is append-only),
// and public OpenPGP keys stay in the key store, as keyservers keep them.

package web

import (
	"log/slog"
	"net/http"

	"github.com/kith-keyserver/kith/identity"
)

// serveDelete starts deleting the session's identity after the person
// typed its handle to confirm: the session's provider approves it.
func (h *Handler) serveDelete(w http.ResponseWriter, r *http.Request) {
	s, l, ok := h.requireUser(w, r)
	if !ok || !h.checkCSRF(w, r, s) {
		return
	}
	if l.byKey() {
		h.fail(w, r, http.StatusForbidden, "Not deleted", keySessionLimit)
		return
	}
	if r.PostFormValue("confirm") != string(s.Handle) {
		h.fail(w, r, http.StatusBadRequest, "Not deleted", "To delete your account, type your handle in the confirmation box. Nothing was changed.")
		return
	}
	c, err := h.deps.Identities.IssueChallenge(r.Context(), identity.PurposeDelete, string(s.Handle), s.Account)
	if err != nil {
		h.refusal(w, r, "Not deleted", err)
		return
	}
	h.beginConsent(w, r, s, pendingConsent{Action: consentDelete, Handle: s.Handle, Statement: string(c.Statement)}, "/account")
}

// finishDelete deletes the identity a consent login approved deleting,
// ends its sessions and says so.
func (h *Handler) finishDelete(w http.ResponseWriter, r *http.Request, statement []byte, consent identity.Consent) {
	ctx := r.Context()
	handle, n, err := h.deps.Identities.DeleteWithSession(ctx, statement, consent)
	if err != nil {
		h.refusal(w, r, "Not deleted", err)
		return
	}
	if _, err := h.deps.Sessions.DeleteIdentitySessions(ctx, handle); err != nil {
		h.internal(w, r, err)
		return
	}
	h.setCookie(w, r, sessionCookie, "", 0)
	h.log.InfoContext(ctx, "web: identity deleted", slog.String("handle", string(handle)), slog.Int("revocations", n))
	h.render(w, r, http.StatusOK, deletedPage(h.pageFor(w, r, nil, "Account deleted"), string(handle)))
}
