// delete.go: deleting an account. Every link of the identity is revoked
// (a revocation record per factor, naming only the factor and the issued
// revoke statement: no ID token, no email beyond what the log already
// names), and every session ends. The evidence log keeps its records (it
// is append-only and hash-chained), and public OpenPGP keys stay in the
// key store, as keyservers keep them.

package web

import (
	"log/slog"
	"net/http"
)

// serveDelete deletes the session's identity after the person typed its
// handle to confirm.
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
	ctx := r.Context()
	n, err := h.deps.Identities.DeleteWithSession(ctx, s.Handle, l.login())
	if err != nil {
		h.refusal(w, r, "Not deleted", err)
		return
	}
	if _, err := h.deps.Sessions.DeleteIdentitySessions(ctx, s.Handle); err != nil {
		h.internal(w, r, err)
		return
	}
	h.setCookie(w, r, sessionCookie, "", 0)
	h.log.InfoContext(ctx, "web: identity deleted", slog.String("handle", string(s.Handle)), slog.Int("revocations", n))
	h.render(w, r, http.StatusOK, deletedPage(h.pageFor(w, r, nil, "Account deleted"), string(s.Handle)))
}
