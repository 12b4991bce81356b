// delete.go: deleting an account. Every link of the identity is revoked
// (a revocation record per factor, naming only the factor and the issued
// revoke statement: no ID token, no email beyond what the log already
// names), and every session ends. The evidence log keeps its records (it
// is append-only and hash-chained), and public OpenPGP keys stay in the
// key store, as keyservers keep them.

package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/session"
)

// deletedLabel is the label of the revocations a deletion appends.
const deletedLabel = "identity deleted at its holder's request"

// serveDelete deletes the session's identity after the person typed its
// handle to confirm.
func (h *Handler) serveDelete(w http.ResponseWriter, r *http.Request) {
	s, _, ok := h.requireUser(w, r)
	if !ok || !h.checkCSRF(w, r, s) {
		return
	}
	if r.PostFormValue("confirm") != string(s.Handle) {
		h.fail(w, r, http.StatusBadRequest, "Not deleted", "To delete your account, type your handle in the confirmation box. Nothing was changed.")
		return
	}
	ctx := r.Context()
	n, err := h.deleteIdentity(ctx, s)
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

// deleteIdentity revokes every factor linked to the session's identity in
// one transaction, the session's own account last (a revocation counts
// only while its signer is proven). It returns how many it revoked.
func (h *Handler) deleteIdentity(ctx context.Context, s *session.Session) (int, error) {
	_, a, _, err := h.deps.Identities.Lookup(ctx, string(s.Handle))
	if err != nil {
		return 0, err
	}
	if !a.Proven(s.Account) {
		return 0, identity.Refuse(identity.CodeNotProven, "the account you are logged in with is no longer linked: log in again")
	}
	// Factors a linked key carries (auth subkeys, user ID emails) end
	// with the key; emails cannot sign statements.
	var targets []identity.FactorStatus
	for _, st := range a.Factors {
		if st.Level < identity.LevelExpired || !st.Parent.IsZero() || !st.Factor.Provable() || st.Factor.Same(s.Account) {
			continue
		}
		targets = append(targets, st)
	}
	own, _ := a.Status(s.Account)
	targets = append(targets, own)
	challenges := make([]*identity.Challenge, len(targets))
	for i, st := range targets {
		c, err := h.deps.Identities.IssueChallenge(ctx, identity.PurposeRevoke, string(s.Handle), st.Factor)
		if err != nil {
			return 0, fmt.Errorf("web: delete %s: %w", s.Handle, err)
		}
		challenges[i] = c
	}
	err = h.deps.Store.Update(ctx, func(ctx context.Context, tx identity.Tx) error {
		now := h.now().UTC()
		_, recs, err := tx.IdentityRecords(ctx, s.Handle)
		if err != nil {
			return err
		}
		a := identity.Assess(s.Handle, recs, now)
		for i, c := range challenges {
			if _, err := tx.ConsumeChallenge(ctx, c.Nonce, now); err != nil {
				return err
			}
			st, ok := a.Status(targets[i].Factor)
			if !ok {
				continue
			}
			e := &identity.Evidence{
				Method: identity.MethodRevocation, Purpose: identity.PurposeRevoke, Handle: s.Handle,
				From: s.Account, To: st.Factor, Label: deletedLabel, Statement: c.Statement, Created: now,
			}
			if len(st.Via) > 0 {
				e.Revokes = st.Via[len(st.Via)-1]
			}
			if err := tx.Append(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, identity.ErrNonceUsed) || errors.Is(err, identity.ErrChallengeExpired) {
			return 0, identity.RefuseErr(identity.CodeNonceUsed, err, "the deletion raced with another change: try again")
		}
		return 0, fmt.Errorf("web: delete %s: %w", s.Handle, err)
	}
	return len(targets), nil
}
