package main

import (
	"context"
	"log/slog"
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kith-keyserver/kith/cmd/internal/settings"
	"github.com/kith-keyserver/kith/hkp"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/recon/skstest"
)

// TestRealSKSFetchesPastTheAnswerCap: with hkp.max_answer_bytes at its
// least (1 MiB), Kith's /pks/hashquery answers an SKS peer that lacks all
// of 300 debian-keyring keys (about 9 MiB) with the keys that fit in each batch,
// and SKS, which stores every key a 200 answer carries and asks again for
// the rest after its next round, ends up with every key.
func TestRealSKSFetchesPastTheAnswerCap(t *testing.T) {
	skstest.FindBinary(t)
	all := debianKeys(t)[:300]
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	n := newReconNode(t, ctx, all)
	h := hkp.NewHandler(n.store, n.keys, hkp.Options{MaxAnswerSize: 1 << 20, Logger: slog.New(slog.DiscardHandler)})
	n.keys.Subscribe(h)
	go h.Run(ctx)
	meter := &hashQueryMeter{next: h}
	capped := httptest.NewServer(meter)
	t.Cleanup(capped.Close)

	_, kithReconPort, _ := net.SplitHostPort(n.reconLn.Addr().String())
	sks := skstest.Start(t, skstest.Options{
		Membership:     []string{"127.0.0.1 " + kithReconPort},
		GossipInterval: 0.05, // SKS starts a round about every 3 s
		DebugLevel:     4,
	})
	cfg := defaultConfig()
	cfg.Recon.Interval = settings.Duration(time.Hour) // SKS starts the rounds
	cfg.Recon.Peers = []ReconPeer{{Address: sks.ReconAddr, HTTP: sks.HKPURL}}
	// SKS fetches from the HTTP port Kith announces: the capped one.
	if _, err := startRecon(ctx, cfg, n.store, n.keys, n.reconLn, capped.Listener.Addr().String(),
		slog.New(slog.DiscardHandler), prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	if !testkit.PollEvery(5*time.Minute, 2*time.Second, func() bool {
		_, keys, _ := meter.counts()
		return keys >= len(all)
	}) {
		requests, keys, _ := meter.counts()
		// If SKS holds keys the meter did not count, Kith failed answers
		// that SKS had read whole; if it lacks them, SKS stopped asking.
		t.Fatalf("Kith completed answers of %d of %d keys in %d requests; SKS lacks %d\nSKS recon log:\n%s",
			keys, len(all), requests, len(missingFrom(sks.HKPURL, all)), sks.Log("recon"))
	}
	var lacks int
	if !testkit.PollEvery(time.Minute, 2*time.Second, func() bool {
		lacks = len(missingFrom(sks.HKPURL, all))
		return lacks == 0
	}) {
		t.Fatalf("SKS lacks %d of %d keys after fetching them all", lacks, len(all))
	}
	meter.mu.Lock()
	defer meter.mu.Unlock()
	t.Logf("SKS fetched %d keys (%d bytes) in %d hashquery requests, %d of them answered in part (1 MiB cap)",
		meter.keys, meter.nbytes, meter.requests, meter.partial)
	if meter.partial == 0 {
		t.Errorf("no answer was cut at the 1 MiB cap: the test does not test it")
	}
}
