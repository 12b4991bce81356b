// sessions.go: the session cookie, finding the request's session, opening
// and ending sessions, and the CSRF tokens bound to them.

package web

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/session"
	"github.com/kith-keyserver/kith/oidc"
)

// Cookie names. With secure cookies (SecureCookies or TLS) the names carry
// the __Host- prefix, which makes browsers insist on Secure, Path=/ and no
// Domain, so a sibling subdomain cannot plant one; the unprefixed names
// are then not read at all.
const (
	sessionCookie = "kith-session"
	csrfCookie    = "kith-csrf"
	hostPrefix    = "__Host-"
	// csrfField is the hidden form field of the CSRF token.
	csrfField = "csrf"
)

// secure reports whether cookies of this request are Secure.
func (h *Handler) secure(r *http.Request) bool { return h.opts.SecureCookies || r.TLS != nil }

func cookieName(base string, secure bool) string {
	if secure {
		return hostPrefix + base
	}
	return base
}

// setCookie sets an HttpOnly, SameSite=Lax cookie on path /.
func (h *Handler) setCookie(w http.ResponseWriter, r *http.Request, base, value string, maxAge time.Duration) {
	secure := h.secure(r)
	c := &http.Cookie{
		Name:     cookieName(base, secure),
		Value:    value,
		Path:     "/",
		HttpOnly: true,
		Secure:   secure,
		SameSite: http.SameSiteLaxMode,
	}
	if maxAge > 0 {
		c.MaxAge = int(maxAge / time.Second)
		c.Expires = h.now().Add(maxAge)
	} else {
		c.MaxAge = -1
		c.Expires = time.Unix(1, 0)
	}
	http.SetCookie(w, c)
}

// cookie returns the request's cookie of that base name, under the one
// name setCookie gives it for this request. With secure cookies only the
// __Host- name is read: a sibling subdomain or a plain-HTTP response can
// plant the unprefixed name, which would otherwise log the browser into
// the planter's session or bind its forms to the planter's token.
func (h *Handler) cookie(r *http.Request, base string) string {
	if c, err := r.Cookie(cookieName(base, h.secure(r))); err == nil {
		return c.Value
	}
	return ""
}

// current returns the request's session, or nil. A session past its idle
// timeout, or one that may no longer act for its identity (see
// stillLinked), is ended here.
func (h *Handler) current(r *http.Request) (*session.Session, error) {
	token := h.cookie(r, sessionCookie)
	if token == "" || !session.WellFormed(token) {
		return nil, nil
	}
	ctx := r.Context()
	now := h.now()
	s, err := h.deps.Sessions.Session(ctx, session.Hash(token), now)
	if errors.Is(err, session.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("web: session: %w", err)
	}
	if h.opts.SessionIdle > 0 && now.Sub(s.LastSeen) > h.opts.SessionIdle {
		if err := h.deps.Sessions.DeleteSession(ctx, s.TokenHash); err != nil {
			return nil, fmt.Errorf("web: end idle session: %w", err)
		}
		return nil, nil
	}
	ok, err := h.stillLinked(ctx, s)
	if err != nil {
		return nil, err
	}
	if !ok {
		if err := h.deps.Sessions.DeleteSession(ctx, s.TokenHash); err != nil {
			return nil, fmt.Errorf("web: end unlinked session: %w", err)
		}
		h.log.InfoContext(ctx, "web: session ended: its account is no longer linked",
			slog.String("handle", string(s.Handle)), slog.String("provider", s.Provider))
		return nil, nil
	}
	if now.Sub(s.LastSeen) > touchInterval {
		if err := h.deps.Sessions.TouchSession(ctx, s.TokenHash, now); err != nil {
			h.log.WarnContext(ctx, "web: touch session", slog.Any("error", err))
		}
		s.LastSeen = now
	}
	return s, nil
}

// stillLinked reports whether the session may still act for its
// identity: the identity exists and the account the session was opened
// with is still proven for it. A session holds the consent of that
// account alone, so once the account is unlinked (on the account page, by
// a revocation through the API, or by deleting the identity) the session
// is no one's. A pending session (no handle yet) acts for no identity
// and is always still linked.
func (h *Handler) stillLinked(ctx context.Context, s *session.Session) (bool, error) {
	if s.Handle == "" {
		return true, nil
	}
	_, a, _, err := h.deps.Identities.Lookup(ctx, string(s.Handle))
	switch identity.CodeOf(err) {
	case identity.CodeUnknownIdentity, identity.CodeBadHandle:
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("web: check session of %s: %w", s.Handle, err)
	}
	return a.Proven(s.Account), nil
}

// user returns the request's session when it acts for an identity (not a
// pending first login), or nil.
func (h *Handler) user(r *http.Request) (*session.Session, error) {
	s, err := h.current(r)
	if err != nil || s == nil || s.Handle == "" {
		return nil, err
	}
	return s, nil
}

// openSession stores a new session for the login and sets its cookie. An
// empty handle opens a pending session, which lasts PendingLifetime.
func (h *Handler) openSession(w http.ResponseWriter, r *http.Request, handle identity.Handle, l *loginData) (*session.Session, error) {
	token, hash, err := session.NewToken()
	if err != nil {
		return nil, err
	}
	life := h.opts.SessionLifetime
	if handle == "" {
		life = PendingLifetime
	}
	blob, err := l.encode()
	if err != nil {
		return nil, err
	}
	now := h.now().UTC()
	s := &session.Session{
		TokenHash: hash, Handle: handle, Account: l.account(), Provider: l.Provider,
		Login: blob, Created: now, LastSeen: now, Expires: now.Add(life),
	}
	if err := h.deps.Sessions.CreateSession(r.Context(), s); err != nil {
		return nil, fmt.Errorf("web: open session: %w", err)
	}
	h.setCookie(w, r, sessionCookie, token, life)
	return s, nil
}

// endSession deletes the request's session, if any, and its cookie.
func (h *Handler) endSession(w http.ResponseWriter, r *http.Request) error {
	h.setCookie(w, r, sessionCookie, "", 0)
	token := h.cookie(r, sessionCookie)
	if token == "" || !session.WellFormed(token) {
		return nil
	}
	if err := h.deps.Sessions.DeleteSession(r.Context(), session.Hash(token)); err != nil {
		return fmt.Errorf("web: end session: %w", err)
	}
	return nil
}

// csrfBinding is what a CSRF token is bound to: the session (by its token
// hash), or for a visitor without one a random cookie, set here when
// missing and set is true.
func (h *Handler) csrfBinding(w http.ResponseWriter, r *http.Request, s *session.Session, set bool) string {
	if s != nil {
		return "session:" + hex.EncodeToString(s.TokenHash)
	}
	if v := h.cookie(r, csrfCookie); len(v) == 43 {
		return "visitor:" + v
	}
	if !set {
		return ""
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return ""
	}
	v := base64.RawURLEncoding.EncodeToString(b)
	h.setCookie(w, r, csrfCookie, v, 24*time.Hour)
	// This request's forms are rendered with the new binding.
	r.AddCookie(&http.Cookie{Name: cookieName(csrfCookie, h.secure(r)), Value: v})
	return "visitor:" + v
}

// csrfToken returns the token for the forms of this response.
func (h *Handler) csrfToken(w http.ResponseWriter, r *http.Request, s *session.Session) string {
	return oidc.CSRFToken(h.opts.CSRFKey, h.csrfBinding(w, r, s, true))
}

// postSession returns the session of a form POST (nil for a visitor
// without one) once the form's CSRF token checks out. When it cannot (the
// session store failed, or the token is wrong) it has answered the
// request and reports false; the caller then changes nothing.
func (h *Handler) postSession(w http.ResponseWriter, r *http.Request) (*session.Session, bool) {
	s, err := h.current(r)
	if err != nil {
		h.internal(w, r, err)
		return nil, false
	}
	if !h.checkCSRF(w, r, s) {
		return nil, false
	}
	return s, true
}

// checkCSRF reports whether the POST carries the CSRF token of its
// session (or visitor cookie). It refuses with 403 when not, and the
// caller then changes nothing.
func (h *Handler) checkCSRF(w http.ResponseWriter, r *http.Request, s *session.Session) bool {
	binding := h.csrfBinding(w, r, s, false)
	if binding != "" && oidc.CheckCSRF(h.opts.CSRFKey, binding, r.PostFormValue(csrfField)) {
		return true
	}
	h.log.InfoContext(r.Context(), "web: CSRF check failed", slog.String("route", r.Pattern))
	h.fail(w, r, http.StatusForbidden, "Form expired",
		"This form did not carry a valid security token (it may be from an older page, another site, or a session that has ended). Nothing was changed. Go back, reload the page and try again.")
	return false
}

// page is what the layout of every page needs.
type page struct {
	Title string
	// Handle is the logged-in identity, empty for visitors.
	Handle string
	// Pending is set during a first login that has not chosen a handle.
	Pending bool
	// CSRF is the token for this page's forms (set for sessions, and by
	// pages that have forms for visitors).
	CSRF string
	// LoginEnabled says whether people can log in: always, since a
	// proven key logs in without any provider (/login/key).
	LoginEnabled bool
}

// page builds the layout data for the request.
func (h *Handler) page(w http.ResponseWriter, r *http.Request, title string) page {
	s, err := h.current(r)
	if err != nil {
		h.log.WarnContext(r.Context(), "web: session lookup", slog.Any("error", err))
	}
	return h.pageFor(w, r, s, title)
}

func (h *Handler) pageFor(w http.ResponseWriter, r *http.Request, s *session.Session, title string) page {
	p := page{Title: title, LoginEnabled: true}
	if s != nil {
		p.Handle = string(s.Handle)
		p.Pending = s.Handle == ""
		// For the logout form; pages with forms for visitors set it too.
		p.CSRF = h.csrfToken(w, r, s)
	}
	return p
}

// SweepInterval is how often Run removes expired sessions.
const SweepInterval = time.Hour

// Run removes expired sessions from the store every SweepInterval until
// ctx ends; it then returns nil. Any number of nodes may run it.
func (h *Handler) Run(ctx context.Context) error {
	t := time.NewTicker(SweepInterval)
	defer t.Stop()
	for {
		if n, err := h.deps.Sessions.DeleteExpiredSessions(ctx, h.now()); err != nil && ctx.Err() == nil {
			h.log.WarnContext(ctx, "web: sweep expired sessions", slog.Any("error", err))
		} else if n > 0 {
			h.log.DebugContext(ctx, "web: expired sessions removed", slog.Int64("sessions", n))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
