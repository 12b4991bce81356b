// login.go: re-checking OpenID Connect evidence offline: a login or
// verified email record (the ID token against the JWK it keeps and the
// client its statement names), a session's consent to a challenge, and a
// login a frontend hands the identity service.

package verify

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/oidc"
)

// ErrNoSigningKey marks an OpenID Connect record that keeps no provider
// key to re-check its ID token with.
var ErrNoSigningKey = errors.New("the record keeps no provider key")

// VerifyLogin re-checks a completed login before the identity service
// records it (see identity.Verifier).
func (v *Verifier) VerifyLogin(ctx context.Context, l identity.Login) error {
	issuer, subject, err := oidcAccount(l.Account)
	if err != nil {
		return identity.RefuseErr(identity.CodeBadFactor, err, "bad account")
	}
	if l.Account.Pseudonymous() {
		if !identity.PseudonymousOIDCFactor(issuer, l.SubjectSalt, l.Subject).Same(l.Account) {
			return identity.Refuse(identity.CodeBadFactor, "the account's pseudonym does not commit to the login's subject")
		}
		subject = l.Subject
	}
	c, err := oidc.VerifyEvidence(l.IDToken, l.SigningKey, issuer, l.ClientID)
	if err != nil {
		return identity.RefuseErr(identity.CodeBadSignature, err, "the ID token does not verify")
	}
	if c.Subject != subject {
		return identity.Refuse(identity.CodeBadSignature, "the ID token is about subject %q, not %q", c.Subject, subject)
	}
	if !l.Email.IsZero() && (!c.EmailVerified || !identity.EmailFactor(c.Email).Same(l.Email)) {
		return identity.Refuse(identity.CodeBadSignature, "the ID token does not assert %s as verified", l.Email.Value)
	}
	if l.Nonce != "" && c.Nonce != l.Nonce {
		return identity.Refuse(identity.CodeBadSignature, "the ID token's nonce does not commit to the statement: it was not issued for this approval")
	}
	for name, want := range l.Claims {
		if got := c.Strings(name); !slices.Equal(got, want) {
			return identity.Refuse(identity.CodeBadSignature, "the ID token's claim %s is %q, not %q", name, got, want)
		}
	}
	return nil
}

// oidcAccount splits an OIDC factor into issuer and subject.
func oidcAccount(f identity.Factor) (issuer, subject string, err error) {
	issuer, subject, ok := strings.Cut(f.Value, " ")
	if f.Kind != identity.KindOIDC || !ok {
		return "", "", fmt.Errorf("%s is not an OpenID Connect account", f)
	}
	return issuer, subject, nil
}

// recordSubject returns the subject of the account f that a record's ID
// token must be about: f's own, or, for a pseudonymous account, the
// subject the record's revealed artifact opens, after checking that it is
// the one f's pseudonym commits to. Call it once withheld(e) passed.
func recordSubject(e *identity.Evidence, f identity.Factor) (string, error) {
	issuer, subject, err := oidcAccount(f)
	if err != nil || !f.Pseudonymous() {
		return subject, err
	}
	for _, a := range e.Artifacts {
		if a.Kind == identity.ArtifactSubject {
			if !identity.PseudonymousOIDCFactor(issuer, a.Salt, string(a.Value)).Same(f) {
				return "", fmt.Errorf("the revealed subject is not the one the account's pseudonym commits to")
			}
			return string(a.Value), nil
		}
	}
	return "", fmt.Errorf("%w: the subject of the pseudonymous account is kept private", ErrWithheld)
}

// oidcRecord re-checks a record whose proof is an ID token: a session's
// consent to a challenge (its statement is one) or a login record.
func oidcRecord(e *identity.Evidence) error {
	var err error
	if _, perr := identity.ParseStatement(e.Statement); perr == nil {
		_, err = SessionConsent(e)
	} else {
		_, err = LoginRecord(e)
	}
	return err
}

// ErrNoConsent marks a record whose ID token authorises its statement
// but whose nonce does not commit to it: the token shows that the account
// logged in, not that it approved this record (the session consents Kith
// recorded before consent logins, or a token replayed into a made-up
// record).
var ErrNoConsent = errors.New("the ID token's nonce does not commit to the statement")

// ErrWithheld marks a record whose proof needs a private artifact that
// the record only commits to (an ID token, an address, a user ID, the
// whole OpenPGP key): nobody can check it without the artifact, which its
// owner may hand out. Such a record is not verified, nor failed:
// LogVerifier reports it as unchecked, after checking all the rest.
var ErrWithheld = errors.New("its proof is a private artifact")

// ErrErased marks a withheld record whose artifacts the server says it
// erased (its identity or key was deleted, or an operator blocked them):
// errors.Is(err, ErrWithheld) holds too.
var ErrErased = fmt.Errorf("%w: artifact erased", ErrWithheld)

// artifactNames name the kinds of artifacts in messages.
var artifactNames = map[identity.ArtifactKind]string{
	identity.ArtifactIDToken:   "ID token",
	identity.ArtifactEmail:     "email address",
	identity.ArtifactStatement: "statement",
	identity.ArtifactSignature: "signature",
	identity.ArtifactPGPKey:    "whole OpenPGP key",
	identity.ArtifactSubject:   "account's subject",
}

// revealed reports whether e holds its artifact of kind k: among its
// Artifacts, or in place in a full record.
func revealed(e *identity.Evidence, k identity.ArtifactKind) bool {
	if _, ok := e.Artifact(k); ok {
		return true
	}
	switch k {
	case identity.ArtifactIDToken, identity.ArtifactSignature:
		return len(e.Signature) > 0
	case identity.ArtifactEmail:
		return e.To.Value != ""
	case identity.ArtifactStatement:
		return len(e.Statement) > 0
	}
	return false
}

// withheld returns ErrWithheld (ErrErased when the server says it erased
// them), wrapped, when e lacks an artifact it commits to.
func withheld(e *identity.Evidence) error {
	missing := []string{}
	for _, c := range e.Commitments {
		if !revealed(e, c.Kind) {
			name := artifactNames[c.Kind]
			if name == "" {
				name = string(c.Kind)
			}
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	why, sentinel := "kept private", ErrWithheld
	if e.Erased {
		why, sentinel = "gone", ErrErased
	}
	return fmt.Errorf("%w: the %s %s %s; the record keeps a salted commitment, so its chain, inclusion and public packets are checked but not what it commits to",
		sentinel, strings.Join(missing, " and "), map[bool]string{true: "are", false: "is"}[len(missing) > 1], why)
}

// SessionConsent re-checks offline a record the identity service wrote
// for a consent login (an oidc.login claiming a handle or adding a
// factor, or a revocation): its statement is a challenge naming the
// record's handle and factor, and the ID token must verify with the JWK
// the record keeps, be issued by the From account's issuer to the
// audience it names, be about From's subject, and carry the nonce
// identity.ConsentNonce(Statement, Consent): so the provider signed the
// very statement the record approves.
func SessionConsent(e *identity.Evidence) (*oidc.Claims, error) {
	if e.Method != identity.MethodOIDCLogin && e.Method != identity.MethodRevocation {
		return nil, fmt.Errorf("verify consent record %d: method %s", e.Seq, e.Method)
	}
	if err := checkStatement(e); err != nil {
		return nil, fmt.Errorf("verify consent record %d: %w", e.Seq, err)
	}
	issuer, _, err := oidcAccount(e.From)
	if err != nil {
		return nil, fmt.Errorf("verify consent record %d: signer: %w", e.Seq, err)
	}
	if len(e.SignerKey) == 0 {
		return nil, fmt.Errorf("verify consent record %d: %w", e.Seq, ErrNoSigningKey)
	}
	if err := withheld(e); err != nil {
		return nil, fmt.Errorf("verify consent record %d: %w", e.Seq, err)
	}
	subject, err := recordSubject(e, e.From)
	if err != nil {
		return nil, fmt.Errorf("verify consent record %d: %w", e.Seq, err)
	}
	aud, err := tokenAudience(string(e.Signature))
	if err != nil {
		return nil, fmt.Errorf("verify consent record %d: %w", e.Seq, err)
	}
	claims, err := oidc.VerifyEvidence(string(e.Signature), e.SignerKey, issuer, aud)
	if err != nil {
		return nil, fmt.Errorf("verify consent record %d: %w", e.Seq, err)
	}
	if claims.Subject != subject {
		return nil, fmt.Errorf("verify consent record %d: the token is about subject %q, the record names %q", e.Seq, claims.Subject, subject)
	}
	if len(e.Consent) == 0 {
		return nil, fmt.Errorf("verify consent record %d: %w: the record keeps no consent salt, so the token shows only that the account logged in, not that it approved this", e.Seq, ErrNoConsent)
	}
	if want := identity.ConsentNonce(e.Statement, e.Consent); claims.Nonce != want {
		return nil, fmt.Errorf("verify consent record %d: %w: the token's nonce is %q, the commitment to this statement and salt is %q", e.Seq, ErrNoConsent, clipped(claims.Nonce), want)
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

// LoginRecord re-checks an oidc.login or oidc.email-verified record
// offline: the ID token in Signature must verify with the JWK in
// SignerKey (oidc.VerifyEvidence), be issued by the From account's issuer
// to the client_id the Statement names, and be about From's subject; an
// oidc.email-verified record's token must also assert that the email (To)
// is verified. It returns the token's claims. That the JWK was the
// provider's is what Kith recorded when it fetched it.
func LoginRecord(e *identity.Evidence) (*oidc.Claims, error) {
	if e.Method != identity.MethodOIDCLogin && e.Method != identity.MethodOIDCEmailVerified {
		return nil, fmt.Errorf("verify login record %d: method %s", e.Seq, e.Method)
	}
	issuer, _, err := oidcAccount(e.From)
	if err != nil {
		return nil, fmt.Errorf("verify login record %d: signer: %w", e.Seq, err)
	}
	if len(e.SignerKey) == 0 {
		return nil, fmt.Errorf("verify login record %d: %w", e.Seq, ErrNoSigningKey)
	}
	fields, err := identity.ParseLoginStatement(e.Statement)
	if err != nil {
		return nil, fmt.Errorf("verify login record %d: %w", e.Seq, err)
	}
	if fields["signer"] != e.From.String() || fields["handle"] != string(e.Handle) || fields["purpose"] != string(e.Purpose) {
		return nil, fmt.Errorf("verify login record %d: the statement does not describe the record", e.Seq)
	}
	// A login statement is written after the login, so the token cannot
	// cover it: it may show that an account logged in, never authorise a
	// claim or another factor's link (those come with a consent login).
	if e.Purpose == identity.PurposeClaim || e.Purpose == identity.PurposeRevoke || e.Method == identity.MethodOIDCLogin && !e.To.IsZero() {
		return nil, fmt.Errorf("verify login record %d: %w: a login statement cannot authorise a %s (the records made before consent logins)", e.Seq, ErrNoConsent, purposeOrLink(e))
	}
	if len(e.Consent) > 0 {
		return nil, fmt.Errorf("verify login record %d: a login statement record with a consent salt", e.Seq)
	}
	if err := withheld(e); err != nil {
		return nil, fmt.Errorf("verify login record %d: %w", e.Seq, err)
	}
	subject, err := recordSubject(e, e.From)
	if err != nil {
		return nil, fmt.Errorf("verify login record %d: %w", e.Seq, err)
	}
	c, err := oidc.VerifyEvidence(string(e.Signature), e.SignerKey, issuer, fields["client_id"])
	if err != nil {
		return nil, fmt.Errorf("verify login record %d: %w", e.Seq, err)
	}
	if c.Subject != subject {
		return nil, fmt.Errorf("verify login record %d: the token is about subject %q, the record names %q", e.Seq, c.Subject, subject)
	}
	if e.Method == identity.MethodOIDCEmailVerified {
		if !c.EmailVerified || !identity.EmailFactor(c.Email).Same(e.To) {
			return nil, fmt.Errorf("verify login record %d: the token does not assert %s as verified", e.Seq, e.To.Value)
		}
	}
	return c, nil
}

// purposeOrLink names what a login record would authorise.
func purposeOrLink(e *identity.Evidence) string {
	if e.Purpose == identity.PurposeClaim {
		return "claim"
	}
	return "link to " + e.To.String()
}

// clipped shortens a value from a token for an error message.
func clipped(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
