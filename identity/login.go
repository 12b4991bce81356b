// login.go: OpenID Connect logins as the identity service takes them, and
// the statement an oidc.login or oidc.email-verified record keeps beside
// the ID token that proves it.

package identity

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

// Login is an OpenID Connect login a frontend completed: the account and
// the artifacts that let anyone re-check it offline. The Service has the
// Verifier re-check the ID token against the JWK before it records
// anything, so a Login cannot be made up from an account's name alone.
type Login struct {
	// Account is the account's OIDC factor (issuer and subject).
	Account Factor
	// Provider is the provider's configured name.
	Provider string
	// ClientID is the client the ID token was issued to (its audience).
	ClientID string
	// AuthTime is when the account authenticated.
	AuthTime time.Time
	// IDToken is the compact JWT the provider signed.
	IDToken string
	// SigningKey is the provider's public key (a JWK) that verified the
	// token.
	SigningKey []byte
	// Email is the email the provider verified, or zero.
	Email Factor
	// PublicToken says the ID token carries no claim beyond those its
	// record shows (the account, the client, times and the nonce: what a
	// consent login, which asks for scope openid only, gets back), so it
	// stays in the public entry, where anyone can check it. Any other
	// token is kept out of the entry, as a private artifact the record
	// commits to.
	PublicToken bool
	// Nonce, when set, is the nonce the ID token must carry: a consent
	// login's commitment to its statement (see Consent). The Service sets
	// it; a frontend leaves it empty.
	Nonce string
	// Subject and SubjectSalt, for a pseudonymous Account (see
	// Service.OIDCAccount), are the account's subject and the salt its
	// pseudonym commits to it with. Every record carrying the login's ID
	// token (which names the subject) then keeps the token private and
	// commits to the subject.
	Subject     string
	SubjectSalt []byte
	// Claims are the values of the claims the Service reads from the ID
	// token, by name (a device login's, for ClaimPrincipals); the
	// Verifier checks each against the token.
	Claims map[string][]string
}

// subjectArtifact returns the artifact of a pseudonymous account's
// subject, nil for an account recorded under its subject.
func (l Login) subjectArtifact() *Artifact {
	if !l.Account.Pseudonymous() {
		return nil
	}
	a := SubjectArtifact(l.SubjectSalt, l.Subject)
	return &a
}

// OIDCAccount returns the factor a login by the account with issuer and
// subject is recorded under, and, for a pseudonymous one, the salt its
// pseudonym commits with (see Login.Subject). An account whose subject is
// opaque (OpaqueSubject) is recorded under it, and so is one the store
// knows by its subject already (recorded before accounts were
// pseudonymous), so that its identity stays its own. Any other account
// (a subject that is an address or a directory name) is pseudonymous,
// with one salt, made on its first login and kept until its identity is
// deleted; its ID tokens, which name the subject, are then private
// artifacts too, so its consent logins are checked only with its owner's
// artifacts.
func (s *Service) OIDCAccount(ctx context.Context, issuer, subject string) (Factor, []byte, error) {
	clear := OIDCFactor(issuer, subject)
	if err := clear.Validate(); err != nil {
		return Factor{}, nil, RefuseErr(CodeBadFactor, err, "bad account")
	}
	if OpaqueSubject(subject) {
		return clear, nil, nil
	}
	fresh := make([]byte, ArtifactSaltSize)
	if _, err := io.ReadFull(s.rand, fresh); err != nil {
		return Factor{}, nil, fmt.Errorf("identity: account salt: %w", err)
	}
	salt, known, err := s.store.AccountSalt(ctx, issuer, subject, fresh)
	if err != nil {
		return Factor{}, nil, fmt.Errorf("identity: account of %s: %w", issuer, err)
	}
	if known {
		return clear, nil, nil
	}
	return PseudonymousOIDCFactor(issuer, salt, subject), salt, nil
}

// OpaqueSubject reports whether an OpenID Connect subject looks like an
// identifier that names no one (a number, a UUID, a random string), as
// OpenID Connect asks subjects to be: it holds no "@", "=", ",", space or
// control character, and, base64-decoded, no address or directory name
// (some providers wrap an LDAP name or an address with their connector's
// name in base64). A user name is not caught: it passes for opaque.
func OpaqueSubject(sub string) bool {
	personal := func(s string) bool {
		return strings.ContainsAny(s, "@=, \t\n") || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 && r != 0 })
	}
	trimmed := strings.TrimRight(sub, "=")
	if personal(trimmed) {
		return false
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(trimmed); err == nil && wrappedName.Match(b) {
			return false
		}
	}
	return true
}

// wrappedName finds an address or a directory name's attribute inside a
// decoded subject.
var wrappedName = regexp.MustCompile(`(?i)[a-z0-9._%+-]+@[a-z0-9-]+(\.[a-z0-9-]+)+|\b(cn|uid|ou|dc|o|mail)=`)

// LoginStatementTitle starts the statement of every login record.
const LoginStatementTitle = "Kith OpenID Connect login"

// loginStatement is the text a login record keeps beside its ID token: it
// names the server, what the record links, and the client the token was
// issued to, which is what a verifier needs to re-check the token. It is
// not signed by anyone: the ID token is the proof.
func loginStatement(server string, purpose Purpose, h Handle, linked Factor, by Login, email Factor, now time.Time) []byte {
	var b strings.Builder
	b.WriteString(LoginStatementTitle + "\n\n")
	fmt.Fprintf(&b, "server: %s\n", server)
	if purpose != "" {
		fmt.Fprintf(&b, "purpose: %s\n", purpose)
	}
	fmt.Fprintf(&b, "handle: %s\n", h)
	if !email.IsZero() {
		b.WriteString("factor: email (kept private; the record commits to it)\n")
	} else {
		fmt.Fprintf(&b, "factor: %s\n", linked)
	}
	if !email.IsZero() {
		// The address is a private artifact the record commits to.
		linked = Factor{}
	}
	fmt.Fprintf(&b, "signer: %s\n", by.Account)
	fmt.Fprintf(&b, "provider: %s\n", by.Provider)
	fmt.Fprintf(&b, "client_id: %s\n", by.ClientID)
	fmt.Fprintf(&b, "authenticated: %s\n", by.AuthTime.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "recorded: %s\n", now.UTC().Format(time.RFC3339))
	return []byte(b.String())
}

// ParseLoginStatement reads the "name: value" lines of a login
// statement.
func ParseLoginStatement(b []byte) (map[string]string, error) {
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n"), "\n")
	if len(lines) < 3 || lines[0] != LoginStatementTitle || lines[1] != "" {
		return nil, fmt.Errorf("%w: not a login statement", ErrBadStatement)
	}
	fields := map[string]string{}
	for _, l := range lines[2:] {
		k, v, ok := strings.Cut(l, ": ")
		if !ok {
			return nil, fmt.Errorf("%w: login statement line %q is not \"name: value\"", ErrBadStatement, l)
		}
		if _, dup := fields[k]; dup {
			return nil, fmt.Errorf("%w: login statement gives %s twice", ErrBadStatement, k)
		}
		fields[k] = v
	}
	if fields["client_id"] == "" {
		return nil, fmt.Errorf("%w: login statement names no client_id", ErrBadStatement)
	}
	return fields, nil
}

// loginRecord is the oidc.login record of the login by, linking linked
// (zero: by's account to the identity). Its ID token is a private
// artifact unless by.PublicToken.
func (s *Service) loginRecord(purpose Purpose, h Handle, linked Factor, by Login, now time.Time) (*Evidence, error) {
	shown := linked
	if shown.IsZero() {
		shown = by.Account
	}
	e := &Evidence{
		Method: MethodOIDCLogin, Purpose: purpose, Handle: h, From: by.Account, To: linked,
		Statement: loginStatement(s.server, purpose, h, shown, by, Factor{}, now),
		Signature: []byte(by.IDToken), SignerKey: by.SigningKey, Created: now,
		subject: by.subjectArtifact(),
	}
	if by.PublicToken {
		return e, nil
	}
	return e, e.makePrivate(s.rand, false)
}

// emailRecord is the oidc.email-verified record of the login's verified
// email: the address and the ID token are private artifacts the record
// commits to.
func (s *Service) emailRecord(h Handle, l Login, now time.Time) (*Evidence, error) {
	e := &Evidence{
		Method: MethodOIDCEmailVerified, Handle: h, From: l.Account, To: l.Email,
		Statement: loginStatement(s.server, "", h, l.Email, l, l.Email, now),
		Signature: []byte(l.IDToken), SignerKey: l.SigningKey, Created: now,
		subject: l.subjectArtifact(),
	}
	return e, e.makePrivate(s.rand, true)
}

// appendEmail appends the emailRecord of l.
func (s *Service) appendEmail(ctx context.Context, tx Tx, h Handle, l Login, now time.Time) error {
	e, err := s.emailRecord(h, l, now)
	if err != nil {
		return err
	}
	return tx.Append(ctx, e)
}

// hasEmailRecord reports whether recs hold an oidc.email-verified record
// of account for email.
func hasEmailRecord(recs []Evidence, account, email Factor) bool {
	for _, e := range recs {
		if e.Method == MethodOIDCEmailVerified && e.From.Same(account) && e.To.Same(email) {
			return true
		}
	}
	return false
}

// ClaimWithLogin creates the identity that the claim statement names,
// with the consent login's account (the statement's factor) as its first,
// proven factor: an oidc.login record with purpose claim, whose ID token's
// nonce commits to the statement. It records the login's verified email
// too, from first, the login of the same account that proposed the claim
// (a consent login asks for no email). The statement is one
// IssueChallenge issued for the account, and is consumed.
func (s *Service) ClaimWithLogin(ctx context.Context, statement []byte, consent Consent, first Login) (Identity, error) {
	c, err := s.statement(statement, PurposeClaim)
	if err != nil {
		return Identity{}, err
	}
	if _, host := c.Handle.Host(); host {
		return Identity{}, Refuse(CodeUnsupported, "a host identity is claimed with a host key's signature, not a login")
	}
	l, err := consent.check(statement)
	if err != nil {
		return Identity{}, err
	}
	if !c.Factor.Same(l.Account) {
		return Identity{}, Refuse(CodeWrongKey, "the statement names %s, the login is by %s", c.Factor, l.Account)
	}
	v, err := s.verifyLogin(ctx, l)
	if err != nil {
		return Identity{}, err
	}
	v.consent = consent.Salt
	if !first.Email.IsZero() {
		if !first.Account.Same(l.Account) {
			return Identity{}, Refuse(CodeWrongKey, "the email's login is by %s, the claim's by %s", first.Account, l.Account)
		}
		if _, err := s.verifyLogin(ctx, first); err != nil {
			return Identity{}, err
		}
	}
	var id Identity
	err = s.update(ctx, func(ctx context.Context, tx Tx) error {
		now := s.clock()
		if err := s.consume(ctx, tx, c, statement, now); err != nil {
			return err
		}
		var err error
		if id, err = s.create(ctx, tx, c.Handle, v.factor, now); CodeOf(err) == CodeFactorLinked {
			return Refuse(CodeFactorLinked, "this account is already linked to another identity")
		} else if err != nil {
			return err
		}
		if err := tx.Append(ctx, record(v, c, Factor{}, statement, "", now)); err != nil {
			return err
		}
		if !first.Email.IsZero() {
			return s.appendEmail(ctx, tx, c.Handle, first, now)
		}
		return nil
	})
	return id, wrapOp("claim with login", err)
}

// LinkLogin links the login l's account to the identity the add statement
// names (the statement names l's account): the consent login by, by an
// account proven for the identity, authorises it (an oidc.login record
// from by's account to the new one, purpose add, whose ID token's nonce
// commits to the statement) and l proves it (an oidc.login from the new
// account, purpose add). The statement is consumed.
func (s *Service) LinkLogin(ctx context.Context, statement []byte, by Consent, l Login) error {
	c, err := s.statement(statement, PurposeAdd)
	if err != nil {
		return err
	}
	if !c.Factor.Same(l.Account) {
		return Refuse(CodeWrongKey, "the statement names %s, the login is by %s", c.Factor, l.Account)
	}
	bl, err := by.check(statement)
	if err != nil {
		return err
	}
	if bl.Account.Same(l.Account) {
		return Refuse(CodeNotProven, "a factor cannot authorise itself")
	}
	bv, err := s.verifyLogin(ctx, bl)
	if err != nil {
		return err
	}
	bv.consent = by.Salt
	if _, err := s.verifyLogin(ctx, l); err != nil {
		return err
	}
	h := c.Handle
	err = s.update(ctx, func(ctx context.Context, tx Tx) error {
		now := s.clock()
		if err := s.consume(ctx, tx, c, statement, now); err != nil {
			return err
		}
		_, recs, err := tx.IdentityRecords(ctx, h)
		if errors.Is(err, ErrNotFound) {
			return Refuse(CodeUnknownIdentity, "your identity %q no longer exists", h)
		}
		if err != nil {
			return err
		}
		a := Assess(h, recs, now)
		if a.Proven(l.Account) {
			return Refuse(CodeAlreadyLinked, "this account is already linked to %q", h)
		}
		if !a.Proven(bv.factor) {
			return Refuse(CodeNotProven, "the account you are logged in with is no longer linked to %q: log in again", h)
		}
		if err := s.checkFree(ctx, tx, h, l.Account); CodeOf(err) == CodeFactorLinked {
			return Refuse(CodeFactorLinked, "this account is linked to another identity: log in with it and unlink it there first")
		} else if err != nil {
			return err
		}
		if err := tx.Append(ctx, record(bv, c, l.Account, statement, "", now)); err != nil {
			return err
		}
		possession, err := s.loginRecord(PurposeAdd, h, Factor{}, l, now)
		if err != nil {
			return err
		}
		if err := tx.Append(ctx, possession); err != nil {
			return err
		}
		if !l.Email.IsZero() && !hasEmailRecord(recs, l.Account, l.Email) {
			return s.appendEmail(ctx, tx, h, l, now)
		}
		return nil
	})
	return wrapOp("link login", err)
}

// RecordLoginEmail records the login's verified email for the identity h,
// whose proven account l is, when no record of that account and email
// exists yet (a later login with a changed or newly verified email).
func (s *Service) RecordLoginEmail(ctx context.Context, h Handle, l Login) error {
	if l.Email.IsZero() {
		return nil
	}
	if _, err := s.verifyLogin(ctx, l); err != nil {
		return err
	}
	err := s.update(ctx, func(ctx context.Context, tx Tx) error {
		now := s.clock()
		_, recs, err := tx.IdentityRecords(ctx, h)
		if errors.Is(err, ErrNotFound) {
			return Refuse(CodeUnknownIdentity, "no identity has handle %q", h)
		}
		if err != nil {
			return err
		}
		if !Assess(h, recs, now).Proven(l.Account) {
			return Refuse(CodeNotProven, "%s is not a proven factor of %q", l.Account, h)
		}
		if hasEmailRecord(recs, l.Account, l.Email) {
			return nil
		}
		return s.appendEmail(ctx, tx, h, l, now)
	})
	return wrapOp("record login email", err)
}

// DeleteWithSession ends the identity that the delete statement names,
// with the consent of a logged-in session: a fresh login by the
// statement's account, proven for the identity, whose ID token's nonce
// commits to the statement. It revokes every factor linked to the
// identity in one transaction, the approving account last (a revocation
// counts only while its signer is proven); each revocation keeps the
// statement, the consent token and its salt, so it verifies offline.
// Factors a linked key carries end with the key. The identity's private
// artifacts are erased. It returns the handle and how many factors it
// revoked; the handle stays taken. The statement is consumed.
func (s *Service) DeleteWithSession(ctx context.Context, statement []byte, consent Consent) (Handle, int, error) {
	c, err := s.statement(statement, PurposeDelete)
	if err != nil {
		return "", 0, err
	}
	l, err := consent.check(statement)
	if err != nil {
		return "", 0, err
	}
	if !c.Factor.Same(l.Account) {
		return "", 0, Refuse(CodeWrongKey, "the statement names %s, the login is by %s", c.Factor, l.Account)
	}
	bv, err := s.verifyLogin(ctx, l)
	if err != nil {
		return "", 0, err
	}
	bv.consent = consent.Salt
	h := c.Handle
	n := 0
	err = s.update(ctx, func(ctx context.Context, tx Tx) error {
		now := s.clock()
		if err := s.consume(ctx, tx, c, statement, now); err != nil {
			return err
		}
		a, err := s.assess(ctx, tx, h, now)
		if err != nil {
			return err
		}
		if !a.Proven(bv.factor) {
			return Refuse(CodeNotProven, "the account you are logged in with is no longer linked: log in again")
		}
		var targets []Factor
		for _, st := range a.Factors {
			if st.Level < LevelExpired || !st.Parent.IsZero() || !st.Factor.Provable() || st.Factor.Same(bv.factor) {
				continue
			}
			targets = append(targets, st.Factor)
		}
		targets = append(targets, bv.factor)
		for _, f := range targets {
			e := record(bv, c, f, statement, DeletedLabel, now)
			e.Method = MethodRevocation
			if st, ok := a.Status(f); ok && len(st.Via) > 0 {
				e.Revokes = st.Via[len(st.Via)-1]
			}
			if err := tx.Append(ctx, e); err != nil {
				return err
			}
		}
		n = len(targets)
		// The identity's private artifacts (its provider-verified emails
		// and ID tokens) go; the records keep their commitments, so the
		// log still verifies. The consent tokens above are public (scope
		// openid: the account, the client and the nonce), as they must
		// be for the deletion to verify.
		_, err = tx.EraseArtifacts(ctx, h)
		return err
	})
	if err != nil {
		return "", 0, wrapOp("delete", err)
	}
	return h, n, nil
}

// DeletedLabel labels the revocations that end a deleted identity.
const DeletedLabel = "identity deleted at its holder's request"

// LoginWithKey checks a signed login statement and returns the identity
// it logs in to and the key that signed: the statement's key must be
// proven for the identity now, and the statement is consumed, so that it
// opens one session. Like an OpenID Connect login it writes no record:
// it proves possession to this server, for a session, and nothing that a
// third party needs to re-check.
func (s *Service) LoginWithKey(ctx context.Context, statement []byte, p Proof) (Handle, Factor, error) {
	c, err := s.statement(statement, PurposeLogin)
	if err != nil {
		return "", Factor{}, err
	}
	v, err := s.verify(ctx, p, c.Factor, statement)
	if err != nil {
		return "", Factor{}, err
	}
	err = s.update(ctx, func(ctx context.Context, tx Tx) error {
		now := s.clock()
		if err := s.consume(ctx, tx, c, statement, now); err != nil {
			return err
		}
		a, err := s.assess(ctx, tx, c.Handle, now)
		if err != nil {
			return err
		}
		if !a.Proven(v.factor) {
			return Refuse(CodeNotProven, "%s is not a proven factor of %q", v.factor, c.Handle)
		}
		return nil
	})
	if err != nil {
		return "", Factor{}, wrapOp("login", err)
	}
	return c.Handle, v.factor, nil
}
