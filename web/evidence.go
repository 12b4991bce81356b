// evidence.go: what Kith keeps of a login, and the evidence records a
// login appends: oidc.login (the account authenticated; its ID token and
// the provider's JWK) and oidc.email-verified (the provider vouched for
// the email). VerifyLoginRecord re-checks such a record offline.

package web

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/oidc"
)

// loginData is what a session keeps of the login that opened it: the
// claims its evidence records need and the artifacts that prove them.
// Name, username and every other claim are not kept (the ID token, kept
// verbatim as evidence, is not read for more).
type loginData struct {
	Provider       string          `json:"provider"`
	ClientID       string          `json:"client_id"`
	Issuer         string          `json:"iss"`
	Subject        string          `json:"sub"`
	Email          string          `json:"email,omitempty"`
	EmailVerified  bool            `json:"email_verified,omitempty"`
	ProposedHandle string          `json:"proposed_handle,omitempty"`
	AuthTime       time.Time       `json:"auth_time"`
	IDToken        string          `json:"id_token"`
	SigningKey     json.RawMessage `json:"jwk"`
	Next           string          `json:"next,omitempty"`
}

// newLoginData keeps what is needed of a verified login.
func newLoginData(l *oidc.Login, clientID string) *loginData {
	at := l.AuthTime
	if at.IsZero() {
		at = l.IssuedAt
	}
	return &loginData{
		Provider: l.Provider, ClientID: clientID, Issuer: l.Issuer, Subject: l.Subject,
		Email: l.Email, EmailVerified: l.EmailVerified, ProposedHandle: l.ProposedHandle,
		AuthTime: at.UTC(), IDToken: l.RawIDToken, SigningKey: json.RawMessage(l.SigningKey), Next: l.Next,
	}
}

func (l *loginData) encode() ([]byte, error) {
	b, err := json.Marshal(l)
	if err != nil {
		return nil, fmt.Errorf("web: encode login: %w", err)
	}
	return b, nil
}

func decodeLogin(b []byte) (*loginData, error) {
	var l loginData
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("web: decode login: %w", err)
	}
	return &l, nil
}

// account is the login's OIDC factor.
func (l *loginData) account() identity.Factor { return identity.OIDCFactor(l.Issuer, l.Subject) }

// verifiedEmail is the factor of the email the provider verified, or zero.
func (l *loginData) verifiedEmail() identity.Factor {
	if !l.EmailVerified || !strings.Contains(l.Email, "@") {
		return identity.Factor{}
	}
	f := identity.EmailFactor(l.Email)
	if f.Validate() != nil {
		return identity.Factor{}
	}
	return f
}

// loginStatementTitle starts the statement of every login record.
const loginStatementTitle = "Kith OpenID Connect login"

// loginStatement is the text a login record keeps beside its ID token: it
// names the server, what the record links, and the client the token was
// issued to, which is what VerifyLoginRecord needs to re-check the token.
// It is not signed by anyone: the ID token is the proof.
func loginStatement(server string, purpose identity.Purpose, h identity.Handle, linked identity.Factor, by *loginData, email identity.Factor, now time.Time) []byte {
	var b strings.Builder
	b.WriteString(loginStatementTitle + "\n\n")
	fmt.Fprintf(&b, "server: %s\n", server)
	if purpose != "" {
		fmt.Fprintf(&b, "purpose: %s\n", purpose)
	}
	fmt.Fprintf(&b, "handle: %s\n", h)
	fmt.Fprintf(&b, "factor: %s\n", linked)
	if !email.IsZero() {
		fmt.Fprintf(&b, "email: %s\n", email.Value)
	}
	fmt.Fprintf(&b, "signer: %s\n", by.account())
	fmt.Fprintf(&b, "provider: %s\n", by.Provider)
	fmt.Fprintf(&b, "client_id: %s\n", by.ClientID)
	fmt.Fprintf(&b, "authenticated: %s\n", by.AuthTime.Format(time.RFC3339))
	fmt.Fprintf(&b, "recorded: %s\n", now.UTC().Format(time.RFC3339))
	return []byte(b.String())
}

// loginRecord is the oidc.login record of the login by, linking linked
// (zero: by's account to the identity).
func loginRecord(server string, purpose identity.Purpose, h identity.Handle, linked identity.Factor, by *loginData, now time.Time) *identity.Evidence {
	shown := linked
	if shown.IsZero() {
		shown = by.account()
	}
	return &identity.Evidence{
		Method: identity.MethodOIDCLogin, Purpose: purpose, Handle: h,
		From: by.account(), To: linked,
		Statement: loginStatement(server, purpose, h, shown, by, identity.Factor{}, now),
		Signature: []byte(by.IDToken), SignerKey: []byte(by.SigningKey), Created: now,
	}
}

// emailRecord is the oidc.email-verified record of the login's verified
// email.
func emailRecord(server string, h identity.Handle, l *loginData, now time.Time) *identity.Evidence {
	email := l.verifiedEmail()
	return &identity.Evidence{
		Method: identity.MethodOIDCEmailVerified, Handle: h, From: l.account(), To: email,
		Statement: loginStatement(server, "", h, email, l, email, now),
		Signature: []byte(l.IDToken), SignerKey: []byte(l.SigningKey), Created: now,
	}
}

// hasEmailRecord reports whether recs hold an unrevoked-in-effect
// oidc.email-verified record of account for email.
func hasEmailRecord(recs []identity.Evidence, account, email identity.Factor) bool {
	for _, e := range recs {
		if e.Method == identity.MethodOIDCEmailVerified && e.From.Same(account) && e.To.Same(email) {
			return true
		}
	}
	return false
}

// claimWithLogin creates the identity with handle h, with the login's
// account as its first, proven factor (an oidc.login record with purpose
// claim), and records the verified email. A refusal writes nothing.
func (h *Handler) claimWithLogin(ctx context.Context, handle identity.Handle, l *loginData) error {
	acct := l.account()
	server := h.deps.Identities.Server()
	return h.deps.Store.Update(ctx, func(ctx context.Context, tx identity.Tx) error {
		now := h.now().UTC()
		if elsewhere, err := identity.LinkedElsewhere(ctx, tx, acct, []identity.Handle{handle}, now); err != nil {
			return err
		} else if elsewhere {
			return identity.Refuse(identity.CodeFactorLinked, "this account is already linked to another identity")
		}
		if _, err := tx.CreateIdentity(ctx, handle, now); errors.Is(err, identity.ErrHandleTaken) {
			return identity.Refuse(identity.CodeHandleTaken, "the handle %q is taken", handle)
		} else if err != nil {
			return err
		}
		if err := tx.Append(ctx, loginRecord(server, identity.PurposeClaim, handle, identity.Factor{}, l, now)); err != nil {
			return err
		}
		if !l.verifiedEmail().IsZero() {
			return tx.Append(ctx, emailRecord(server, handle, l, now))
		}
		return nil
	})
}

// linkAccount links the login's account to the session's identity: the
// session's login authorises it (oidc.login from the session's account to
// the new one, purpose add) and the new login proves it (oidc.login from
// the new account, purpose add). A refusal writes nothing.
func (h *Handler) linkAccount(ctx context.Context, handle identity.Handle, by, l *loginData) error {
	acct := l.account()
	server := h.deps.Identities.Server()
	return h.deps.Store.Update(ctx, func(ctx context.Context, tx identity.Tx) error {
		now := h.now().UTC()
		_, recs, err := tx.IdentityRecords(ctx, handle)
		if errors.Is(err, identity.ErrNotFound) {
			return identity.Refuse(identity.CodeUnknownIdentity, "your identity %q no longer exists", handle)
		}
		if err != nil {
			return err
		}
		a := identity.Assess(handle, recs, now)
		if a.Proven(acct) {
			return identity.Refuse(identity.CodeAlreadyLinked, "this account is already linked to %q", handle)
		}
		if !a.Proven(by.account()) {
			return identity.Refuse(identity.CodeNotProven, "the account you are logged in with is no longer linked to %q: log in again", handle)
		}
		if elsewhere, err := identity.LinkedElsewhere(ctx, tx, acct, []identity.Handle{handle}, now); err != nil {
			return err
		} else if elsewhere {
			return identity.Refuse(identity.CodeFactorLinked, "this account is linked to another identity: log in with it and unlink it there first")
		}
		if err := tx.Append(ctx, loginRecord(server, identity.PurposeAdd, handle, acct, by, now)); err != nil {
			return err
		}
		if err := tx.Append(ctx, loginRecord(server, identity.PurposeAdd, handle, identity.Factor{}, l, now)); err != nil {
			return err
		}
		if email := l.verifiedEmail(); !email.IsZero() && !hasEmailRecord(recs, acct, email) {
			return tx.Append(ctx, emailRecord(server, handle, l, now))
		}
		return nil
	})
}

// recordEmail appends the login's oidc.email-verified record for the
// identity when none is on record for that account and email yet (a
// later login with a changed or newly verified email).
func (h *Handler) recordEmail(ctx context.Context, handle identity.Handle, l *loginData) error {
	email := l.verifiedEmail()
	if email.IsZero() {
		return nil
	}
	server := h.deps.Identities.Server()
	return h.deps.Store.Update(ctx, func(ctx context.Context, tx identity.Tx) error {
		_, recs, err := tx.IdentityRecords(ctx, handle)
		if err != nil {
			return err
		}
		if hasEmailRecord(recs, l.account(), email) {
			return nil
		}
		return tx.Append(ctx, emailRecord(server, handle, l, h.now().UTC()))
	})
}

// ErrNoSigningKey marks an oidc.login record that keeps no provider key
// to re-check its ID token with.
var ErrNoSigningKey = errors.New("the record keeps no provider key")

// VerifyOIDCRecord re-checks offline any record whose proof is an OpenID
// Connect ID token: a login or verified email (VerifyLoginRecord) or a
// session's consent to a challenge (VerifySessionConsent).
func VerifyOIDCRecord(e *identity.Evidence) error {
	var err error
	if _, perr := identity.ParseStatement(e.Statement); perr == nil {
		_, err = VerifySessionConsent(e)
	} else {
		_, err = VerifyLoginRecord(e)
	}
	return err
}

// VerifySessionConsent re-checks offline an oidc.login record the identity
// service wrote for a logged-in session's consent (linking or unlinking a
// key): its statement is a challenge naming the record's handle, and the
// ID token of the session's login must verify with the JWK the record
// keeps, be issued by the From account's issuer to the audience it names,
// and be about From's subject. The token shows the account logged in; that
// the session then consented is Kith's word.
func VerifySessionConsent(e *identity.Evidence) (*oidc.Claims, error) {
	c, err := identity.ParseStatement(e.Statement)
	if err != nil || e.Method != identity.MethodOIDCLogin {
		return nil, fmt.Errorf("web: verify consent record %d: not a session's consent to a challenge", e.Seq)
	}
	if c.Handle != e.Handle {
		return nil, fmt.Errorf("web: verify consent record %d: the statement names handle %q, the record %q", e.Seq, c.Handle, e.Handle)
	}
	issuer, subject, ok := strings.Cut(e.From.Value, " ")
	if e.From.Kind != identity.KindOIDC || !ok {
		return nil, fmt.Errorf("web: verify consent record %d: signer %s is not an OpenID Connect account", e.Seq, e.From)
	}
	if len(e.SignerKey) == 0 {
		return nil, fmt.Errorf("web: verify consent record %d: %w", e.Seq, ErrNoSigningKey)
	}
	aud, err := tokenAudience(string(e.Signature))
	if err != nil {
		return nil, fmt.Errorf("web: verify consent record %d: %w", e.Seq, err)
	}
	claims, err := oidc.VerifyEvidence(string(e.Signature), e.SignerKey, issuer, aud)
	if err != nil {
		return nil, fmt.Errorf("web: verify consent record %d: %w", e.Seq, err)
	}
	if claims.Subject != subject {
		return nil, fmt.Errorf("web: verify consent record %d: the token is about subject %q, the record names %q", e.Seq, claims.Subject, subject)
	}
	return claims, nil
}

// tokenAudience reads the first audience of a JWT without verifying it;
// VerifyEvidence then checks the token against it.
func tokenAudience(raw string) (string, error) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return "", errors.New("the token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", errors.New("the token's payload is not base64url")
	}
	var claims struct {
		Aud json.RawMessage `json:"aud"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return "", errors.New("the token's payload is not JSON")
	}
	var one string
	if json.Unmarshal(claims.Aud, &one) == nil && one != "" {
		return one, nil
	}
	var many []string
	if json.Unmarshal(claims.Aud, &many) == nil && len(many) > 0 {
		return many[0], nil
	}
	return "", errors.New("the token names no audience")
}

// VerifyLoginRecord re-checks an oidc.login or oidc.email-verified record
// offline: the ID token in Signature must verify with the JWK in
// SignerKey (oidc.VerifyEvidence), be issued by the From account's issuer
// to the client_id the Statement names, and be about From's subject; an
// oidc.email-verified record's token must also assert that the email (To)
// is verified. It returns the token's claims. That the JWK was the
// provider's is what Kith recorded when it fetched it.
func VerifyLoginRecord(e *identity.Evidence) (*oidc.Claims, error) {
	if e.Method != identity.MethodOIDCLogin && e.Method != identity.MethodOIDCEmailVerified {
		return nil, fmt.Errorf("web: verify login record %d: method %s", e.Seq, e.Method)
	}
	issuer, subject, ok := strings.Cut(e.From.Value, " ")
	if e.From.Kind != identity.KindOIDC || !ok {
		return nil, fmt.Errorf("web: verify login record %d: signer %s is not an OpenID Connect account", e.Seq, e.From)
	}
	if len(e.SignerKey) == 0 {
		return nil, fmt.Errorf("web: verify login record %d: %w", e.Seq, ErrNoSigningKey)
	}
	fields, err := parseLoginStatement(e.Statement)
	if err != nil {
		return nil, fmt.Errorf("web: verify login record %d: %w", e.Seq, err)
	}
	if fields["signer"] != e.From.String() || fields["handle"] != string(e.Handle) || fields["purpose"] != string(e.Purpose) {
		return nil, fmt.Errorf("web: verify login record %d: the statement does not describe the record", e.Seq)
	}
	c, err := oidc.VerifyEvidence(string(e.Signature), e.SignerKey, issuer, fields["client_id"])
	if err != nil {
		return nil, fmt.Errorf("web: verify login record %d: %w", e.Seq, err)
	}
	if c.Subject != subject {
		return nil, fmt.Errorf("web: verify login record %d: the token is about subject %q, the record names %q", e.Seq, c.Subject, subject)
	}
	if e.Method == identity.MethodOIDCEmailVerified {
		if !c.EmailVerified || !identity.EmailFactor(c.Email).Same(e.To) {
			return nil, fmt.Errorf("web: verify login record %d: the token does not assert %s as verified", e.Seq, e.To.Value)
		}
	}
	return c, nil
}

// parseLoginStatement reads the "name: value" lines of a login statement.
func parseLoginStatement(b []byte) (map[string]string, error) {
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n"), "\n")
	if len(lines) < 3 || lines[0] != loginStatementTitle || lines[1] != "" {
		return nil, fmt.Errorf("not a login statement")
	}
	fields := map[string]string{}
	for _, l := range lines[2:] {
		k, v, ok := strings.Cut(l, ": ")
		if !ok {
			return nil, fmt.Errorf("statement line %q is not \"name: value\"", l)
		}
		if _, dup := fields[k]; dup {
			return nil, fmt.Errorf("statement gives %s twice", k)
		}
		fields[k] = v
	}
	if fields["client_id"] == "" {
		return nil, fmt.Errorf("statement names no client_id")
	}
	return fields, nil
}
