// Package inprocess is an in-memory identity.Store, as Upspin's
// key/inprocess is for its key server: the same semantics as
// identity/postgres (what each read returns, how Append seals the log,
// all-or-nothing transactions) without a database, for tests and for
// trying Kith out. Nothing survives the process. It also holds Verifier,
// a fake identity.Verifier for tests.
package inprocess

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kith-keyserver/kith/identity"
)

// The store implements the identity store.
var _ identity.Store = (*Store)(nil)

// Store is an in-memory identity.Store. It is safe for concurrent use:
// reads share a lock, and Update holds it exclusively for the whole
// transaction, so transactions are serialised like postgres's appends
// under the log's head row.
type Store struct {
	mu         sync.RWMutex
	identities map[identity.Handle]identity.Identity
	lastID     int64
	log        []identity.Evidence // full records, log order; log[i].Seq == i+1
	ix         index               // of log
	factors    map[string][]byte   // "kind value" -> the data first stored with it
	challenges map[string]*challenge
	mail       emailTokens
	salts      map[string][]byte // "issuer subject" -> the account's salt
}

// challenge is an issued challenge and whether it was answered.
type challenge struct {
	c    identity.Challenge
	used bool
}

// New returns an empty Store.
func New() *Store {
	return &Store{
		identities: map[identity.Handle]identity.Identity{},
		factors:    map[string][]byte{},
		challenges: map[string]*challenge{},
		salts:      map[string][]byte{},
	}
}

// AccountSalt returns the salt of the OpenID Connect account, storing
// fresh if it has none, or known when a factor names the account by its
// subject (see identity.Store).
func (s *Store) AccountSalt(ctx context.Context, issuer, subject string, fresh []byte) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear := identity.OIDCFactor(issuer, subject)
	if _, ok := s.factors[factorKey(clear)]; ok {
		return nil, true, nil
	}
	if salt, ok := s.salts[clear.Value]; ok {
		return bytes.Clone(salt), false, nil
	}
	s.salts[clear.Value] = bytes.Clone(fresh)
	return bytes.Clone(fresh), false, nil
}

func factorKey(f identity.Factor) string { return string(f.Kind) + " " + f.Value }

// view is what reads see: the committed state, and in a transaction the
// writes it has staged.
type view struct {
	s *Store
	t *tx // nil outside a transaction
}

func (v view) identity(h identity.Handle) (identity.Identity, bool) {
	if v.t != nil {
		if id, ok := v.t.identities[h]; ok {
			return id, true
		}
	}
	id, ok := v.s.identities[h]
	return id, ok
}

// record returns the record with seq as the view sees it.
func (v view) record(seq int64) *identity.Evidence {
	if n := int64(len(v.s.log)); seq > n {
		return &v.t.appended[seq-n-1]
	}
	return &v.s.log[seq-1]
}

// seqs returns, sorted, the seqs that sel picks from the committed index
// and the transaction's.
func (v view) seqs(sel func(ix *index) []int64) []int64 {
	out := slices.Clone(sel(&v.s.ix))
	if v.t != nil {
		out = append(out, sel(&v.t.ix)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// index finds records without scanning the log.
type index struct {
	byHandle  map[identity.Handle][]int64 // records naming the identity
	keyFrom   map[string][]int64          // records without a handle, by From
	keyTo     map[string][]int64          // records without a handle, by To
	handlesOf map[string][]identity.Handle
}

func (ix *index) add(e *identity.Evidence) {
	if ix.byHandle == nil {
		ix.byHandle, ix.keyFrom, ix.keyTo = map[identity.Handle][]int64{}, map[string][]int64{}, map[string][]int64{}
		ix.handlesOf = map[string][]identity.Handle{}
	}
	if e.Handle == "" {
		ix.keyFrom[factorKey(e.From)] = append(ix.keyFrom[factorKey(e.From)], e.Seq)
		if !e.To.IsZero() {
			ix.keyTo[factorKey(e.To)] = append(ix.keyTo[factorKey(e.To)], e.Seq)
		}
		return
	}
	ix.byHandle[e.Handle] = append(ix.byHandle[e.Handle], e.Seq)
	for _, f := range []identity.Factor{e.From, e.To} {
		if k := factorKey(f); !f.IsZero() && !slices.Contains(ix.handlesOf[k], e.Handle) {
			ix.handlesOf[k] = append(ix.handlesOf[k], e.Handle)
		}
	}
}

// light returns a copy of e without its artifacts, as postgres's light
// columns read it.
func light(e *identity.Evidence) identity.Evidence {
	c := *e
	c.Statement, c.Signature, c.SignerKey, c.Consent, c.Artifacts = nil, nil, nil, nil, nil
	c.Commitments = cloneCommitments(e.Commitments)
	c.From.Data = bytes.Clone(e.From.Data)
	c.To.Data = bytes.Clone(e.To.Data)
	c.PrevHash = bytes.Clone(e.PrevHash)
	c.Hash = bytes.Clone(e.Hash)
	return c
}

// full returns a deep copy of e, so that callers cannot change the log.
func full(e *identity.Evidence) identity.Evidence {
	c := *e
	c.From.Data = bytes.Clone(e.From.Data)
	c.To.Data = bytes.Clone(e.To.Data)
	c.Statement = bytes.Clone(e.Statement)
	c.Signature = bytes.Clone(e.Signature)
	c.SignerKey = bytes.Clone(e.SignerKey)
	c.Consent = bytes.Clone(e.Consent)
	c.Commitments = cloneCommitments(e.Commitments)
	c.Artifacts = cloneArtifacts(e.Artifacts)
	c.PrevHash = bytes.Clone(e.PrevHash)
	c.Hash = bytes.Clone(e.Hash)
	return c
}

func cloneCommitments(cs []identity.Commitment) []identity.Commitment {
	if cs == nil {
		return nil
	}
	out := make([]identity.Commitment, len(cs))
	for i, c := range cs {
		out[i] = identity.Commitment{Kind: c.Kind, Hash: bytes.Clone(c.Hash)}
	}
	return out
}

func cloneArtifacts(as []identity.Artifact) []identity.Artifact {
	if as == nil {
		return nil
	}
	out := make([]identity.Artifact, len(as))
	for i, a := range as {
		out[i] = identity.Artifact{Kind: a.Kind, Salt: bytes.Clone(a.Salt), Value: bytes.Clone(a.Value)}
	}
	return out
}

func (v view) identityRecords(h identity.Handle) (identity.Identity, []identity.Evidence, error) {
	id, ok := v.identity(h)
	if !ok {
		return identity.Identity{Handle: h}, nil, identity.ErrNotFound
	}
	mine := v.seqs(func(ix *index) []int64 { return ix.byHandle[h] })
	named := map[string]bool{}
	for _, seq := range mine {
		e := v.record(seq)
		named[factorKey(e.From)] = true
		if !e.To.IsZero() {
			named[factorKey(e.To)] = true
		}
	}
	all := v.seqs(func(ix *index) []int64 {
		out := ix.byHandle[h]
		for k := range named {
			out = append(slices.Clip(out), ix.keyFrom[k]...)
		}
		return out
	})
	out := make([]identity.Evidence, 0, len(all))
	for _, seq := range all {
		out = append(out, light(v.record(seq)))
	}
	return id, out, nil
}

func (v view) factorHandles(f identity.Factor) []identity.Handle {
	named := map[string]bool{factorKey(f): true}
	for _, seq := range v.seqs(func(ix *index) []int64 { return ix.keyTo[factorKey(f)] }) {
		named[factorKey(v.record(seq).From)] = true
	}
	var out []identity.Handle
	for k := range named {
		out = append(out, v.s.ix.handlesOf[k]...)
		if v.t != nil {
			out = append(out, v.t.ix.handlesOf[k]...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (v view) keyRecords(f identity.Factor) []identity.Evidence {
	var out []identity.Evidence
	for _, seq := range v.seqs(func(ix *index) []int64 { return ix.keyFrom[factorKey(f)] }) {
		out = append(out, light(v.record(seq)))
	}
	return out
}

// IdentityRecords returns the identity with handle h and the records that
// assessing it needs (see identity.IdentityReader): the records naming h
// and the records without a handle (links a key carries, and their
// revocations) from factors those name, in log order, without
// artifacts. identity.ErrNotFound if no identity has the handle.
func (s *Store) IdentityRecords(ctx context.Context, h identity.Handle) (identity.Identity, []identity.Evidence, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return view{s: s}.identityRecords(h)
}

// FactorHandles returns, sorted, the handles of the identities whose
// records name f or a key whose own records name f.
func (s *Store) FactorHandles(ctx context.Context, f identity.Factor) ([]identity.Handle, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return view{s: s}.factorHandles(f), nil
}

// KeyRecords returns the records the OpenPGP key f carries itself (no
// handle, From f) and their revocations, in log order, without
// artifacts.
func (s *Store) KeyRecords(ctx context.Context, f identity.Factor) ([]identity.Evidence, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return view{s: s}.keyRecords(f), nil
}

// Log returns up to limit records with Seq > after, in log order, with
// every byte of their public form (no private artifact).
func (s *Store) Log(ctx context.Context, after int64, limit int) ([]identity.Evidence, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if limit <= 0 || after >= int64(len(s.log)) {
		return nil, nil
	}
	if after < 0 {
		after = 0
	}
	end := min(int64(len(s.log)), after+int64(limit))
	out := make([]identity.Evidence, 0, end-after)
	for i := after; i < end; i++ {
		c := full(&s.log[i])
		out = append(out, c.Public())
	}
	return out, nil
}

// IdentityArtifacts returns the private artifacts of the records naming
// h, in log order.
func (s *Store) IdentityArtifacts(ctx context.Context, h identity.Handle) ([]identity.RecordArtifacts, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []identity.RecordArtifacts
	for _, seq := range s.ix.byHandle[h] {
		if e := &s.log[seq-1]; len(e.Artifacts) > 0 {
			out = append(out, identity.RecordArtifacts{Seq: seq, Artifacts: cloneArtifacts(e.Artifacts)})
		}
	}
	return out, nil
}

// KeyArtifacts returns the private artifacts of the records about the
// OpenPGP key (From it, no identity), in log order.
func (s *Store) KeyArtifacts(ctx context.Context, key identity.Factor) ([]identity.RecordArtifacts, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []identity.RecordArtifacts
	for i := range s.log {
		if e := &s.log[i]; e.Handle == "" && e.From.Same(key) && len(e.Artifacts) > 0 {
			out = append(out, identity.RecordArtifacts{Seq: e.Seq, Artifacts: cloneArtifacts(e.Artifacts)})
		}
	}
	return out, nil
}

// LinkedKeys returns, sorted by fingerprint, the OpenPGP key factors
// that an identity's records name (as From or To), among the values in
// among (nil: all).
func (s *Store) LinkedKeys(ctx context.Context, among []string) ([]identity.Factor, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	seen := map[string]bool{}
	for _, v := range among {
		seen[v] = false
	}
	var out []identity.Factor
	for i := range s.log {
		e := &s.log[i]
		if e.Handle == "" {
			continue
		}
		for _, f := range []identity.Factor{e.From, e.To} {
			done, wanted := seen[f.Value]
			if f.Kind == identity.KindPGP && !done && (among == nil || wanted) {
				seen[f.Value] = true
				out = append(out, identity.Factor{Kind: identity.KindPGP, Value: f.Value})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Value < out[j].Value })
	return out, nil
}

// HostsUnder returns, sorted, up to limit handles of host identities
// named domain or below it.
func (s *Store) HostsUnder(ctx context.Context, domain string, limit int) ([]identity.Handle, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []identity.Handle
	for h := range s.identities {
		if name, ok := h.Host(); ok && (name == domain || strings.HasSuffix(name, "."+domain)) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// SaveChallenge stores an issued challenge, and drops challenges that
// expired more than a day before this one expires.
func (s *Store) SaveChallenge(ctx context.Context, c *identity.Challenge) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, old := range s.challenges {
		if old.c.Expires.Before(c.Expires.Add(-24 * time.Hour)) {
			delete(s.challenges, k)
		}
	}
	k := string(c.Nonce)
	if _, dup := s.challenges[k]; dup {
		return fmt.Errorf("inprocess: save challenge: nonce %x exists", c.Nonce)
	}
	s.challenges[k] = &challenge{c: identity.Challenge{
		Purpose: c.Purpose, Handle: c.Handle, Nonce: bytes.Clone(c.Nonce),
		Statement: bytes.Clone(c.Statement),
		Issued:    identity.TruncateTime(c.Issued), Expires: identity.TruncateTime(c.Expires),
	}}
	return nil
}

// Update runs fn in one transaction holding the store's lock: what fn
// writes (identities, answered challenges, appended records) is staged,
// visible to fn's own reads, and applied when fn returns nil; when it
// returns an error nothing is applied.
func (s *Store) Update(ctx context.Context, fn func(ctx context.Context, tx identity.Tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &tx{
		s:          s,
		identities: map[identity.Handle]identity.Identity{},
		factors:    map[string][]byte{},
		used:       map[string]bool{},
		lastID:     s.lastID,
	}
	if n := len(s.log); n > 0 {
		t.headSeq, t.headHash = s.log[n-1].Seq, s.log[n-1].Hash
	}
	err := fn(ctx, t)
	t.done = true
	if err != nil {
		return err
	}
	for h, id := range t.identities {
		s.identities[h] = id
	}
	for k, d := range t.factors {
		s.factors[k] = d
	}
	for k := range t.used {
		if c := s.challenges[k]; c != nil {
			c.used = true
		}
	}
	t.commitMail()
	s.lastID = t.lastID
	for i := range t.appended {
		s.log = append(s.log, t.appended[i])
		s.ix.add(&s.log[len(s.log)-1])
	}
	for _, h := range t.erased {
		for _, seq := range s.ix.byHandle[h] {
			e := &s.log[seq-1]
			for _, f := range []identity.Factor{e.From, e.To} {
				if f.Pseudonymous() {
					s.forgetSalt(f)
				}
			}
			erase(e)
		}
	}
	for _, k := range t.erasedKeys {
		if !k.userID || k.email != "" {
			s.mail.forget(k.key, k.email)
		}
		for i := range s.log {
			e := &s.log[i]
			if !e.From.Same(k.key) || len(e.Commitments) == 0 {
				continue
			}
			// An identity's record signed by the key loses only its
			// whole key: its other artifacts are the identity's.
			if e.Handle == "" && (!k.userID || k.email != "" && e.To.Kind == identity.KindEmail && e.To.Value == k.email) {
				erase(e)
				continue
			}
			if i := slices.IndexFunc(e.Artifacts, func(a identity.Artifact) bool { return a.Kind == identity.ArtifactPGPKey }); i >= 0 {
				e.Artifacts, e.Erased = slices.Delete(e.Artifacts, i, i+1), true
			}
		}
	}
	return nil
}

// forgetSalt drops the salt of the pseudonymous account f.
func (s *Store) forgetSalt(f identity.Factor) {
	for k, salt := range s.salts {
		iss, sub, _ := strings.Cut(k, " ")
		if identity.PseudonymousOIDCFactor(iss, salt, sub).Same(f) {
			delete(s.salts, k)
		}
	}
}

// erase drops a record's private artifacts, as postgres does: the ID
// token, statement and signature go, and a committed email's record stops
// naming the address (Log still shows it as an email without a value);
// the commitments stay.
func erase(e *identity.Evidence) {
	if len(e.Artifacts) == 0 {
		return
	}
	pub := e.Public()
	e.Artifacts, e.Signature, e.Statement, e.Erased = nil, pub.Signature, pub.Statement, true
	if e.Committed(identity.ArtifactEmail) {
		e.To = identity.Factor{}
	}
}

// tx is one transaction: its staged writes over the committed state.
type tx struct {
	s          *Store
	identities map[identity.Handle]identity.Identity
	factors    map[string][]byte
	used       map[string]bool
	usedMail   map[string]bool
	appended   []identity.Evidence
	ix         index // of appended
	lastID     int64
	headSeq    int64
	headHash   []byte
	erased     []identity.Handle
	erasedKeys []erasedKey
	done       bool
}

// erasedKey is a staged EraseKeyArtifacts.
type erasedKey struct {
	key    identity.Factor
	userID bool
	email  string
}

func (t *tx) view() view { return view{s: t.s, t: t} }

func (t *tx) check() error {
	if t.done {
		return fmt.Errorf("inprocess: transaction used after Update returned")
	}
	return nil
}

// IdentityRecords is Store.IdentityRecords, seeing the transaction's own
// writes.
func (t *tx) IdentityRecords(ctx context.Context, h identity.Handle) (identity.Identity, []identity.Evidence, error) {
	if err := t.check(); err != nil {
		return identity.Identity{}, nil, err
	}
	return t.view().identityRecords(h)
}

// FactorHandles is Store.FactorHandles, seeing the transaction's own
// writes.
func (t *tx) FactorHandles(ctx context.Context, f identity.Factor) ([]identity.Handle, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	return t.view().factorHandles(f), nil
}

// KeyRecords is Store.KeyRecords, seeing the transaction's own writes.
func (t *tx) KeyRecords(ctx context.Context, f identity.Factor) ([]identity.Evidence, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	return t.view().keyRecords(f), nil
}

// CreateIdentity creates the identity; identity.ErrHandleTaken if the
// handle exists.
func (t *tx) CreateIdentity(ctx context.Context, h identity.Handle, created time.Time) (identity.Identity, error) {
	id := identity.Identity{Handle: h, Created: identity.TruncateTime(created)}
	if err := t.check(); err != nil {
		return id, err
	}
	if _, ok := t.view().identity(h); ok {
		return id, identity.ErrHandleTaken
	}
	t.lastID++
	id.ID = t.lastID
	t.identities[h] = id
	return id, nil
}

// ConsumeChallenge marks the challenge answered (see identity.Tx).
func (t *tx) ConsumeChallenge(ctx context.Context, nonce []byte, now time.Time) (*identity.Challenge, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	k := string(nonce)
	c := t.s.challenges[k]
	if c == nil {
		return nil, identity.ErrNotFound
	}
	if c.used || t.used[k] {
		return nil, identity.ErrNonceUsed
	}
	if now.After(c.c.Expires) {
		return nil, identity.ErrChallengeExpired
	}
	t.used[k] = true
	out := c.c
	out.Nonce, out.Statement = bytes.Clone(c.c.Nonce), bytes.Clone(c.c.Statement)
	return &out, nil
}

// KeySets returns the JWKs of the oidc.jwks records of the provider with
// issuer, committed or staged.
func (t *tx) KeySets(ctx context.Context, issuer string) ([][]byte, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	var out [][]byte
	for _, log := range [][]identity.Evidence{t.s.log, t.appended} {
		for _, e := range log {
			if e.Method == identity.MethodOIDCKeySet && e.From.Kind == identity.KindOIDCProvider && e.From.Value == issuer {
				out = append(out, bytes.Clone(e.SignerKey))
			}
		}
	}
	return out, nil
}

// Append seals e after the log's last record (identity.Evidence.Seal)
// and stages it, as postgres does: the factors' data is the data first
// stored for them (which the hash then covers), and a record with a
// handle needs its identity to exist. e is updated in place.
func (t *tx) Append(ctx context.Context, e *identity.Evidence) error {
	if err := t.check(); err != nil {
		return err
	}
	if e.Handle != "" {
		if _, ok := t.view().identity(e.Handle); !ok {
			return fmt.Errorf("inprocess: append evidence: identity %s: %w", e.Handle, identity.ErrNotFound)
		}
	}
	e.From.Data = t.factorData(e.From)
	if !e.To.IsZero() {
		e.To.Data = t.factorData(e.To)
	}
	e.Seal(t.headSeq, t.headHash)
	t.appended = append(t.appended, full(e))
	t.ix.add(&t.appended[len(t.appended)-1])
	t.headSeq, t.headHash = e.Seq, e.Hash
	return nil
}

// EraseArtifacts stages the erasure of the private artifacts of every
// record naming h (see identity.Tx), applied when the transaction
// commits; it counts the records that have any.
func (t *tx) EraseArtifacts(ctx context.Context, h identity.Handle) (int, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	n := 0
	for _, seq := range t.view().seqs(func(ix *index) []int64 { return ix.byHandle[h] }) {
		if len(t.view().record(seq).Artifacts) > 0 {
			n++
		}
	}
	t.erased = append(t.erased, h)
	return n, nil
}

// EraseKeyArtifacts stages the erasure of what the records about the key
// hold of a person (see identity.Tx), applied when the transaction
// commits; it counts the records that have artifacts it erases.
func (t *tx) EraseKeyArtifacts(ctx context.Context, key identity.Factor, userID bool, email string) (int, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	n := 0
	for i := range t.s.log {
		e := &t.s.log[i]
		if e.From.Same(key) && len(e.Artifacts) > 0 && (e.Handle == "" || e.Committed(identity.ArtifactPGPKey)) {
			n++
		}
	}
	t.erasedKeys = append(t.erasedKeys, erasedKey{key, userID, email})
	return n, nil
}

// factorData returns the data stored for f, storing f's own if f is new.
func (t *tx) factorData(f identity.Factor) []byte {
	k := factorKey(f)
	d, ok := t.factors[k]
	if !ok {
		d, ok = t.s.factors[k]
	}
	if !ok {
		d = bytes.Clone(f.Data)
		t.factors[k] = d
	}
	if len(d) == 0 {
		return nil
	}
	return bytes.Clone(d)
}

// LiveCertificates returns the ssh.certificate records whose validity
// ends after now, with every byte.
func (s *Store) LiveCertificates(ctx context.Context, now time.Time) ([]identity.Evidence, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []identity.Evidence
	for i := range s.log {
		if e := &s.log[i]; e.Method == identity.MethodSSHCertificate && e.Expires.After(now) {
			out = append(out, full(e))
		}
	}
	return out, nil
}

// KeyRecorded reports whether a record with method m, committed or
// staged, holds exactly key as its signer key.
func (t *tx) KeyRecorded(ctx context.Context, m identity.Method, key []byte) (bool, error) {
	if err := t.check(); err != nil {
		return false, err
	}
	for _, log := range [][]identity.Evidence{t.s.log, t.appended} {
		for _, e := range log {
			if e.Method == m && bytes.Equal(e.SignerKey, key) {
				return true, nil
			}
		}
	}
	return false, nil
}

// NextSeq returns the Seq the transaction's next Append gives its record.
func (t *tx) NextSeq(ctx context.Context) (int64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	return t.headSeq + 1, nil
}
