// Package node is Kith's half of SKS recon: a recon node over Kith's key
// store. It builds the prefix tree from the store's digests and keeps it
// current from the store's key-change notifications (so every node
// sharing the database agrees), stores the keys fetched from peers
// through the one upload path (identity/keys), remembers the refusals
// that no later event undoes, and runs the peer manager.
//
// It does not own the recon protocol, the tree or the peer gossip
// (package recon), the upload path (identity/keys.Service) or the store
// (identity/postgres, reached through identity/keys' interfaces); the
// configuration settings and their names belong to cmd/kith.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/retry"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/recon"
)

// Store is what a recon node needs of the key store: the digests to build
// the tree from, the changes that keep it current, and the peers' digests
// refused before.
type Store interface {
	keys.Lister
	keys.Listener
	keys.Refusals
}

// Config configures a node.
type Config struct {
	// Interval is the time between recon rounds with the peers.
	Interval time.Duration
	// HTTPPort is the port of this node's HKP, which peers fetch from.
	HTTPPort int
	// Peers are the recon peers.
	Peers []recon.Peer
}

// Start builds the recon tree from st, keeps it current from st's change
// notifications, and runs the peer manager on ln until ctx ends. Fetched
// keys go through the upload path uploads.
func Start(ctx context.Context, cfg Config, st Store, uploads keys.Uploader,
	ln net.Listener, log *slog.Logger, reg prometheus.Registerer) (*recon.Manager, error) {
	tree, err := FollowStore(ctx, st, log)
	if err != nil {
		return nil, err
	}
	fetcher := recon.NewHashQueryFetcher(StoreFetched(st, uploads, log), log)
	fetcher.KeyDigest = func(b []byte) ([16]byte, error) {
		k, err := pgp.ParseKey(b)
		if err != nil {
			return [16]byte{}, err
		}
		return k.Digest(), nil
	}
	m, err := recon.NewManager(recon.ManagerConfig{
		Listen:   ln.Addr().String(),
		Interval: cfg.Interval,
		HTTPPort: cfg.HTTPPort,
		Peers:    cfg.Peers,
	}, tree, RefusingFetcher{Fetcher: fetcher, Refusals: st}, log, reg)
	if err != nil {
		return nil, fmt.Errorf("setting recon: %w", err)
	}
	go m.Serve(ctx, ln)
	go m.Gossip(ctx)
	return m, nil
}

// StoreFetched returns the recon.HashQueryFetcher callback that sends each
// key a peer served through the upload path (the key policy, the upload
// policy, then merge and store). A key stored otherwise than the peer
// holds it is not asked for again every round: its digest is remembered
// in the store, for every node and past restarts (RefuseDigest). That is
// a refusal (recon.ErrRejected, logged as one) when the key is refused,
// is a tombstone, or is or carries something blocked; it is not when the
// key policy changed the peer's form (dropped certifications over the
// cap, say) and the key was stored or merged all the same
// (recon.ErrChangedByPolicy, logged once per key per process at info
// level, then at debug level), nor when the merge changed nothing
// (recon.ErrUnchanged). Refusals by the upload policy are not remembered:
// the key may be proven later.
func StoreFetched(st keys.Refusals, uploads keys.Uploader, log *slog.Logger) func(ctx context.Context, b []byte) error {
	seen := newOnce(changedLogKeys)
	return func(ctx context.Context, b []byte) error {
		raw, err := pgp.ParseKey(b)
		if err != nil {
			return fmt.Errorf("%w: %v", recon.ErrRejected, err)
		}
		fp := fmt.Sprintf("%X", raw.Fingerprint())
		remember := func(reason string) error {
			return st.RefuseDigest(ctx, raw.Digest(), raw.Fingerprint(), reason)
		}
		refuse := func(reason string) error {
			log.Info("recon: refused a fetched key", "fingerprint", fp, "reason", reason)
			if err := remember(reason); err != nil {
				return err
			}
			return fmt.Errorf("%w: %s", recon.ErrRejected, reason)
		}
		res, err := uploads.Upload(ctx, raw, keys.UploadOptions{})
		var rej *keys.Rejection
		switch {
		case errors.As(err, &rej) && rej.ByUploadPolicy:
			// Not remembered: the key may be proven later.
			return fmt.Errorf("%w: %v", recon.ErrRejected, rej.Err)
		case errors.As(err, &rej):
			return refuse(rej.Reason)
		case err != nil:
			return err
		}
		k, change := res.Key, res.Change
		switch {
		case change == keys.Blocked || change == keys.Reduced:
			return refuse(change.Reason())
		case k.Digest() != raw.Digest():
			// res.Key is the peer's key as the policy left it, before the
			// merge: the policy changed it. Kith keeps its own form; the
			// peer's digest stays missing here for good, and Kith's may stay
			// missing at the peer (see README, "Recon peers").
			level := slog.LevelDebug
			if seen.first(fp) {
				level = slog.LevelInfo
			}
			log.Log(ctx, level, "recon: stored a fetched key changed by the key policy", "fingerprint", fp,
				"dropped", res.Report.String(), "change", change.String(),
				"peer_digest", fmt.Sprintf("%X", raw.Digest()), "policy_digest", fmt.Sprintf("%X", k.Digest()))
			if err := remember(changedByPolicy); err != nil {
				return err
			}
			if change == keys.Unchanged {
				return fmt.Errorf("%w: %w: %s", recon.ErrChangedByPolicy, recon.ErrUnchanged, fp)
			}
			return fmt.Errorf("%w: %s", recon.ErrChangedByPolicy, fp)
		case change == keys.Unchanged:
			// The stored key holds all of the peer's and more (Hockeypuck
			// and SKS keep what Kith's policy caps or drops, and the other
			// way round): the peer's digest will never bring anything new.
			if err := remember("merging it changed nothing"); err != nil {
				return err
			}
			return fmt.Errorf("%w: %s", recon.ErrUnchanged, fp)
		}
		return nil
	}
}

// changedByPolicy is the reason remembered with the digest of a key the
// key policy changed; the same words as before it stopped being logged as
// a refusal, so that the remembered digests read alike.
const changedByPolicy = "stored as changed by the key policy"

// changedLogKeys bounds the fingerprints StoreFetched remembers having
// logged at info level.
const changedLogKeys = 10_000

// once remembers up to max keys; when full it starts again from empty,
// so its memory stays bounded and a key is reported again at worst once
// per max others. It is safe for concurrent use.
type once struct {
	max  int
	mu   sync.Mutex
	seen map[string]struct{}
}

func newOnce(max int) *once { return &once{max: max, seen: make(map[string]struct{})} }

// first reports whether key is new, and remembers it.
func (o *once) first(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.seen[key]; ok {
		return false
	}
	if len(o.seen) >= o.max {
		clear(o.seen)
	}
	o.seen[key] = struct{}{}
	return true
}

// RefusingFetcher leaves out of each fetch the digests the store
// remembers as refused (by any node), and fetches the rest with Fetcher.
type RefusingFetcher struct {
	recon.Fetcher
	Refusals keys.Refusals
}

// refusedBatch is how many digests one RefusedDigests query checks.
const refusedBatch = 10_000

// Fetch implements recon.Fetcher.
func (f RefusingFetcher) Fetch(ctx context.Context, peer recon.Peer, missing [][16]byte) (recon.FetchResult, error) {
	todo := make([][16]byte, 0, len(missing))
	for start := 0; start < len(missing); start += refusedBatch {
		part := missing[start:min(start+refusedBatch, len(missing))]
		refused, err := f.Refusals.RefusedDigests(ctx, part)
		if err != nil {
			return recon.FetchResult{}, fmt.Errorf("recon: fetching from %s: %w", peer.Address, err)
		}
		for _, d := range part {
			if !refused[d] {
				todo = append(todo, d)
			}
		}
	}
	res, err := f.Fetcher.Fetch(ctx, peer, todo)
	res.Skipped += len(missing) - len(todo)
	return res, err
}

// FollowStore returns the recon tree of the store's digests and keeps it
// current until ctx ends. It listens before it reads, so no change falls
// between the two; when the listening connection fails it listens again
// (with package retry's backoff) and then reconciles the tree with the
// store, so that the changes made meanwhile are caught up.
func FollowStore(ctx context.Context, st Store, log *slog.Logger) (*recon.Tree, error) {
	// One queue, in order: the changes notified, and after each
	// reconnect a resync, which corrects whatever the changes before it
	// missed.
	type event struct {
		change keys.DigestChange
		resync bool
	}
	events := make(chan event, 1<<16)
	send := func(e event) {
		select {
		case events <- e:
		case <-ctx.Done():
		}
	}
	lctx, stop := context.WithCancel(ctx)
	first := make(chan error, 1) // nil once the first session listens
	started := false             // Follow's hooks run one after another
	go retry.Follow(lctx, retry.Backoff{}, func(ctx context.Context, ready chan<- struct{}) error {
		return st.WatchKeyChanges(ctx, ready, func(c keys.DigestChange) { send(event{change: c}) })
	}, retry.Hooks{
		Ready: func() {
			if started {
				send(event{resync: true})
				return
			}
			started = true
			first <- nil
		},
		Failed: func(err error, wait time.Duration) {
			if !started {
				first <- err
				stop()
				return
			}
			log.Warn("lost key-change notifications; listening again", "err", err, "retry_in", wait.String())
		},
	})
	var err error
	select {
	case err = <-first:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		stop()
		return nil, fmt.Errorf("recon: follow key changes: %w", err)
	}
	start := time.Now()
	tree, err := recon.BuildTreeFrom(ctx, st)
	if err != nil {
		stop()
		return nil, fmt.Errorf("recon: build tree: %w", err)
	}
	log.Info("recon tree built", "digests", tree.Len(), "took", time.Since(start).Round(time.Millisecond).String())
	go func() {
		defer stop()
		for {
			select {
			case <-ctx.Done():
				return
			case e := <-events:
				if !e.resync {
					applyChange(tree, e.change)
					continue
				}
				var b retry.Backoff
				for {
					err := resyncTree(ctx, st, tree)
					if err == nil {
						break
					}
					wait := b.Next()
					log.Warn("resync recon tree", "err", err, "retry_in", wait.String())
					if !retry.Wait(ctx, wait) {
						return
					}
				}
				log.Info("recon tree caught up with the store", "digests", tree.Len())
			}
		}
	}()
	return tree, nil
}

// applyChange moves the tree from a change's old digest to its new one.
func applyChange(tree *recon.Tree, c keys.DigestChange) {
	var zero [16]byte
	if c.Old != zero {
		tree.Remove(c.Old)
	}
	if c.New != zero {
		tree.Insert(c.New)
	}
}

// resyncTree makes the tree hold exactly the store's digests.
func resyncTree(ctx context.Context, st keys.Lister, tree *recon.Tree) error {
	inStore := map[[16]byte]bool{}
	if err := st.Digests(ctx, func(d [16]byte) error { inStore[d] = true; return nil }); err != nil {
		return err
	}
	for _, d := range tree.Digests() {
		if !inStore[d] {
			tree.Remove(d)
		}
		delete(inStore, d)
	}
	for d := range inStore {
		tree.Insert(d)
	}
	return nil
}
