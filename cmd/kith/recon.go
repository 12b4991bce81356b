package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/recon"
)

// reconStore is what recon needs of the store: the digests to build the
// tree from, the changes that keep it current, and the upload path for
// fetched keys.
type reconStore interface {
	Digests(ctx context.Context, fn func([16]byte) error) error
	WatchKeyChanges(ctx context.Context, ready chan<- struct{}, fn func(identity.KeyDigestChange)) error
	AddKey(ctx context.Context, key *pgp.Key) (identity.KeyChange, error)
	IssuerKeys(ctx context.Context) pgp.IssuerKeys
}

// startRecon builds the recon tree from the store, keeps it current from
// the store's change notifications (so every node sharing the database
// agrees), and runs the peer manager on ln until ctx ends.
func startRecon(ctx context.Context, cfg Config, st reconStore, policy pgp.Policy, ln net.Listener, httpAddr string,
	log *slog.Logger, reg prometheus.Registerer) (*recon.Manager, error) {
	log = log.With("component", "recon")
	tree, err := followStore(ctx, st, log)
	if err != nil {
		return nil, err
	}
	_, portStr, _ := net.SplitHostPort(httpAddr)
	httpPort, _ := strconv.Atoi(portStr)
	peers := make([]recon.Peer, len(cfg.Recon.Peers))
	for i, p := range cfg.Recon.Peers {
		peers[i] = recon.Peer{Address: p.Address, HTTP: p.HTTP, Filters: p.Filters, Disabled: p.Enabled != nil && !*p.Enabled}
	}
	fetcher := recon.NewHashQueryFetcher(fetchedKeyStorer(st, policy), log)
	fetcher.KeyDigest = func(b []byte) ([16]byte, error) {
		k, err := pgp.ParseKey(b)
		if err != nil {
			return [16]byte{}, err
		}
		return k.Digest(), nil
	}
	m, err := recon.NewManager(recon.ManagerConfig{
		Listen:   ln.Addr().String(),
		Interval: time.Duration(cfg.Recon.Interval),
		HTTPPort: httpPort,
		Peers:    peers,
	}, tree, fetcher, log, reg)
	if err != nil {
		return nil, fmt.Errorf("setting recon: %w", err)
	}
	go m.Serve(ctx, ln)
	go m.Gossip(ctx)
	return m, nil
}

// fetchedKeyStorer sends each key a peer served through the upload path:
// the policy, then merge and store. A key the policy refuses, or one the
// policy changed (so its digest here differs from the peer's), is reported
// as rejected, so that the fetcher does not ask for that digest again
// every round.
func fetchedKeyStorer(st reconStore, policy pgp.Policy) func(ctx context.Context, b []byte) error {
	return func(ctx context.Context, b []byte) error {
		raw, err := pgp.ParseKey(b)
		if err != nil {
			return fmt.Errorf("%w: %v", recon.ErrRejected, err)
		}
		policy := policy
		policy.Issuers = st.IssuerKeys(ctx)
		k, _, err := policy.Apply(raw)
		if err != nil {
			return fmt.Errorf("%w: %v", recon.ErrRejected, err)
		}
		if _, err := st.AddKey(ctx, k); err != nil {
			return err
		}
		if k.Digest() != raw.Digest() {
			return fmt.Errorf("%w: stored as changed by the key policy", recon.ErrRejected)
		}
		return nil
	}
}

// followStore returns the recon tree of the store's digests and keeps it
// current until ctx ends. It listens before it reads, so no change falls
// between the two; when the listening connection fails it listens again
// and reconciles the tree with the store.
func followStore(ctx context.Context, st reconStore, log *slog.Logger) (*recon.Tree, error) {
	changes := make(chan identity.KeyDigestChange, 1<<16)
	ready := make(chan struct{})
	watchErr := make(chan error, 1)
	watch := func(ready chan struct{}) {
		watchErr <- st.WatchKeyChanges(ctx, ready, func(c identity.KeyDigestChange) {
			select {
			case changes <- c:
			case <-ctx.Done():
			}
		})
	}
	go watch(ready)
	select {
	case <-ready:
	case err := <-watchErr:
		return nil, fmt.Errorf("recon: follow key changes: %w", err)
	}
	start := time.Now()
	tree, err := recon.BuildTreeFrom(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("recon: build tree: %w", err)
	}
	log.Info("recon tree built", "digests", tree.Len(), "took", time.Since(start).Round(time.Millisecond).String())
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case c := <-changes:
				applyChange(tree, c)
			case err := <-watchErr:
				if ctx.Err() != nil {
					return
				}
				log.Warn("lost key-change notifications; listening again", "err", err)
				time.Sleep(time.Second)
				ready := make(chan struct{})
				go watch(ready)
				select {
				case <-ready:
					if err := resyncTree(ctx, st, tree); err != nil && !errors.Is(err, context.Canceled) {
						log.Warn("resync recon tree", "err", err)
					}
				case err := <-watchErr:
					watchErr <- err // handled on the next turn
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return tree, nil
}

func applyChange(tree *recon.Tree, c identity.KeyDigestChange) {
	var zero [16]byte
	if c.Old != zero {
		tree.Remove(c.Old)
	}
	if c.New != zero {
		tree.Insert(c.New)
	}
}

// resyncTree makes the tree hold exactly the store's digests.
func resyncTree(ctx context.Context, st reconStore, tree *recon.Tree) error {
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
