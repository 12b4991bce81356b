// service.go: the Service, the one upload path of OpenPGP keys. Every
// writer of keys (HKP, VKS, the pages, recon fetches, `kith load`,
// `kith repair`, `kith block`) goes through it, so the order of the steps
// is written once: the key policy with the store's issuers, the upload
// policy, merge and store, then the identity links the changed keys carry
// and the subscribers (this node's caches) before the call returns. Blocks
// (an operator's, an owner's deletion) take the same way out.

package keys

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/pgp"
)

// Identities is what the Service needs of the identity Service
// (identity.Service is one): who proves a key, for the upload policy, and
// the refresh of the links a changed key carries.
type Identities interface {
	Prover
	// SyncKeys records what the changed keys (primary fingerprints) now
	// carry, for those an identity names.
	SyncKeys(ctx context.Context, fps [][]byte) error
}

// Subscriber learns of the keys writes through the Service store. Other
// nodes learn of changes from the store's notifications (Listener), which
// reach this node too, before or after its write returns.
type Subscriber interface {
	// KeysWriting is told the keys a write is about to store, before
	// the store commits them, so that a subscriber may remember what it
	// needs of them: the notification of this node's own write then needs
	// no read from the store. A key that merges with its stored form is
	// stored in another form, which KeysChanged is told.
	KeysWriting(ctx context.Context, ks []*pgp.Key)
	// KeysChanged is told the keys a write changed, as stored, after the
	// write commits and before it returns, so that a cache of this node
	// drops what the change outdates and the writer reads its own write.
	KeysChanged(ctx context.Context, changed []*pgp.Key)
}

// Options configure a Service.
type Options struct {
	// Policy is the key policy every key passes before it is stored (zero
	// limits: pgp's defaults). Its Issuers is set per upload from the
	// store.
	Policy pgp.Policy
	// Uploads is the upload policy ("" is UploadsOpen).
	Uploads UploadPolicy
	// Identities refreshes the links of changed keys and answers the
	// upload policy; nil refreshes nothing, and UploadsIdentities then
	// refuses every upload that is not logged in.
	Identities Identities
	// Logger receives what a write cannot return as an error (a link
	// refresh that failed after the key was stored); nil: slog.Default().
	Logger *slog.Logger
	// MaxConcurrentUploads caps the HTTP upload requests (Admit) in
	// progress at once; 0: DefaultMaxConcurrentUploads.
	MaxConcurrentUploads int
}

// Service owns the writes of OpenPGP keys. It is safe for concurrent use.
type Service struct {
	store Store
	opts  Options
	log   *slog.Logger
	// slots holds a token per admitted upload request; waiting counts
	// the requests waiting for one (Admit).
	slots   chan struct{}
	waiting atomic.Int32

	mu   sync.Mutex
	subs []Subscriber
}

// NewService returns the Service writing keys to store.
func NewService(store Store, opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxConcurrentUploads <= 0 {
		opts.MaxConcurrentUploads = DefaultMaxConcurrentUploads()
	}
	return &Service{store: store, opts: opts, log: opts.Logger, slots: make(chan struct{}, opts.MaxConcurrentUploads)}
}

// Subscribe has sub told of every key a write through s changes, from now
// on. The wiring (cmd) subscribes each cache of the node once, when it
// builds it.
func (s *Service) Subscribe(sub Subscriber) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs = append(s.subs, sub)
}

// Policy returns the key policy the Service applies.
func (s *Service) Policy() pgp.Policy { return s.opts.Policy }

// Rejection is an upload the server does not store: the key policy or the
// upload policy refused it. Reason is written for the uploader.
type Rejection struct {
	Reason string
	// ByUploadPolicy: the upload policy refused a key the key policy
	// accepted (a later proof may let it in); otherwise the key policy
	// refused the key itself.
	ByUploadPolicy bool
	// Err is the refusal as pgp or identity returned it.
	Err error
}

// Error returns the reason.
func (r *Rejection) Error() string { return "keys: rejected: " + r.Reason }

// Unwrap returns the refusal as pgp or identity returned it.
func (r *Rejection) Unwrap() error { return r.Err }

// ErrUploadPolicyFailed matches (errors.Is) an upload whose upload policy
// could not be decided because the identity store failed.
var ErrUploadPolicyFailed = errors.New("the upload policy could not be checked")

// UploadOptions say who uploads.
type UploadOptions struct {
	// LoggedIn: a logged-in session uploads the key (the web upload page);
	// the upload policy may accept more then.
	LoggedIn bool
	// Admission is the HTTP upload request the key comes in (Admit): the
	// keys of one request share its verification budget. Nil for writers
	// that are not requests (recon fetches, the tools).
	Admission *Admission
}

// Result is what an accepted upload did.
type Result struct {
	// Key is the key as it passed the key policy (what was offered to the
	// store, before the merge with the stored key).
	Key *pgp.Key
	// Report counts what the key policy dropped.
	Report pgp.Report
	// Change is what storing it did.
	Change Change
}

// Upload runs the upload path for one key: the key policy, with the
// store's keys ranking the certifications they can verify first (against
// certification floods); the upload policy; merge and store; then the
// links the key carries are refreshed and the subscribers told, before
// Upload returns. A key either policy refuses is a *Rejection; other
// errors are failures (ErrUploadPolicyFailed, or the store's).
func (s *Service) Upload(ctx context.Context, k *pgp.Key, u UploadOptions) (Result, error) {
	policy := s.opts.Policy
	policy.Issuers = s.store.IssuerKeys(ctx)
	if u.Admission != nil {
		policy.Budget = u.Admission.budget
		ctx = WithVerifyBudget(ctx, u.Admission.budget)
	}
	applied, rep, err := policy.Apply(k)
	if err != nil {
		return Result{}, &Rejection{Reason: pgp.RejectionReason(err), Err: err}
	}
	res := Result{Key: applied, Report: rep}
	if err := s.mayUpload(ctx, Upload{Fingerprint: applied.Fingerprint(), LoggedIn: u.LoggedIn}); err != nil {
		return res, err
	}
	s.writing(ctx, []*pgp.Key{applied})
	w, err := s.store.AddKey(ctx, applied)
	if errors.Is(err, pgp.ErrVerifyBudget) {
		// The merge with the stored key ran out of the request's budget.
		return res, &Rejection{Reason: pgp.RejectionReason(err), Err: err}
	}
	if err != nil {
		return res, fmt.Errorf("keys: upload %X: %w", applied.Fingerprint(), err)
	}
	res.Change = w.Change
	if w.Key != nil {
		s.changed(ctx, []Written{w})
	}
	return res, nil
}

// mayUpload asks the upload policy about u.
func (s *Service) mayUpload(ctx context.Context, u Upload) error {
	var ids Prover = noProver{}
	if s.opts.Identities != nil {
		ids = s.opts.Identities
	}
	err := MayUpload(ctx, ids, s.opts.Uploads, u)
	if err == nil {
		return nil
	}
	var ie *identity.Error
	if errors.As(err, &ie) {
		return &Rejection{Reason: ie.Msg, ByUploadPolicy: true, Err: err}
	}
	return fmt.Errorf("keys: upload %X: %w: %w", u.Fingerprint, ErrUploadPolicyFailed, err)
}

// noProver proves nothing: without identities, no key is proven.
type noProver struct{}

func (noProver) WhoProves(context.Context, identity.Factor) (identity.Handle, error) {
	return "", identity.Refuse(identity.CodeNotLinked, "no identities on this server")
}

// Process reads keys from r and applies the key policy to each on workers
// goroutines (0: GOMAXPROCS), calling fn with each result in input order,
// for bulk loads whose keys then go to AddKeys. No issuer ranking applies
// (a bulk load into an empty store has no issuers to rank by).
func (s *Service) Process(ctx context.Context, r *pgp.Reader, workers int, fn func(pgp.Result) error) error {
	return s.opts.Policy.ProcessParallel(ctx, r, workers, fn)
}

// Recheck applies the key policy to a stored key again (kith repair: the
// policy may have gained a rule since the key was stored).
func (s *Service) Recheck(stored *pgp.Key) (*pgp.Key, pgp.Report, error) {
	return s.opts.Policy.Apply(stored)
}

// AddKeys stores a batch of keys that have passed the key policy (Process,
// Recheck) in one transaction, for bulk loads and repairs run by the
// operator (no upload policy applies), then refreshes the links of the
// changed keys and tells the subscribers.
func (s *Service) AddKeys(ctx context.Context, batch []*pgp.Key) ([]Change, error) {
	s.writing(ctx, batch)
	ws, err := s.store.AddKeys(ctx, batch)
	if err != nil {
		return nil, fmt.Errorf("keys: add %d keys: %w", len(batch), err)
	}
	changes := make([]Change, len(ws))
	var changed []Written
	for i, w := range ws {
		changes[i] = w.Change
		if w.Key != nil {
			changed = append(changed, w)
		}
	}
	if len(changed) > 0 {
		s.changed(ctx, changed)
	}
	return changes, nil
}

// AddBlock adds b to the blocklist and applies it to the stored key (kith
// block, and an owner's deletion: it is the identity Service's
// identity.Blocklist), then refreshes the links of the key, which may
// carry fewer now, and tells the subscribers of the key as it was, so
// that this node serves no answer holding what was blocked once AddBlock
// returns. Other nodes learn of the change from its notification.
func (s *Service) AddBlock(ctx context.Context, b identity.Block) (identity.BlockOutcome, error) {
	subs := s.subscribers()
	var before []Stored
	if len(subs) > 0 {
		// What the subscribers' answers may hold: the key before the block.
		var err error
		if before, _, err = s.store.FindKeys(ctx, Query{Fingerprints: [][]byte{b.Fingerprint}, Limit: 1}); err != nil {
			return "", fmt.Errorf("keys: block %X: %w", b.Fingerprint, err)
		}
	}
	out, err := s.store.AddBlock(ctx, b)
	if err != nil {
		return out, err
	}
	switch out {
	case identity.BlockKeyRemoved, identity.BlockKeyTombstoned, identity.BlockKeyCleaned:
		s.syncLinks(ctx, [][]byte{b.Fingerprint})
		for _, st := range before {
			k, err := pgp.ParseKey(st.Packets)
			if err != nil {
				s.log.Warn("keys: block: the stored key does not parse", "fingerprint", fmt.Sprintf("%X", b.Fingerprint), "err", err)
				continue
			}
			for _, sub := range subs {
				sub.KeysChanged(ctx, []*pgp.Key{k})
			}
		}
	}
	return out, nil
}

// changed refreshes the links the changed keys carry (unless the store
// found that no identity names them), then tells the subscribers: the
// writer reads its own write when the call returns.
func (s *Service) changed(ctx context.Context, ws []Written) {
	var fps [][]byte
	changed := make([]*pgp.Key, len(ws))
	for i, w := range ws {
		changed[i] = w.Key
		if !w.Unlinked {
			fps = append(fps, w.Key.Fingerprint())
		}
	}
	if len(fps) > 0 {
		s.syncLinks(ctx, fps)
	}
	for _, sub := range s.subscribers() {
		sub.KeysChanged(ctx, changed)
	}
}

// writing tells the subscribers of keys about to be stored.
func (s *Service) writing(ctx context.Context, ks []*pgp.Key) {
	for _, sub := range s.subscribers() {
		sub.KeysWriting(ctx, ks)
	}
}

// subscribers returns the subscribers as they are now.
func (s *Service) subscribers() []Subscriber {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subs
}

// syncLinks refreshes the identity links of the keys fps. A failure is
// logged, not returned: the key is stored, and the next change of the key
// or a restart's identity.Service.SyncLinkedKeys catches up.
func (s *Service) syncLinks(ctx context.Context, fps [][]byte) {
	if s.opts.Identities == nil {
		return
	}
	if err := s.opts.Identities.SyncKeys(ctx, fps); err != nil {
		s.log.Warn("sync the identity links of changed keys", "keys", len(fps), "err", err)
	}
}

// Uploader is the upload path as a frontend takes it (*Service is one).
type Uploader interface {
	// Admit admits an HTTP upload request whose body has been read,
	// waiting a moment for a slot when every one is taken.
	Admit(ctx context.Context) (*Admission, bool)
	Upload(ctx context.Context, k *pgp.Key, u UploadOptions) (Result, error)
}
