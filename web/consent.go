// consent.go: consent logins. A change the pages make for a session
// logged in with an OpenID account (claiming a handle, linking a key or
// another account, unlinking a factor, deleting the identity) is approved
// by a fresh login at the session's provider whose nonce commits to the
// change's statement (identity.ConsentNonce), so that the provider-signed
// ID token covers it. What the change needs once the login is back (the
// statement, the commitment's salt, a key's signature) travels sealed in
// the login's flow cookie (oidc.BeginOptions.Pending).

package web

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/session"
	"github.com/kith-keyserver/kith/oidc"
)

// The changes a consent login approves.
const (
	consentClaim  = "claim"  // a first login's handle
	consentAdd    = "add"    // an SSH or OpenPGP key from the account page
	consentLink   = "link"   // another OpenID account
	consentRevoke = "revoke" // unlinking a factor
	consentDelete = "delete" // deleting the identity
)

// pendingConsent is what a consent login approves, sealed in its flow
// cookie until the login is back. Short JSON names keep the cookie small.
type pendingConsent struct {
	Action string `json:"a"`
	// Handle is the session's identity (empty for a claim, whose
	// session is pending).
	Handle    identity.Handle `json:"h,omitempty"`
	Statement string          `json:"s"`
	Salt      []byte          `json:"z"`
	// Signature and Label are an added key's signature over Statement
	// and its comment.
	Signature string `json:"g,omitempty"`
	Label     string `json:"l,omitempty"`
	// Link is the login of the account being linked.
	Link *loginData `json:"k,omitempty"`
}

// beginConsent sends the browser to the session's provider for a login
// that approves p's statement. next is where a claim's login returns.
// It renders the error page itself when the login cannot start.
func (h *Handler) beginConsent(w http.ResponseWriter, r *http.Request, s *session.Session, p pendingConsent, next string) {
	salt, err := identity.NewConsentSalt(rand.Reader)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	p.Salt = salt
	blob, err := json.Marshal(p)
	if err != nil {
		h.internal(w, r, fmt.Errorf("web: consent: %w", err))
		return
	}
	if len(blob) > oidc.MaxPending {
		h.fail(w, r, http.StatusRequestEntityTooLarge, "Too large to approve",
			"This change carries more than a login can take along to your provider and back (a very long signature?). Nothing was changed.")
		return
	}
	if h.deps.Providers == nil {
		h.fail(w, r, http.StatusServiceUnavailable, "Login unavailable", "This server has no login providers configured. Nothing was changed.")
		return
	}
	// Scope openid only: the token then holds the account and the nonce,
	// nothing private, and its record can show it for anyone to check.
	opts := oidc.BeginOptions{Next: next, Nonce: identity.ConsentNonce([]byte(p.Statement), salt), Pending: string(blob), Scopes: []string{"openid"}}
	if err := h.deps.Providers.BeginWith(w, r, s.Provider, opts); err != nil {
		h.log.WarnContext(r.Context(), "web: consent login begin", slog.String("provider", s.Provider), slog.Any("error", err))
		h.fail(w, r, http.StatusServiceUnavailable, "Provider unavailable",
			"Approving this change needs a login at your provider, which cannot be reached right now; try again in a little while. Nothing was changed.")
	}
}

// finishConsent makes the change a consent login approved, for the
// browser's current session, whose account the login must be.
func (h *Handler) finishConsent(w http.ResponseWriter, r *http.Request, login *oidc.Login, l *loginData) {
	ctx := r.Context()
	var p pendingConsent
	if err := json.Unmarshal([]byte(login.Pending), &p); err != nil {
		h.internal(w, r, fmt.Errorf("web: consent: %w", err))
		return
	}
	cur, err := h.current(r)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if cur == nil || cur.Handle != p.Handle {
		h.fail(w, r, http.StatusForbidden, "Not approved",
			"Your session ended or changed while you were at your provider. Nothing was changed. Start again from your account page.")
		return
	}
	if !cur.Account.Same(l.account()) {
		h.fail(w, r, http.StatusForbidden, "Not approved",
			"You logged in at your provider with another account than this session's. To approve a change, log in with the account you are logged in with here. Nothing was changed.")
		return
	}
	statement := []byte(p.Statement)
	consent := identity.Consent{Login: l.login(), Salt: p.Salt}
	switch p.Action {
	case consentAdd:
		err = h.deps.Identities.AddWithSession(ctx, identity.SessionAddRequest{
			Statement: statement, New: &identity.Proof{Signature: []byte(p.Signature)}, Consent: consent, Label: p.Label,
		})
		if err != nil {
			h.refusal(w, r, "Not linked", err)
			return
		}
		h.log.InfoContext(ctx, "web: key linked", slog.String("handle", string(cur.Handle)))
		http.Redirect(w, r, "/account?done=key-linked", http.StatusSeeOther)
	case consentRevoke:
		if err := h.deps.Identities.RevokeWithSession(ctx, statement, consent); err != nil {
			h.refusal(w, r, "Not unlinked", err)
			return
		}
		h.log.InfoContext(ctx, "web: factor unlinked", slog.String("handle", string(cur.Handle)))
		http.Redirect(w, r, "/account?done=unlinked", http.StatusSeeOther)
	case consentDelete:
		h.finishDelete(w, r, statement, consent)
	case consentLink:
		if p.Link == nil {
			h.internal(w, r, fmt.Errorf("web: consent: a link without its login"))
			return
		}
		err := h.deps.Identities.LinkLogin(ctx, statement, consent, p.Link.login())
		if identity.CodeOf(err) == identity.CodeAlreadyLinked {
			http.Redirect(w, r, "/account?done=already-linked", http.StatusSeeOther)
			return
		}
		if err != nil {
			h.refusal(w, r, "Account not linked", err)
			return
		}
		h.log.InfoContext(ctx, "web: account linked", slog.String("provider", p.Link.Provider), slog.String("handle", string(cur.Handle)))
		http.Redirect(w, r, "/account?done=account-linked", http.StatusSeeOther)
	case consentClaim:
		first, err := decodeLogin(cur.Login)
		if err != nil {
			h.internal(w, r, err)
			return
		}
		h.finishClaim(w, r, statement, consent, first.login(), l)
	default:
		h.internal(w, r, fmt.Errorf("web: consent: unknown action %q", p.Action))
	}
}

// finishClaim creates the identity of a first login, approved by its
// consent login, and opens the new identity's session in place of the
// pending one. first is the first login, whose verified email is
// recorded.
func (h *Handler) finishClaim(w http.ResponseWriter, r *http.Request, statement []byte, consent identity.Consent, first identity.Login, l *loginData) {
	ctx := r.Context()
	id, err := h.deps.Identities.ClaimWithLogin(ctx, statement, consent, first)
	switch identity.CodeOf(err) {
	case "":
		if err != nil {
			h.internal(w, r, err)
			return
		}
	case identity.CodeHandleTaken:
		h.fail(w, r, http.StatusConflict, "Handle not claimed", "That handle was taken while you were at your provider; choose another. Nothing was stored.")
		return
	default:
		h.refusal(w, r, "Handle not claimed", err)
		return
	}
	if err := h.endSession(w, r); err != nil {
		h.internal(w, r, err)
		return
	}
	if _, err := h.openSession(w, r, id.Handle, l); err != nil {
		h.internal(w, r, err)
		return
	}
	h.log.InfoContext(ctx, "web: identity created", slog.String("provider", l.Provider), slog.String("handle", string(id.Handle)))
	next := oidc.SafeNext(l.Next)
	if next == "/" {
		next = "/account?done=created"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// serveArtifacts hands the logged-in owner the private artifacts of their
// identity's records (provider-verified emails, ID tokens, with the salts
// the records commit with), as JSON for `kith verify-log --artifacts`.
func (h *Handler) serveArtifacts(w http.ResponseWriter, r *http.Request) {
	s, _, ok := h.requireUser(w, r)
	if !ok {
		return
	}
	arts, err := h.deps.Identities.IdentityArtifacts(r.Context(), s.Handle)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if arts == nil {
		arts = []identity.RecordArtifacts{}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Disposition", `attachment; filename="kith-artifacts-`+string(s.Handle)+`.json"`)
	json.NewEncoder(w).Encode(arts)
}
