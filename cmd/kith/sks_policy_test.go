package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kith-keyserver/kith/cmd/internal/settings"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/recon/skstest"
)

// hashQueryMeter counts the /pks/hashquery answers an HKP handler gives:
// requests, keys and bytes.
type hashQueryMeter struct {
	next http.Handler

	mu                     sync.Mutex
	requests, keys, nbytes int
	partial                int // answers with fewer keys than asked for
}

func (m *hashQueryMeter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/pks/hashquery" {
		m.next.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	cw := &countingWriter{ResponseWriter: w}
	m.next.ServeHTTP(cw, r)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests++
	m.nbytes += cw.n
	if len(cw.head) >= 4 {
		n := int(binary.BigEndian.Uint32(cw.head))
		m.keys += n
		if len(body) >= 4 && n < int(binary.BigEndian.Uint32(body)) {
			m.partial++
		}
	}
}

func (m *hashQueryMeter) counts() (requests, keys, nbytes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests, m.keys, m.nbytes
}

// countingWriter counts a response's bytes and keeps its first four (a
// hashquery answer's key count).
type countingWriter struct {
	http.ResponseWriter
	n    int
	head []byte
}

func (w *countingWriter) Write(p []byte) (int, error) {
	if len(w.head) < 4 {
		w.head = append(w.head, p[:min(len(p), 4-len(w.head))]...)
	}
	n, err := w.ResponseWriter.Write(p)
	w.n += n
	return n, err
}

// TestReconWithRealSKSKeysChangedByPolicy: SKS holds the debian-keyring
// keys that Kith's policy changes (certifications over the cap) as they
// are, Kith the same keys after its policy, so the two differ in each. Kith fetches
// SKS's forms once, stores nothing new, logs each once as changed by the
// policy (not as refused), counts them in
// kith_recon_keys_changed_by_policy_total and never fetches them again.
// SKS, which keeps everything, fetches Kith's forms every round and merges
// them into its own without change: that difference stays (see README,
// "Recon peers"); the test measures what it costs.
func TestReconWithRealSKSKeysChangedByPolicy(t *testing.T) {
	skstest.FindBinary(t)
	policyKeys := debianKeys(t)
	f, err := os.Open(testkit.DebianKeyring)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Only the keys the policy changes: SKS gets their raw forms, Kith
	// their forms after its policy.
	var changed []string
	var raw [][]byte
	var kithForms []*pgp.Key
	byFP := map[string]*pgp.Key{}
	for _, k := range policyKeys {
		byFP[k.Describe().FingerprintHex()] = k
	}
	r := pgp.NewReader(f)
	for {
		k, err := r.Next()
		if err != nil {
			break
		}
		fp := k.Describe().FingerprintHex()
		if pk, ok := byFP[fp]; ok && pk.Digest() != k.Digest() {
			changed = append(changed, fp)
			raw = append(raw, k.Bytes())
			kithForms = append(kithForms, pk)
		}
	}
	if len(changed) == 0 {
		t.Fatal("no debian-keyring key that Kith's policy changes: nothing to test")
	}
	t.Logf("%d of %d debian-keyring keys are changed by Kith's policy", len(changed), len(policyKeys))

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	n := newReconNode(t, ctx, kithForms)
	meter := &hashQueryMeter{next: n.http.Config.Handler}
	n.http.Config.Handler = meter
	_, kithReconPort, _ := net.SplitHostPort(n.reconLn.Addr().String())
	sks := skstest.Start(t, skstest.Options{
		Keys:           raw,
		Membership:     []string{"127.0.0.1 " + kithReconPort},
		GossipInterval: 0.05, // SKS starts a round about every 3 s
		DebugLevel:     4,
	})
	var logs testkit.SyncBuffer
	reg := prometheus.NewRegistry()
	cfg := defaultConfig()
	cfg.Recon.Interval = settings.Duration(time.Hour) // SKS starts the rounds
	cfg.Recon.Peers = []ReconPeer{{Address: sks.ReconAddr, HTTP: sks.HKPURL}}
	m, err := startRecon(ctx, cfg, n.store, n.keys, n.reconLn, n.http.Listener.Addr().String(),
		slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), reg)
	if err != nil {
		t.Fatal(err)
	}
	// Kith fetches SKS's forms of the changed keys once (checking a key
	// with hundreds of certifications takes a while; sessions meanwhile
	// leave them to that fetch).
	testkit.Eventually(t, 3*time.Minute, "Kith fetching the keys SKS holds otherwise", func() bool {
		st := m.Status()[0]
		return st.KeysStored+st.KeysUnchanged+st.KeysRejected >= len(changed)
	})
	// Then SKS fetches Kith's forms every round: measure three rounds.
	const rounds = 3
	r0, k0, b0 := meter.counts()
	if !testkit.PollEvery(3*time.Minute, time.Second, func() bool {
		requests, _, _ := meter.counts()
		return requests >= r0+rounds
	}) {
		requests, _, _ := meter.counts()
		t.Fatalf("SKS fetched from Kith %d times, want %d more\nSKS recon log:\n%s", requests, rounds, sks.Log("recon"))
	}
	r1, k1, b1 := meter.counts()
	st := m.Status()[0]
	t.Logf("after Kith's one fetch: SKS fetched %d keys, %d bytes, from Kith in %d rounds (%d keys, %d bytes a round); Kith: %d sessions, %d keys fetched",
		k1-k0, b1-b0, r1-r0, (k1-k0)/(r1-r0), (b1-b0)/(r1-r0), st.Sessions, st.KeysStored+st.KeysUnchanged+st.KeysRejected)

	out := logs.String()
	if strings.Contains(out, "refused a fetched key") {
		t.Errorf("keys the policy changed are logged as refused:\n%s", out)
	}
	var info int
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "level=INFO") && strings.Contains(line, "stored a fetched key changed by the key policy") {
			info++
		}
	}
	if info != len(changed) {
		t.Errorf("%d info lines for keys changed by the policy, want one for each of %d keys:\n%s", info, len(changed), out)
	}
	if got := counterSum(t, reg, "kith_recon_keys_changed_by_policy_total"); got != float64(len(changed)) {
		t.Errorf("kith_recon_keys_changed_by_policy_total = %v, want %d (each key once: Kith does not fetch them again)", got, len(changed))
	}
	if st.KeysStored+st.KeysUnchanged != len(changed) || st.KeysRejected != 0 {
		t.Errorf("Kith's status %+v: want %d keys stored or unchanged, none rejected", st, len(changed))
	}
}

// counterSum returns the sum of a counter's values over its labels.
func counterSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
