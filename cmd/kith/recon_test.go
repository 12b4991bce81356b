package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kith-keyserver/kith/cmd/internal/settings"
	"github.com/kith-keyserver/kith/hkp"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/keys/bulk"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
	"github.com/kith-keyserver/kith/recon"
)

// reconNode is one in-process Kith: a store, HKP over HTTP and a recon
// manager, wired as kith serve wires them.
type reconNode struct {
	store   *postgres.Store
	http    *httptest.Server
	reconLn net.Listener
	manager *recon.Manager
	// keys is the node's upload path, which recon stores fetched keys
	// through.
	keys *keys.Service
}

func newReconNode(t testing.TB, ctx context.Context, stored []*pgp.Key) *reconNode {
	t.Helper()
	n := &reconNode{store: openTestStore(t, pgtest.NewDatabase(t))}
	for start := 0; start < len(stored); start += bulk.BatchSize {
		if _, err := n.store.AddKeys(ctx, stored[start:min(start+bulk.BatchSize, len(stored))]); err != nil {
			t.Fatal(err)
		}
	}
	n.keys = keys.NewService(n.store, keys.Options{Policy: pgp.DefaultPolicy(), Logger: slog.New(slog.DiscardHandler)})
	h := hkp.NewHandler(n.store, n.keys, hkp.Options{Logger: slog.New(slog.DiscardHandler)})
	n.keys.Subscribe(h)
	go h.Run(ctx)
	n.http = httptest.NewServer(h)
	t.Cleanup(n.http.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.reconLn = ln
	return n
}

// start runs the node's recon manager with one member: the peer at
// reconAddr, with its HKP at httpURL.
func (n *reconNode) start(t testing.TB, ctx context.Context, reconAddr, httpURL string) {
	t.Helper()
	cfg := defaultConfig()
	cfg.Recon.Interval = settings.Duration(time.Hour) // rounds are started by the test
	cfg.Recon.Peers = []ReconPeer{{Address: reconAddr, HTTP: httpURL}}
	m, err := startRecon(ctx, cfg, n.store, n.keys, n.reconLn, n.http.Listener.Addr().String(),
		slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	n.manager = m
}

func policyKeys(t testing.TB, raw [][]byte) []*pgp.Key {
	t.Helper()
	keys := make([]*pgp.Key, len(raw))
	for i, b := range raw {
		k, err := pgp.ParseKey(b)
		if err != nil {
			t.Fatal(err)
		}
		if keys[i], _, err = pgp.DefaultPolicy().Apply(k); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// TestReconTwoKithNodesConverge: two nodes with separate databases, each
// holding keys the other lacks, reach the union in one recon round
// (hashquery fetch included).
func TestReconTwoKithNodesConverge(t *testing.T) {
	// Enough keys for a tree several levels deep and a diff that takes
	// five hashquery batches each way (50,000 keys took minutes of
	// database writes and timed the package out on a loaded machine).
	size, diff := 5000, 500
	if testing.Short() {
		size, diff = 3000, 100
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	raw, err := keygen.New(21).Range(0, size+diff)
	if err != nil {
		t.Fatal(err)
	}
	keys := policyKeys(t, raw)
	// a holds keys [0, size), b holds [diff, size+diff): diff each way.
	a := newReconNode(t, ctx, keys[:size])
	b := newReconNode(t, ctx, keys[diff:])
	a.start(t, ctx, b.reconLn.Addr().String(), b.http.URL)
	b.start(t, ctx, a.reconLn.Addr().String(), a.http.URL)

	peer := recon.Peer{Address: b.reconLn.Addr().String(), HTTP: b.http.URL}
	res, fetched, err := a.manager.ReconcileWith(ctx, peer)
	if err != nil {
		t.Fatalf("recon round: %v", err)
	}
	if len(res.Missing) != diff || fetched.Stored != diff {
		t.Errorf("a found %d missing and stored %d, want %d", len(res.Missing), fetched.Stored, diff)
	}
	// b fetches what it lacks after its side of the session ends.
	want := size + diff
	dl, _ := ctx.Deadline()
	testkit.Eventually(t, time.Until(dl), "both nodes holding every key", func() bool {
		return len(digestsOf(t, a.store)) == want && len(digestsOf(t, b.store)) == want
	})
	if strings.Join(digestsOf(t, a.store), ",") != strings.Join(digestsOf(t, b.store), ",") {
		t.Fatal("the nodes hold different key sets")
	}
	// Both nodes serve every key over HKP, e.g. the ones each lacked.
	for _, k := range []*pgp.Key{keys[0], keys[size+diff-1]} {
		for _, n := range []*reconNode{a, b} {
			resp, err := http.Get(n.http.URL + "/pks/lookup?op=get&options=mr&search=0x" + k.Describe().FingerprintHex())
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s: op=get %s: %s", n.http.URL, k.Describe().FingerprintHex(), resp.Status)
			}
		}
	}
	// A second round finds nothing to do.
	res, _, err = a.manager.ReconcileWith(ctx, peer)
	if err != nil || len(res.Missing) != 0 {
		t.Fatalf("second round: %d missing, %v", len(res.Missing), err)
	}
	for _, st := range a.manager.Status() {
		if st.Sessions < 2 || st.ElementsReceived < diff {
			t.Errorf("status of %s: %+v", st.Peer.Address, st)
		}
	}
}

// withoutLastUserID is k without its last user ID and that user ID's
// signatures: a smaller form of the same key, as a peer whose policy
// dropped something might hold it.
func withoutLastUserID(t testing.TB, k *pgp.Key) *pgp.Key {
	t.Helper()
	ps := k.Packets()
	last := -1
	for i, p := range ps {
		if p.Tag == pgp.TagUserID {
			last = i
		}
	}
	end := last + 1
	for end < len(ps) && ps[end].Tag == pgp.TagSignature {
		end++
	}
	if last < 0 {
		t.Fatal("key has no user ID")
	}
	out, _, err := pgp.DefaultPolicy().Apply(pgp.NewKey(append(slices.Clone(ps[:last]), ps[end:]...)))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReconRemembersKeysWhoseMergeChangesNothing: a peer holding a smaller
// form of a key (Hockeypuck keeps the same key differently) has a digest
// Kith lacks, so Kith fetches it; merged, it changes nothing. It counts as
// unchanged, not stored, and is not fetched again in the next round.
func TestReconRemembersKeysWhoseMergeChangesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	raw, err := keygen.New(31).Range(0, 40)
	if err != nil {
		t.Fatal(err)
	}
	ks := policyKeys(t, raw)
	i := slices.IndexFunc(ks, func(k *pgp.Key) bool { return len(k.Describe().UserIDs) >= 2 })
	if i < 0 {
		t.Fatal("no generated key with two user IDs")
	}
	full, smaller := ks[i], withoutLastUserID(t, ks[i])
	a := newReconNode(t, ctx, []*pgp.Key{full})
	b := newReconNode(t, ctx, []*pgp.Key{smaller})
	a.start(t, ctx, b.reconLn.Addr().String(), b.http.URL)
	// Serving a's session, b learns the difference too and would fetch the
	// full form from a, racing a's fetch of the smaller one; b's peer entry
	// for a points at a closed HTTP port, so b keeps the smaller form.
	b.start(t, ctx, a.reconLn.Addr().String(), closedURL(t))
	peer := recon.Peer{Address: b.reconLn.Addr().String(), HTTP: b.http.URL}

	res, fetched, err := a.manager.ReconcileWith(ctx, peer)
	if err != nil {
		t.Fatalf("first round: %v", err)
	}
	if len(res.Missing) != 1 || fetched.Received != 1 || fetched.Unchanged != 1 || fetched.Stored != 0 || fetched.Rejected != 0 {
		t.Fatalf("first round: missing %d, fetch %+v; want the smaller form fetched once and counted unchanged", len(res.Missing), fetched)
	}
	// Remembered in the store, for every node and past restarts: the next
	// round finds the same difference and fetches nothing.
	refused, err := a.store.RefusedDigests(ctx, [][16]byte{smaller.Digest()})
	if err != nil || !refused[smaller.Digest()] {
		t.Fatalf("the smaller form's digest is not remembered: %v %v", refused, err)
	}
	_, fetched, err = a.manager.ReconcileWith(ctx, peer)
	if err != nil {
		t.Fatalf("second round: %v", err)
	}
	if fetched.Requested != 0 || fetched.Received != 0 {
		t.Fatalf("second round fetched again: %+v", fetched)
	}
	stored, _, err := a.store.FindKeys(ctx, keys.Query{Fingerprint: full.Fingerprint()})
	if err != nil || len(stored) != 1 || stored[0].Digest != full.Digest() {
		t.Fatalf("a's key after recon: %v %v; want it unchanged", stored, err)
	}
}

// closedURL returns an HTTP URL on a loopback port that nothing listens on.
func closedURL(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}
