// evidence.go: what Kith keeps of a login, and how the pages hand it to
// the identity service, which writes the evidence records (oidc.login,
// oidc.email-verified); identity/verify re-checks them offline.

package web

import (
	"context"
	"encoding/json"
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
	// PublicToken: the ID token carries nothing private (a consent
	// login's), so its record may show it.
	PublicToken bool   `json:"public_token,omitempty"`
	Next        string `json:"next,omitempty"`
	// KeyKind and KeyValue are set for a login by key (LoginWithKey):
	// the session's account is then that key, and its consent to a
	// change is that key's signature, asked for each time.
	KeyKind  identity.FactorKind `json:"key_kind,omitempty"`
	KeyValue string              `json:"key_value,omitempty"`
	// SubjectSalt, for an account recorded under a pseudonym, is the salt
	// the pseudonym commits to the subject with (see
	// identity.Service.OIDCAccount); nil for one known by its subject.
	SubjectSalt []byte `json:"subject_salt,omitempty"`
}

// byKey reports whether the login was by a key's signature.
func (l *loginData) byKey() bool { return l.KeyKind != "" }

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
		PublicToken: l.MinimalClaims,
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
func (l *loginData) account() identity.Factor {
	if l.byKey() {
		return identity.Factor{Kind: l.KeyKind, Value: l.KeyValue}
	}
	if l.SubjectSalt != nil {
		return identity.PseudonymousOIDCFactor(l.Issuer, l.SubjectSalt, l.Subject)
	}
	return identity.OIDCFactor(l.Issuer, l.Subject)
}

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

// login is the login as the identity service takes it.
func (l *loginData) login() identity.Login {
	return identity.Login{
		Account: l.account(), Provider: l.Provider, ClientID: l.ClientID, AuthTime: l.AuthTime,
		IDToken: l.IDToken, SigningKey: []byte(l.SigningKey), Email: l.verifiedEmail(), PublicToken: l.PublicToken,
		Subject: l.Subject, SubjectSalt: l.SubjectSalt,
	}
}

// recordEmail records the login's verified email for the identity when
// none is on record for that account and email yet.
func (h *Handler) recordEmail(ctx context.Context, handle identity.Handle, l *loginData) error {
	return h.deps.Identities.RecordLoginEmail(ctx, handle, l.login())
}
