package recon

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestInteropWithRunningSKS reconciles with a real SKS 1.1.6 in both roles.
// It runs only when an SKS is running on loopback and named by
//
//	KITH_SKS_RECON   SKS's recon address, e.g. 127.0.0.1:21370
//	KITH_SKS_HKP     SKS's HKP base URL, e.g. http://127.0.0.1:21371
//	KITH_SKS_LISTEN  the address SKS's membership file lists for Kith,
//	                 e.g. 127.0.0.1:21380 (Kith's HTTP port is this port + 1)
//
// (SKS also needs DIR/var/spool/sks to exist, or it drops what it found.)
// It will move onto recon/skstest once that starts an SKS by itself.
func TestInteropWithRunningSKS(t *testing.T) {
	reconAddr, hkp, listen := os.Getenv("KITH_SKS_RECON"), os.Getenv("KITH_SKS_HKP"), os.Getenv("KITH_SKS_LISTEN")
	if reconAddr == "" || hkp == "" || listen == "" {
		t.Skip("set KITH_SKS_RECON, KITH_SKS_HKP and KITH_SKS_LISTEN to run against a real SKS")
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	httpAddr := net.JoinHostPort(host, strconv.Itoa(p+1))
	ctx := context.Background()

	// A hashquery endpoint recording what SKS asks Kith for.
	var mu sync.Mutex
	asked := make(chan [][16]byte, 8)
	hl, err := net.Listen("tcp", httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer hl.Close()
	go http.Serve(hl, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ds, _ := ParseHashQueryRequest(body, 1000)
		mu.Lock()
		asked <- ds
		mu.Unlock()
		WriteHashQueryResponse(w, nil)
	}))
	awaitAsked := func(want [][16]byte) {
		t.Helper()
		var got [][16]byte
		deadline := time.After(60 * time.Second)
		for !sameDigests(got, want) {
			select {
			case ds := <-asked:
				got = append(got, ds...)
			case <-deadline:
				t.Fatalf("SKS asked Kith for %d digests, want %d", len(got), len(want))
			}
		}
	}
	sks := Peer{Address: reconAddr, HTTP: hkp}
	cfg := SessionConfig{HTTPPort: p + 1}
	answer := func(tr *Tree) Result {
		t.Helper()
		c, err := net.Dial("tcp", reconAddr)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Answer(ctx, c, tr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	// An empty Kith learns every digest SKS holds, and SKS serves them all.
	all := answer(NewTree()).Missing
	if len(all) == 0 {
		t.Fatal("SKS reported no digests")
	}
	fr, err := NewHashQueryFetcher(func(context.Context, []byte) error { return nil }, nil).Fetch(ctx, sks, all)
	if err != nil || fr.Stored != len(all) {
		t.Fatalf("hashquery from SKS: %+v, %v; want %d keys", fr, err, len(all))
	}

	// Kith initiates: it lacks 5, SKS lacks 7.
	r := rand.New(rand.NewPCG(1, 1))
	extra := randDigests(r, 7)
	res := answer(BuildTree(append(slices.Clone(all[5:]), extra...)))
	if !sameDigests(res.Missing, all[:5]) {
		t.Fatalf("Kith found %d missing, want the 5 it lacks", len(res.Missing))
	}
	awaitAsked(extra)

	// SKS initiates (its gossip): Kith drives; it lacks 8, SKS lacks 3.
	extra = randDigests(r, 3)
	rf := newRecordingFetcher()
	m, err := NewManager(ManagerConfig{HTTPPort: p + 1, Peers: []Peer{sks}}, BuildTree(append(slices.Clone(all[8:]), extra...)), rf, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go m.Serve(sctx, ln)
	call := rf.wait(t)
	if !sameDigests(call.missing, all[:8]) {
		t.Fatalf("Kith found %d missing when SKS initiated, want 8", len(call.missing))
	}
	awaitAsked(extra)
}
