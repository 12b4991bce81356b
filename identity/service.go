// service.go: the one authority for identity writes. Every frontend (the
// JSON API, the pages and their OpenID Connect logins, the key upload
// paths) changes identities only through a Service: issuing challenges,
// claiming a handle, adding and revoking factors, logins, deletion, and
// refreshing the links a changed key carries. Each write is one store
// transaction: a refusal writes nothing. After a write commits, the
// Service tells its subscribers (this node's caches) which identities
// changed before it returns, so the writer reads its own write.

package identity

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// ServiceOptions configure a Service.
type ServiceOptions struct {
	// Server names this server in statements, e.g. "Kith
	// <https://keys.example.org>". Statements naming another server are
	// refused.
	Server string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Rand is the source of nonces; nil means crypto/rand.
	Rand io.Reader
	// Blocklist, if set, lets key holders delete their keys (DeleteKey).
	Blocklist Blocklist
	// Hosts are the host names that may be claimed as host identities
	// (host:NAME); the zero policy allows none.
	Hosts HostPolicy
	// CA, if set, issues SSH user certificates for proven SSH keys
	// (IssueCertificate), under Certificates.
	CA           CertificateAuthority
	Certificates CertificatePolicy
	// MailsPerAddress is how many mailed links (RequestEmail) one
	// address receives in RecipientWindow, across keys, actions, clients
	// and every node sharing the store; zero means
	// DefaultMailsPerAddress, negative no cap.
	MailsPerAddress int
}

// Service runs the identity operations over a Store and a Verifier. It is
// safe for concurrent use.
type Service struct {
	store    Store
	verifier Verifier
	server   string
	now      func() time.Time
	rand     io.Reader
	blocks   Blocklist
	hosts    HostPolicy
	ca       CertificateAuthority
	certs    CertificatePolicy
	// mailsPerAddress is ServiceOptions.MailsPerAddress with its default.
	mailsPerAddress int

	mu   sync.Mutex
	subs []func(ctx context.Context, handles []Handle)
}

// NewService returns a Service.
func NewService(store Store, v Verifier, opts ServiceOptions) (*Service, error) {
	if opts.Server == "" {
		return nil, errors.New("identity: new service: no server name")
	}
	s := &Service{store: store, verifier: v, server: opts.Server, now: opts.Now, rand: opts.Rand, blocks: opts.Blocklist, hosts: opts.Hosts,
		ca: opts.CA, certs: opts.Certificates.withDefaults(), mailsPerAddress: opts.MailsPerAddress}
	if s.mailsPerAddress == 0 {
		s.mailsPerAddress = DefaultMailsPerAddress
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.rand == nil {
		s.rand = rand.Reader
	}
	return s, nil
}

// clock takes one reading of the Service's clock, cut to the precision
// records keep: a write derives what it records and stamps the records
// with this one reading.
func (s *Service) clock() time.Time { return TruncateTime(s.now()) }

// Server returns the server name statements carry.
func (s *Service) Server() string { return s.server }

// Subscribe has fn called after every write the Service commits, before
// the write returns, with the handles of the identities it changed (nil:
// any identity may have changed). A cache on this node drops its answers
// for them, so that whoever made the write reads it back at once.
func (s *Service) Subscribe(fn func(ctx context.Context, handles []Handle)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs = append(s.subs, fn)
}

// changed tells the subscribers that handles changed.
func (s *Service) changed(ctx context.Context, handles ...Handle) {
	s.mu.Lock()
	subs := slices.Clone(s.subs)
	s.mu.Unlock()
	for _, fn := range subs {
		fn(ctx, handles)
	}
}

// update runs fn in one store transaction and, when it commits, tells the
// subscribers which identities its appends changed: the identity a record
// names, and for a record a key carries itself (no handle) every identity
// that names the key, since such records count in each of their
// assessments. A refused or empty write tells no one.
func (s *Service) update(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error {
	var changed []Handle
	err := s.store.Update(ctx, func(ctx context.Context, tx Tx) error {
		n := &notingTx{Tx: tx, rand: s.rand, verifier: s.verifier}
		if err := fn(ctx, n); err != nil {
			return err
		}
		var err error
		changed, err = n.changed(ctx)
		return err
	})
	if err != nil {
		return err
	}
	if len(changed) > 0 {
		s.changed(ctx, changed...)
	}
	return nil
}

// notingTx is a Tx that remembers whom its appends concern.
type notingTx struct {
	Tx
	rand     io.Reader
	verifier Verifier
	handles  []Handle
	keys     []Factor
	// whole and public are the last OpenPGP key publicKey read and its
	// public part: a key's links are appended together, all carrying it.
	whole, public []byte
}

// publicKey returns the public part of an OpenPGP key a record carries
// (Verifier.PublicPGPKey), reading each key once per transaction.
func (n *notingTx) publicKey(key []byte) ([]byte, error) {
	if n.whole != nil && bytes.Equal(key, n.whole) {
		return n.public, nil
	}
	pub, err := n.verifier.PublicPGPKey(key)
	if err != nil {
		return nil, err
	}
	n.whole, n.public = key, pub
	return pub, nil
}

// Append appends e and notes whom it concerns. What the record holds of a
// person (an address, a user ID, a key's user IDs, a private ID token)
// becomes an artifact it commits to (Evidence.keepPersonalPrivate). A
// record whose ID token a provider key verifies follows the oidc.jwks
// record of that key, which is appended first if the log lacks it.
func (n *notingTx) Append(ctx context.Context, e *Evidence) error {
	if err := e.keepPersonalPrivate(n.rand, n.publicKey); err != nil {
		return err
	}
	if err := recordKeySet(ctx, n.Tx, n.verifier, e); err != nil {
		return err
	}
	if err := n.Tx.Append(ctx, e); err != nil {
		return err
	}
	switch {
	case e.Handle != "":
		if !slices.Contains(n.handles, e.Handle) {
			n.handles = append(n.handles, e.Handle)
		}
	case !slices.ContainsFunc(n.keys, e.From.Same):
		n.keys = append(n.keys, e.From)
	}
	return nil
}

// KeySetStatementTitle starts the statement of every oidc.jwks record.
const KeySetStatementTitle = "Kith OpenID Connect provider key"

// recordKeySet appends the oidc.jwks record of the provider key that
// verified e's ID token, unless the log holds it already: one record per
// key, known by its JWK thumbprint (RFC 7638), not by the bytes it was
// fetched as.
func recordKeySet(ctx context.Context, tx Tx, v Verifier, e *Evidence) error {
	if e.From.Kind != KindOIDC || len(e.SignerKey) == 0 || e.Method == MethodOIDCKeySet {
		return nil
	}
	issuer, _, _ := strings.Cut(e.From.Value, " ")
	want, err := v.JWKThumbprint(e.SignerKey)
	if err != nil {
		return fmt.Errorf("provider key of %s: %w", issuer, err)
	}
	recorded, err := tx.KeySets(ctx, issuer)
	if err != nil {
		return err
	}
	for _, jwk := range recorded {
		if t, err := v.JWKThumbprint(jwk); err == nil && t == want {
			return nil
		}
	}
	statement := fmt.Sprintf("%s\n\nissuer: %s\nrecorded: %s\n", KeySetStatementTitle, issuer, e.Created.UTC().Format(time.RFC3339))
	return tx.Append(ctx, &Evidence{
		Method: MethodOIDCKeySet, From: Factor{Kind: KindOIDCProvider, Value: issuer},
		Label: "a signing key of " + issuer, Statement: []byte(statement),
		SignerKey: bytes.Clone(e.SignerKey), Created: e.Created,
	})
}

// changed returns the identities the appends concern, reading in the
// transaction which identities name the keys whose own records changed.
func (n *notingTx) changed(ctx context.Context) ([]Handle, error) {
	out := n.handles
	for _, k := range n.keys {
		hs, err := n.FactorHandles(ctx, k)
		if err != nil {
			return nil, err
		}
		for _, h := range hs {
			if !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	return out, nil
}

// Proof is a signature over a statement by a factor.
type Proof struct {
	// Factor is who signed. For an SSH key it must carry the key blob.
	// Zero means the statement's own factor.
	Factor Factor
	// Signature is an armored SSHSIG for an SSH key; a cleartext-signed
	// statement or a detached signature for an OpenPGP key.
	Signature []byte
}

// IssueChallenge issues a statement for purpose, naming the handle and the
// factor, with a fresh nonce, valid for ChallengeTTL. A claim needs a free,
// valid handle; add and revoke need an existing identity.
func (s *Service) IssueChallenge(ctx context.Context, purpose Purpose, handle string, f Factor) (*Challenge, error) {
	if !purpose.Valid() {
		return nil, Refuse(CodeBadRequest, "purpose %q is not claim, add, revoke, delete, login or certificate", clip(string(purpose)))
	}
	if purpose == PurposeCertificate && s.ca == nil {
		return nil, Refuse(CodeCADisabled, "this server issues no SSH certificates")
	}
	h, err := checkHandle(handle)
	if err != nil {
		return nil, err
	}
	if err := f.Validate(); err != nil {
		return nil, RefuseErr(CodeBadFactor, err, "bad factor")
	}
	if !f.Provable() {
		return nil, Refuse(CodeUnsupported, "a %s factor cannot sign a statement", f.Kind)
	}
	if err := s.checkHost(purpose, h, f); err != nil {
		return nil, err
	}
	if err := checkClaimable(purpose, h); err != nil {
		return nil, err
	}
	if purpose == PurposeDelete && f.Kind != KindOIDC {
		return nil, Refuse(CodeUnsupported, "an identity is deleted with the consent of an OpenID Connect account, not %s", f)
	}
	if purpose == PurposeCertificate && f.Kind != KindSSH {
		return nil, Refuse(CodeUnsupported, "only an SSH key gets an SSH certificate, not %s", f)
	}
	_, recs, err := s.store.IdentityRecords(ctx, h)
	switch {
	case err == nil && purpose == PurposeClaim && !hostReleased(h, recs, s.now()):
		return nil, Refuse(CodeHandleTaken, "handle %q is taken", h)
	case errors.Is(err, ErrNotFound) && purpose != PurposeClaim:
		return nil, Refuse(CodeUnknownIdentity, "no identity has handle %q", h)
	case err != nil && !errors.Is(err, ErrNotFound):
		return nil, fmt.Errorf("identity: issue challenge: %w", err)
	}
	c, err := s.newChallenge(purpose, h, f, s.now())
	if err != nil {
		return nil, fmt.Errorf("identity: issue challenge: %w", err)
	}
	if err := s.store.SaveChallenge(ctx, c); err != nil {
		return nil, fmt.Errorf("identity: issue challenge: %w", err)
	}
	return c, nil
}

// newChallenge renders a statement with a fresh nonce.
func (s *Service) newChallenge(purpose Purpose, h Handle, f Factor, now time.Time) (*Challenge, error) {
	nonce := make([]byte, NonceSize)
	if _, err := io.ReadFull(s.rand, nonce); err != nil {
		return nil, fmt.Errorf("nonce: %w", err)
	}
	return NewChallenge(s.server, purpose, h, f, nonce, now)
}

// checkHandle checks a person's or a host's handle.
func checkHandle(handle string) (Handle, error) {
	h, err := ParseIdentityHandle(handle)
	switch {
	case errors.Is(err, ErrReservedHandle):
		return "", RefuseErr(CodeReservedHandle, err, "handle not available")
	case err != nil:
		return "", RefuseErr(CodeBadHandle, err, "bad handle")
	}
	return h, nil
}

// statement parses a statement and checks that this server issued it for
// purpose.
func (s *Service) statement(text []byte, purpose Purpose) (*Challenge, error) {
	c, err := ParseStatement(text)
	if err != nil {
		return nil, RefuseErr(CodeBadStatement, err, "not a statement this server issued")
	}
	if c.Server != s.server {
		return nil, Refuse(CodeWrongServer, "the statement was issued by %q, this is %q", clip(c.Server), s.server)
	}
	if c.Purpose != purpose {
		return nil, Refuse(CodeWrongPurpose, "the statement is for %q, not %q", clip(string(c.Purpose)), purpose)
	}
	if _, err := checkHandle(string(c.Handle)); err != nil {
		return nil, err
	}
	if err := s.checkHost(c.Purpose, c.Handle, c.Factor); err != nil {
		return nil, err
	}
	if err := checkClaimable(c.Purpose, c.Handle); err != nil {
		return nil, err
	}
	return c, nil
}

// checkClaimable refuses a claim of a system account's name (see
// IsSystemAccount): an identity holding it would get certificates that
// sshd accepts as that account. Identities that hold one from before
// keep it, without it as a principal (Service.Principals).
func checkClaimable(purpose Purpose, h Handle) error {
	if purpose == PurposeClaim && IsSystemAccount(string(h)) {
		return Refuse(CodeReservedHandle, "handle %q is a system account's name on many servers, kept from strangers so that no certificate names it; choose another", h)
	}
	return nil
}

// verified is a checked proof, ready to be recorded.
type verified struct {
	factor    Factor
	method    Method
	signature []byte
	signerKey []byte
	// consent is the salt of a consent login's nonce, nil otherwise.
	consent []byte
	// private: the signature is an ID token to keep out of the public
	// entry (see Login.PublicToken).
	private bool
	// subject is a pseudonymous account's subject (Login.Subject).
	subject *Artifact
}

// verify checks p over statement. want, when not zero, is the factor p
// must be by.
func (s *Service) verify(ctx context.Context, p Proof, want Factor, statement []byte) (verified, error) {
	f := p.Factor
	if f.IsZero() {
		f = want
	}
	if !want.IsZero() && !f.Same(want) {
		return verified{}, Refuse(CodeWrongKey, "the proof is by %s, the statement names %s", f, want)
	}
	if err := f.Validate(); err != nil {
		return verified{}, RefuseErr(CodeBadFactor, err, "bad factor")
	}
	if len(p.Signature) == 0 {
		return verified{}, Refuse(CodeBadSignature, "no signature by %s", f)
	}
	switch f.Kind {
	case KindSSH, KindPGP:
		key, err := s.checkSignature(ctx, f, statement, p.Signature)
		if err != nil {
			return verified{}, s.signatureHint(ctx, f, statement, p.Signature, asRefusal(err, CodeBadSignature, "signature by "+f.String()))
		}
		if f.Kind == KindSSH {
			return verified{factor: f, method: MethodSSHChallenge, signature: p.Signature, signerKey: f.Data}, nil
		}
		return verified{factor: f, method: MethodPGPChallenge, signature: p.Signature, signerKey: key}, nil
	}
	return verified{}, Refuse(CodeUnsupported, "a %s factor cannot sign a statement", f.Kind)
}

// checkSignature checks sig by the SSH or OpenPGP factor f over statement
// and returns the OpenPGP key that verified it (nil for SSH).
func (s *Service) checkSignature(ctx context.Context, f Factor, statement, sig []byte) ([]byte, error) {
	if f.Kind == KindSSH {
		return nil, s.verifier.VerifySSH(ctx, f.Data, statement, sig)
	}
	return s.verifier.VerifyPGP(ctx, f.Value, statement, sig)
}

// statementEdits are the changes a statement most often suffers between
// the page and the signing tool, each with what to tell the person.
var statementEdits = []struct {
	edit func([]byte) []byte
	hint string
}{
	{func(b []byte) []byte { return bytes.TrimRight(b, "\n") },
		"it verifies over the statement without its final newline: the file you signed lost the statement's last line end; download the statement (or end the file with a newline), sign it again and paste the new signature"},
	{func(b []byte) []byte { return append(bytes.Clone(b), '\n') },
		"it verifies over the statement with an extra newline at the end: the file you signed gained an empty last line; download the statement, sign it again and paste the new signature"},
	{func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")) },
		"it verifies over the statement with Windows (CRLF) line ends: the file you signed was saved with them; download the statement, sign it again and paste the new signature"},
}

// signatureHint explains a signature that does not verify, which is
// refusal: when the signature verifies over the statement with one of
// the usual accidental changes, it says which (statement_changed);
// otherwise it names the likely cause. Other refusals pass unchanged.
func (s *Service) signatureHint(ctx context.Context, f Factor, statement, sig []byte, refusal error) error {
	// A cleartext-signed statement carries its own text, which the
	// verifier compares up to line ends and final newlines: no edit of
	// the issued statement can help it, so none is tried (each try is a
	// verification more).
	clearsigned := bytes.Contains(sig, []byte("-----BEGIN PGP SIGNED MESSAGE-----"))
	if CodeOf(refusal) != CodeBadSignature || clearsigned {
		return refusal
	}
	for _, e := range statementEdits {
		changed := e.edit(statement)
		if bytes.Equal(changed, statement) {
			continue
		}
		if _, err := s.checkSignature(ctx, f, changed, sig); err == nil {
			return Refuse(CodeStatementChanged, "the signature is over other bytes than the statement: %s", e.hint)
		}
	}
	var e *Error
	if errors.As(refusal, &e) {
		e.Msg += " (the signed file must hold the statement exactly, byte for byte, final newline included)"
	}
	return refusal
}

// verifyLogin re-checks a login a frontend completed: its ID token must
// verify with the JWK it names and be about its account.
func (s *Service) verifyLogin(ctx context.Context, l Login) (verified, error) {
	if l.Account.Kind != KindOIDC {
		return verified{}, Refuse(CodeBadFactor, "a login is by an OpenID Connect account, not %s", l.Account)
	}
	if err := l.Account.Validate(); err != nil {
		return verified{}, RefuseErr(CodeBadFactor, err, "bad account")
	}
	if !l.Email.IsZero() && (l.Email.Kind != KindEmail || l.Email.Validate() != nil) {
		return verified{}, Refuse(CodeBadFactor, "bad verified email %s", l.Email)
	}
	if err := s.verifier.VerifyLogin(ctx, l); err != nil {
		return verified{}, asRefusal(err, CodeBadSignature, "the login's ID token")
	}
	return verified{factor: l.Account, method: MethodOIDCLogin, signature: []byte(l.IDToken), signerKey: l.SigningKey,
		private: !l.PublicToken, subject: l.subjectArtifact()}, nil
}

// asRefusal keeps a refusal's code, and makes any other error one with
// code.
func asRefusal(err error, code Code, what string) error {
	if CodeOf(err) != "" {
		return err
	}
	return RefuseErr(code, err, "%s", what)
}

// consume answers the statement's challenge in tx: it must exist, be
// unanswered and unexpired, and be the very statement issued.
func (s *Service) consume(ctx context.Context, tx Tx, c *Challenge, statement []byte, now time.Time) error {
	if now.After(c.Expires) {
		return Refuse(CodeExpired, "the challenge expired at %s", c.Expires.Format(time.RFC3339))
	}
	issued, err := tx.ConsumeChallenge(ctx, c.Nonce, now)
	switch {
	case errors.Is(err, ErrNotFound):
		return Refuse(CodeUnknownNonce, "this server issued no challenge with that nonce")
	case errors.Is(err, ErrNonceUsed):
		return Refuse(CodeNonceUsed, "the challenge was answered before: ask for a new one")
	case errors.Is(err, ErrChallengeExpired):
		return Refuse(CodeExpired, "the challenge expired: ask for a new one")
	case err != nil:
		return err
	}
	if !SameStatement(issued.Statement, statement) {
		return Refuse(CodeStatementChanged, "the statement differs from the one issued with its nonce")
	}
	return nil
}

// record returns the evidence record of a verified proof.
func record(v verified, c *Challenge, to Factor, statement []byte, label string, now time.Time) *Evidence {
	return &Evidence{
		Method: v.method, Purpose: c.Purpose, Handle: c.Handle, From: v.factor, To: to, Label: label,
		Statement: bytes.Clone(statement), Signature: bytes.Clone(v.signature), SignerKey: v.signerKey,
		Consent: bytes.Clone(v.consent), Created: now, privateToken: v.private, subject: v.subject,
	}
}

// ClaimRequest claims a handle.
type ClaimRequest struct {
	// Statement is the issued claim statement, as signed.
	Statement []byte
	// Proof is the signature by the statement's factor, which becomes
	// the identity's first factor.
	Proof Proof
	// Label is shown with the factor (an SSH key's comment).
	Label string
}

// Claim creates the identity the statement names, with the statement's
// factor as its first, proven factor. When that factor is an OpenPGP key,
// the links the key carries (auth subkeys, user ID emails) are recorded
// too.
func (s *Service) Claim(ctx context.Context, req ClaimRequest) (Identity, error) {
	c, err := s.statement(req.Statement, PurposeClaim)
	if err != nil {
		return Identity{}, err
	}
	v, err := s.verify(ctx, req.Proof, c.Factor, req.Statement)
	if err != nil {
		return Identity{}, err
	}
	now := s.clock()
	links, keyBytes, err := s.keyLinks(ctx, v.factor, now)
	if err != nil {
		return Identity{}, err
	}
	var id Identity
	err = s.update(ctx, func(ctx context.Context, tx Tx) error {
		if err := s.consume(ctx, tx, c, req.Statement, now); err != nil {
			return err
		}
		var err error
		if id, err = s.create(ctx, tx, c.Handle, v.factor, now); err != nil {
			return err
		}
		if err := tx.Append(ctx, record(v, c, Factor{}, req.Statement, req.Label, now)); err != nil {
			return err
		}
		return s.syncKeyLinks(ctx, tx, v.factor, keyBytes, links, now)
	})
	if err != nil {
		return Identity{}, wrapOp("claim", err)
	}
	return id, nil
}

// create creates the identity h in tx, for its first factor f, which no
// other identity may have proven; for a released host name, it returns
// the host's identity (ReleaseHost).
func (s *Service) create(ctx context.Context, tx Tx, h Handle, f Factor, now time.Time) (Identity, error) {
	if err := s.checkFree(ctx, tx, h, f); err != nil {
		return Identity{}, err
	}
	id, err := tx.CreateIdentity(ctx, h, now)
	if errors.Is(err, ErrHandleTaken) {
		// A host name the operator released is claimed again as the
		// same identity: its records stay, the new key's claim after
		// the releases.
		if old, recs, rerr := tx.IdentityRecords(ctx, h); rerr == nil && hostReleased(h, recs, now) {
			return old, nil
		}
		return Identity{}, Refuse(CodeHandleTaken, "handle %q is taken", h)
	}
	return id, err
}

// AddRequest links a factor to an identity.
type AddRequest struct {
	// Statement is the issued add statement naming the handle and the
	// new factor, as signed.
	Statement []byte
	// New is the new factor's signature over Statement: its possession.
	// Without it the factor is only claimed until a later add brings it.
	New *Proof
	// By is the signature over Statement by a factor proven for the
	// identity: the identity's consent. It may be left out only when the
	// factor is claimed for the identity already (a proven factor or a
	// proven key's binding authorised it).
	By *Proof
	// Label is shown with the factor (an SSH key's comment).
	Label string
}

// Add links the statement's factor to its identity: with By it records
// the identity's consent, with New the factor's possession; the factor is
// proven once both are on record.
func (s *Service) Add(ctx context.Context, req AddRequest) error {
	c, err := s.statement(req.Statement, PurposeAdd)
	if err != nil {
		return err
	}
	if req.New == nil && req.By == nil {
		return Refuse(CodeBadRequest, "an add needs the new factor's signature, a proven factor's, or both")
	}
	var by *verified
	if req.By != nil {
		if req.By.Factor.IsZero() {
			return Refuse(CodeBadRequest, "the authorising proof must name its factor")
		}
		if req.By.Factor.Same(c.Factor) {
			return Refuse(CodeNotProven, "a factor cannot authorise itself")
		}
		bv, err := s.verify(ctx, *req.By, Factor{}, req.Statement)
		if err != nil {
			return err
		}
		by = &bv
	}
	return s.add(ctx, c, req.Statement, req.New, by, req.Label)
}

// SessionAddRequest links a factor to a logged-in session's identity.
type SessionAddRequest struct {
	// Statement is the issued add statement, as signed by New.
	Statement []byte
	// New is the new factor's signature over Statement, or nil to only
	// claim the factor.
	New *Proof
	// Consent is the login, made for this statement, by which the
	// session's identity consents.
	Consent Consent
	// Label is shown with the factor.
	Label string
}

// AddWithSession is Add with a logged-in session's consent instead of a
// proven factor's signature: a login made to approve the statement, whose
// ID token's nonce commits to it, is recorded as the consent (oidc.login,
// with the commitment's salt), after the Verifier re-checks it.
func (s *Service) AddWithSession(ctx context.Context, req SessionAddRequest) error {
	c, err := s.statement(req.Statement, PurposeAdd)
	if err != nil {
		return err
	}
	if req.Consent.Login.Account.Same(c.Factor) {
		return Refuse(CodeNotProven, "a factor cannot authorise itself")
	}
	l, err := req.Consent.check(req.Statement)
	if err != nil {
		return err
	}
	bv, err := s.verifyLogin(ctx, l)
	if err != nil {
		return err
	}
	bv.consent = req.Consent.Salt
	return s.add(ctx, c, req.Statement, req.New, &bv, req.Label)
}

// add records an add: by's consent (nil: none) and the new factor's
// possession (nil: none).
func (s *Service) add(ctx context.Context, c *Challenge, statement []byte, newProof *Proof, by *verified, label string) error {
	var nv verified
	var links []KeyLink
	var keyBytes []byte
	now := s.clock()
	if newProof != nil {
		var err error
		if nv, err = s.verify(ctx, *newProof, c.Factor, statement); err != nil {
			return err
		}
		if links, keyBytes, err = s.keyLinks(ctx, nv.factor, now); err != nil {
			return err
		}
	}
	err := s.update(ctx, func(ctx context.Context, tx Tx) error {
		if err := s.consume(ctx, tx, c, statement, now); err != nil {
			return err
		}
		a, err := s.assess(ctx, tx, c.Handle, now)
		if err != nil {
			return err
		}
		st, _ := a.Status(c.Factor)
		if st.Level == LevelProven {
			return Refuse(CodeAlreadyLinked, "%s is already proven for %q", c.Factor, c.Handle)
		}
		if by != nil && !a.Proven(by.factor) {
			return Refuse(CodeNotProven, "%s is not a proven factor of %q", by.factor, c.Handle)
		}
		if by == nil && st.Level != LevelClaimed {
			return Refuse(CodeNotAuthorized, "no proven factor of %q has authorised %s: sign the statement with one too", c.Handle, c.Factor)
		}
		if by == nil && !st.Parent.IsZero() && !a.Proven(st.Parent) {
			return Refuse(CodeNotAuthorized, "%s is only claimed through %s, which is not proven for %q", c.Factor, st.Parent, c.Handle)
		}
		if err := s.checkFree(ctx, tx, c.Handle, c.Factor); err != nil {
			return err
		}
		if by != nil {
			if err := tx.Append(ctx, record(*by, c, c.Factor, statement, label, now)); err != nil {
				return err
			}
		}
		if newProof != nil {
			if err := tx.Append(ctx, record(nv, c, Factor{}, statement, label, now)); err != nil {
				return err
			}
			return s.syncKeyLinks(ctx, tx, nv.factor, keyBytes, links, now)
		}
		return nil
	})
	return wrapOp("add", err)
}

// assess reads and assesses h's records in tx.
func (s *Service) assess(ctx context.Context, tx Tx, h Handle, now time.Time) (*Assessment, error) {
	_, recs, err := tx.IdentityRecords(ctx, h)
	if errors.Is(err, ErrNotFound) {
		return nil, Refuse(CodeUnknownIdentity, "no identity has handle %q", h)
	}
	if err != nil {
		return nil, err
	}
	return Assess(h, recs, now), nil
}

// RevokeRequest unlinks a factor from an identity.
type RevokeRequest struct {
	// Statement is the issued revoke statement naming the handle and the
	// factor to unlink.
	Statement []byte
	// By is the signature over Statement by any factor proven for the
	// identity (the factor itself included).
	By Proof
}

// Revoke records that the statement's factor no longer belongs to its
// identity. Nothing a key carries brings the link back: only a new add
// statement signed for the identity does.
func (s *Service) Revoke(ctx context.Context, req RevokeRequest) error {
	c, err := s.statement(req.Statement, PurposeRevoke)
	if err != nil {
		return err
	}
	by := req.By
	if by.Factor.IsZero() {
		by.Factor = c.Factor
	}
	bv, err := s.verify(ctx, by, Factor{}, req.Statement)
	if err != nil {
		return err
	}
	return s.revoke(ctx, c, req.Statement, bv)
}

// RevokeWithSession is Revoke with a logged-in session's consent: a
// login made to approve the statement (its ID token's nonce commits to
// it) is recorded as the revocation's proof.
func (s *Service) RevokeWithSession(ctx context.Context, statement []byte, consent Consent) error {
	c, err := s.statement(statement, PurposeRevoke)
	if err != nil {
		return err
	}
	l, err := consent.check(statement)
	if err != nil {
		return err
	}
	bv, err := s.verifyLogin(ctx, l)
	if err != nil {
		return err
	}
	bv.consent = consent.Salt
	return s.revoke(ctx, c, statement, bv)
}

func (s *Service) revoke(ctx context.Context, c *Challenge, statement []byte, bv verified) error {
	err := s.update(ctx, func(ctx context.Context, tx Tx) error {
		now := s.clock()
		if err := s.consume(ctx, tx, c, statement, now); err != nil {
			return err
		}
		a, err := s.assess(ctx, tx, c.Handle, now)
		if err != nil {
			return err
		}
		if !a.Proven(bv.factor) {
			return Refuse(CodeNotProven, "%s is not a proven factor of %q", bv.factor, c.Handle)
		}
		st, ok := a.Status(c.Factor)
		switch {
		case ok && st.Level == LevelRevoked:
			// Revoked already: the identity's own listing says so, and a
			// second revocation record would add nothing.
			return Refuse(CodeAlreadyRevoked, "%s is already revoked from %q: nothing to do", c.Factor, c.Handle)
		case !ok || st.Level < LevelExpired:
			return Refuse(CodeNotLinked, "%s is not linked to %q", c.Factor, c.Handle)
		}
		return tx.Append(ctx, revocation(bv, c, statement, a, now))
	})
	return wrapOp("revoke", err)
}

// revocation is the record of bv revoking c's factor, naming the record
// that established its link in a.
func revocation(bv verified, c *Challenge, statement []byte, a *Assessment, now time.Time) *Evidence {
	e := record(bv, c, c.Factor, statement, "", now)
	e.Method = MethodRevocation
	if st, ok := a.Status(c.Factor); ok && len(st.Via) > 0 {
		e.Revokes = st.Via[len(st.Via)-1]
	}
	return e
}

// wrapOp adds the operation to internal errors; refusals stay as they are,
// for the caller to show.
func wrapOp(op string, err error) error {
	if err == nil || CodeOf(err) != "" {
		return err
	}
	return fmt.Errorf("identity: %s: %w", op, err)
}

// checkFree refuses f when another identity than h has it proven. A host
// key may be proven for several host identities (one machine, several
// names), never for a host and a person.
func (s *Service) checkFree(ctx context.Context, r IdentityReader, h Handle, f Factor) error {
	taken, err := ProvenElsewhere(ctx, r, f, h, s.now())
	if err != nil {
		return err
	}
	if taken {
		return Refuse(CodeFactorLinked, "%s is proven for another identity", f)
	}
	return nil
}

// ProvenElsewhere reports whether an identity other than mine has f
// proven at now. Linking a factor proven elsewhere is refused. A factor
// only claimed elsewhere is not: anyone can claim a public key, so a claim
// never keeps the key's holder from proving it.
//
// For a host identity mine, the other host identities do not count: one
// machine's key may be proven for each of its names.
func ProvenElsewhere(ctx context.Context, r IdentityReader, f Factor, mine Handle, now time.Time) (bool, error) {
	handles, err := r.FactorHandles(ctx, f)
	if err != nil {
		return false, err
	}
	_, mineHost := mine.Host()
	for _, other := range handles {
		if _, otherHost := other.Host(); other == mine || (mineHost && otherHost) {
			continue
		}
		_, recs, err := r.IdentityRecords(ctx, other)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		if Assess(other, recs, now).Proven(f) {
			return true, nil
		}
	}
	return false, nil
}

// Lookup returns the identity with handle h and the assessment of its
// evidence now. It returns an *Error with code unknown_identity (or
// bad_handle) when there is none.
func (s *Service) Lookup(ctx context.Context, handle string) (Identity, *Assessment, []Evidence, error) {
	h, err := checkHandle(handle)
	if err != nil {
		return Identity{}, nil, nil, err
	}
	id, recs, err := s.store.IdentityRecords(ctx, h)
	if errors.Is(err, ErrNotFound) {
		return Identity{}, nil, nil, Refuse(CodeUnknownIdentity, "no identity has handle %q", h)
	}
	if err != nil {
		return Identity{}, nil, nil, fmt.Errorf("identity: lookup %s: %w", h, err)
	}
	return id, Assess(h, recs, s.now()), recs, nil
}

// WhoProves returns the handle of the person identity for which f is
// proven now, or an *Error with code not_linked; host identities do not
// answer (a host key is no one's login). Should the factor's holder have made
// it proven for more than one identity (a back-signed binding in a key of
// each), the identity that proved it first answers.
func (s *Service) WhoProves(ctx context.Context, f Factor) (Handle, error) {
	handles, err := s.store.FactorHandles(ctx, f)
	if err != nil {
		return "", fmt.Errorf("identity: who proves %s: %w", f, err)
	}
	now := s.now()
	var best Handle
	var bestSeq int64
	for _, h := range handles {
		if _, host := h.Host(); host {
			continue
		}
		_, recs, err := s.store.IdentityRecords(ctx, h)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("identity: who proves %s: %w", f, err)
		}
		st, ok := Assess(h, recs, now).Status(f)
		if !ok || st.Level != LevelProven || len(st.Via) == 0 {
			continue
		}
		if seq := st.Via[len(st.Via)-1]; best == "" || seq < bestSeq {
			best, bestSeq = h, seq
		}
	}
	if best == "" {
		return "", Refuse(CodeNotLinked, "no identity has proven %s", f)
	}
	return best, nil
}

// Log returns up to limit records after seq after, with every byte.
func (s *Service) Log(ctx context.Context, after int64, limit int) ([]Evidence, error) {
	recs, err := s.store.Log(ctx, after, limit)
	if err != nil {
		return nil, fmt.Errorf("identity: log: %w", err)
	}
	return recs, nil
}
