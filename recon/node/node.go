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
// policy, then merge and store). A key refused, or
// stored otherwise than the peer holds it (the policy changed it, it is a
// tombstone, it is blocked or carries blocked packets), is reported as
// rejected, so that the fetcher does not ask for that digest again every
// round; the refusals that no later event can undo but an unblock are
// remembered in the store, for every node and past restarts (RefuseDigest).
// Refusals by the upload policy are not: the key may be proven later.
func StoreFetched(st keys.Refusals, uploads keys.Uploader, log *slog.Logger) func(ctx context.Context, b []byte) error {
	return func(ctx context.Context, b []byte) error {
		raw, err := pgp.ParseKey(b)
		if err != nil {
			return fmt.Errorf("%w: %v", recon.ErrRejected, err)
		}
		refuse := func(reason string) error {
			log.Info("recon: refused a fetched key", "fingerprint", fmt.Sprintf("%X", raw.Fingerprint()), "reason", reason)
			if err := st.RefuseDigest(ctx, raw.Digest(), raw.Fingerprint(), reason); err != nil {
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
			return refuse("stored as changed by the key policy")
		case change == keys.Unchanged:
			// The stored key holds all of the peer's and more (Hockeypuck
			// and SKS keep what Kith's policy caps or drops, and the other
			// way round): the peer's digest will never bring anything new.
			if err := st.RefuseDigest(ctx, raw.Digest(), raw.Fingerprint(), "merging it changed nothing"); err != nil {
				return err
			}
			return fmt.Errorf("%w: %X", recon.ErrUnchanged, raw.Fingerprint())
		}
		return nil
	}
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
