// service.go: the identity operations every frontend shares (the JSON API
// now, OpenID Connect login later): issuing challenges, claiming a handle,
// adding and revoking factors, and the lookups. Each write is one store
// transaction: a refusal writes nothing.

package identity

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
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
}

// Service runs the identity operations over a Store and a Verifier. It is
// safe for concurrent use.
type Service struct {
	store    Store
	verifier Verifier
	server   string
	now      func() time.Time
	rand     io.Reader
}

// NewService returns a Service.
func NewService(store Store, v Verifier, opts ServiceOptions) (*Service, error) {
	if opts.Server == "" {
		return nil, errors.New("identity: new service: no server name")
	}
	s := &Service{store: store, verifier: v, server: opts.Server, now: opts.Now, rand: opts.Rand}
	if s.now == nil {
		s.now = time.Now
	}
	if s.rand == nil {
		s.rand = rand.Reader
	}
	return s, nil
}

// Server returns the server name statements carry.
func (s *Service) Server() string { return s.server }

// Proof is a signature over a statement by a factor, or a session's word
// for it.
type Proof struct {
	// Factor is who signed. For an SSH key it must carry the key blob.
	// Zero means the statement's own factor.
	Factor Factor
	// Signature is an armored SSHSIG for an SSH key; a cleartext-signed
	// statement or a detached signature for an OpenPGP key; for a
	// session, the token that authenticated it.
	Signature []byte
	// Session is set by a caller that has itself authenticated Factor
	// (an OpenID Connect login): the service then checks no signature and
	// records Signature as the token, with method oidc.login. Only code,
	// never a request, may set it.
	Session bool
	// SignerKey, with Session, is the provider's public key (a JWK) that
	// verified the token, recorded so that the token can be re-checked
	// offline.
	SignerKey []byte
}

// IssueChallenge issues a statement for purpose, naming the handle and the
// factor, with a fresh nonce, valid for ChallengeTTL. A claim needs a free,
// valid handle; add and revoke need an existing identity.
func (s *Service) IssueChallenge(ctx context.Context, purpose Purpose, handle string, f Factor) (*Challenge, error) {
	if !purpose.Valid() {
		return nil, Refuse(CodeBadRequest, "purpose %q is not claim, add or revoke", clip(string(purpose)))
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
	_, _, err = s.store.IdentityRecords(ctx, h)
	switch {
	case err == nil && purpose == PurposeClaim:
		return nil, Refuse(CodeHandleTaken, "handle %q is taken", h)
	case errors.Is(err, ErrNotFound) && purpose != PurposeClaim:
		return nil, Refuse(CodeUnknownIdentity, "no identity has handle %q", h)
	case err != nil && !errors.Is(err, ErrNotFound):
		return nil, fmt.Errorf("identity: issue challenge: %w", err)
	}
	nonce := make([]byte, NonceSize)
	if _, err := io.ReadFull(s.rand, nonce); err != nil {
		return nil, fmt.Errorf("identity: issue challenge: nonce: %w", err)
	}
	c, err := NewChallenge(s.server, purpose, h, f, nonce, s.now())
	if err != nil {
		return nil, fmt.Errorf("identity: issue challenge: %w", err)
	}
	if err := s.store.SaveChallenge(ctx, c); err != nil {
		return nil, fmt.Errorf("identity: issue challenge: %w", err)
	}
	return c, nil
}

func checkHandle(handle string) (Handle, error) {
	h, err := ParseHandle(handle)
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
	return c, nil
}

// verified is a checked proof, ready to be recorded.
type verified struct {
	factor    Factor
	method    Method
	signature []byte
	signerKey []byte
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
	if p.Session {
		if f.Kind != KindOIDC {
			return verified{}, Refuse(CodeUnsupported, "a session proves only an OpenID Connect account")
		}
		return verified{factor: f, method: MethodOIDCLogin, signature: p.Signature, signerKey: p.SignerKey}, nil
	}
	switch f.Kind {
	case KindSSH:
		if err := s.verifier.VerifySSH(ctx, f.Data, statement, p.Signature); err != nil {
			return verified{}, asRefusal(err, CodeBadSignature, "signature by "+f.String())
		}
		return verified{factor: f, method: MethodSSHChallenge, signature: p.Signature, signerKey: f.Data}, nil
	case KindPGP:
		key, err := s.verifier.VerifyPGP(ctx, f.Value, statement, p.Signature)
		if err != nil {
			return verified{}, asRefusal(err, CodeBadSignature, "signature by "+f.String())
		}
		return verified{factor: f, method: MethodPGPChallenge, signature: p.Signature, signerKey: key}, nil
	}
	return verified{}, Refuse(CodeUnsupported, "a %s factor cannot sign a statement", f.Kind)
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
		Created: now,
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
	links, keyBytes, err := s.keyLinks(ctx, v.factor)
	if err != nil {
		return Identity{}, err
	}
	var id Identity
	err = s.store.Update(ctx, func(ctx context.Context, tx Tx) error {
		now := s.now()
		if err := s.consume(ctx, tx, c, req.Statement, now); err != nil {
			return err
		}
		if err := s.checkFree(ctx, tx, c.Handle, v.factor); err != nil {
			return err
		}
		var err error
		id, err = tx.CreateIdentity(ctx, c.Handle, now)
		if errors.Is(err, ErrHandleTaken) {
			return Refuse(CodeHandleTaken, "handle %q is taken", c.Handle)
		}
		if err != nil {
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

// AddRequest links a factor to an identity.
type AddRequest struct {
	// Statement is the issued add statement naming the handle and the
	// new factor, as signed.
	Statement []byte
	// New is the new factor's signature over Statement: its possession.
	// Without it the factor is only claimed until a later add brings it.
	New *Proof
	// By is the signature over Statement by a factor proven for the
	// identity (or a session for one): the identity's consent. It may be
	// left out only when the factor was claimed (authorised) before.
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
	var nv, bv verified
	if req.New != nil {
		if nv, err = s.verify(ctx, *req.New, c.Factor, req.Statement); err != nil {
			return err
		}
	}
	if req.By != nil {
		if req.By.Factor.IsZero() {
			return Refuse(CodeBadRequest, "the authorising proof must name its factor")
		}
		if req.By.Factor.Same(c.Factor) {
			return Refuse(CodeNotProven, "a factor cannot authorise itself")
		}
		if bv, err = s.verify(ctx, *req.By, Factor{}, req.Statement); err != nil {
			return err
		}
	}
	var links []KeyLink
	var keyBytes []byte
	if req.New != nil {
		if links, keyBytes, err = s.keyLinks(ctx, nv.factor); err != nil {
			return err
		}
	}
	err = s.store.Update(ctx, func(ctx context.Context, tx Tx) error {
		now := s.now()
		if err := s.consume(ctx, tx, c, req.Statement, now); err != nil {
			return err
		}
		_, recs, err := tx.IdentityRecords(ctx, c.Handle)
		if errors.Is(err, ErrNotFound) {
			return Refuse(CodeUnknownIdentity, "no identity has handle %q", c.Handle)
		}
		if err != nil {
			return err
		}
		a := Assess(c.Handle, recs, now)
		st, _ := a.Status(c.Factor)
		if st.Level == LevelProven {
			return Refuse(CodeAlreadyLinked, "%s is already proven for %q", c.Factor, c.Handle)
		}
		if req.By != nil && !a.Proven(bv.factor) {
			return Refuse(CodeNotProven, "%s is not a proven factor of %q", bv.factor, c.Handle)
		}
		if req.By == nil && (st.Level != LevelClaimed || !st.Parent.IsZero()) {
			return Refuse(CodeNotAuthorized, "no proven factor of %q has authorised %s: sign the statement with one too", c.Handle, c.Factor)
		}
		if err := s.checkFree(ctx, tx, c.Handle, c.Factor); err != nil {
			return err
		}
		if req.By != nil {
			if err := tx.Append(ctx, record(bv, c, c.Factor, req.Statement, req.Label, now)); err != nil {
				return err
			}
		}
		if req.New != nil {
			if err := tx.Append(ctx, record(nv, c, Factor{}, req.Statement, req.Label, now)); err != nil {
				return err
			}
			return s.syncKeyLinks(ctx, tx, nv.factor, keyBytes, links, now)
		}
		return nil
	})
	return wrapOp("add", err)
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
// identity.
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
	err = s.store.Update(ctx, func(ctx context.Context, tx Tx) error {
		now := s.now()
		if err := s.consume(ctx, tx, c, req.Statement, now); err != nil {
			return err
		}
		_, recs, err := tx.IdentityRecords(ctx, c.Handle)
		if errors.Is(err, ErrNotFound) {
			return Refuse(CodeUnknownIdentity, "no identity has handle %q", c.Handle)
		}
		if err != nil {
			return err
		}
		a := Assess(c.Handle, recs, now)
		if !a.Proven(bv.factor) {
			return Refuse(CodeNotProven, "%s is not a proven factor of %q", bv.factor, c.Handle)
		}
		st, ok := a.Status(c.Factor)
		if !ok || st.Level < LevelExpired {
			return Refuse(CodeNotLinked, "%s is not linked to %q", c.Factor, c.Handle)
		}
		e := record(bv, c, c.Factor, req.Statement, "", now)
		e.Method = MethodRevocation
		if len(st.Via) > 0 {
			e.Revokes = st.Via[len(st.Via)-1]
		}
		return tx.Append(ctx, e)
	})
	return wrapOp("revoke", err)
}

// wrapOp adds the operation to internal errors; refusals stay as they are,
// for the caller to show.
func wrapOp(op string, err error) error {
	if err == nil || CodeOf(err) != "" {
		return err
	}
	return fmt.Errorf("identity: %s: %w", op, err)
}

// checkFree refuses f when another identity than h has it linked.
func (s *Service) checkFree(ctx context.Context, r IdentityReader, h Handle, f Factor) error {
	taken, err := LinkedElsewhere(ctx, r, f, []Handle{h}, s.now())
	if err != nil {
		return err
	}
	if taken {
		return Refuse(CodeFactorLinked, "%s is linked to another identity", f)
	}
	return nil
}

// LinkedElsewhere reports whether an identity other than those in mine
// has f linked (proven or claimed) at now. Linking a factor that is
// linked elsewhere is refused, and a key-carried link to it not recorded.
func LinkedElsewhere(ctx context.Context, r IdentityReader, f Factor, mine []Handle, now time.Time) (bool, error) {
	handles, err := r.FactorHandles(ctx, f)
	if err != nil {
		return false, err
	}
	for _, other := range handles {
		if slices.Contains(mine, other) {
			continue
		}
		_, recs, err := r.IdentityRecords(ctx, other)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		if Assess(other, recs, now).Linked(f) {
			return true, nil
		}
	}
	return false, nil
}

// keyLinks reads the links an OpenPGP factor's stored key carries; other
// factors carry none.
func (s *Service) keyLinks(ctx context.Context, f Factor) ([]KeyLink, []byte, error) {
	if f.Kind != KindPGP {
		return nil, nil, nil
	}
	key, links, err := s.verifier.PGPKeyLinks(ctx, f.Value)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, Refuse(CodeUnknownKey, "no OpenPGP key %s is stored: upload it first", f.Value)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("key links of %s: %w", f, err)
	}
	return links, key, nil
}

// syncKeyLinks brings the records the key f carries up to date with links:
// a link not on record (or whose signature changed) is appended, and a
// record the key no longer carries is revoked.
func (s *Service) syncKeyLinks(ctx context.Context, tx Tx, f Factor, key []byte, links []KeyLink, now time.Time) error {
	if f.Kind != KindPGP {
		return nil
	}
	recs, err := tx.KeyRecords(ctx, f)
	if err != nil {
		return err
	}
	active := map[int64]Evidence{}
	for _, e := range recs {
		if e.Method == MethodPGPAuthSubkey || e.Method == MethodPGPUIDSelfSig {
			active[e.Seq] = e
		}
	}
	for _, e := range recs {
		if e.Method == MethodRevocation {
			delete(active, e.Revokes)
		}
	}
	// An authentication subkey's binding needs no signature by the subkey:
	// anyone can bind another person's SSH key to their own OpenPGP key.
	// So a key-carried SSH link is recorded only while no other identity
	// has that SSH key linked.
	owners, err := tx.FactorHandles(ctx, f)
	if err != nil {
		return err
	}
	kept := map[int64]bool{}
	for _, l := range links {
		if l.Method == MethodPGPAuthSubkey {
			taken, err := LinkedElsewhere(ctx, tx, l.To, owners, now)
			if err != nil {
				return err
			}
			if taken {
				continue
			}
		}
		found := false
		for seq, e := range active {
			if e.Method == l.Method && e.To.Same(l.To) && e.Expires.Equal(TruncateTime(l.Expires)) && bytes.Equal(e.Signature, l.Signature) {
				kept[seq], found = true, true
			}
		}
		if found {
			continue
		}
		e := &Evidence{Method: l.Method, From: f, To: l.To, Label: l.Label, Statement: l.Statement,
			Signature: l.Signature, SignerKey: key, Created: now, Expires: l.Expires}
		if err := tx.Append(ctx, e); err != nil {
			return err
		}
	}
	seqs := make([]int64, 0, len(active))
	for seq := range active {
		if !kept[seq] {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	for _, seq := range seqs {
		e := &Evidence{Method: MethodRevocation, From: f, To: active[seq].To, Revokes: seq,
			Label: "the key no longer carries this link", SignerKey: key, Created: now}
		if err := tx.Append(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// SyncKey records what the stored OpenPGP key with fingerprint fp now
// carries (new auth subkeys and user IDs, and the end of those it lost),
// when the key is linked to some identity; otherwise it does nothing.
// Call it after a key changes.
func (s *Service) SyncKey(ctx context.Context, fp []byte) error {
	f := PGPFactor(fp)
	handles, err := s.store.FactorHandles(ctx, f)
	if err != nil {
		return fmt.Errorf("identity: sync key %s: %w", f.Value, err)
	}
	if len(handles) == 0 {
		return nil
	}
	key, links, err := s.verifier.PGPKeyLinks(ctx, f.Value)
	if err != nil {
		return fmt.Errorf("identity: sync key %s: %w", f.Value, err)
	}
	err = s.store.Update(ctx, func(ctx context.Context, tx Tx) error {
		return s.syncKeyLinks(ctx, tx, f, key, links, s.now())
	})
	if err != nil {
		return fmt.Errorf("identity: sync key %s: %w", f.Value, err)
	}
	return nil
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

// WhoProves returns the handle of the identity for which f is proven now,
// or an *Error with code not_linked.
func (s *Service) WhoProves(ctx context.Context, f Factor) (Handle, error) {
	handles, err := s.store.FactorHandles(ctx, f)
	if err != nil {
		return "", fmt.Errorf("identity: who proves %s: %w", f, err)
	}
	now := s.now()
	for _, h := range handles {
		_, recs, err := s.store.IdentityRecords(ctx, h)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("identity: who proves %s: %w", f, err)
		}
		if Assess(h, recs, now).Proven(f) {
			return h, nil
		}
	}
	return "", Refuse(CodeNotLinked, "no identity has proven %s", f)
}

// Log returns up to limit records after seq after, with every byte.
func (s *Service) Log(ctx context.Context, after int64, limit int) ([]Evidence, error) {
	recs, err := s.store.Log(ctx, after, limit)
	if err != nil {
		return nil, fmt.Errorf("identity: log: %w", err)
	}
	return recs, nil
}
