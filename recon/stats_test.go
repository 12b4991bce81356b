package recon

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestStatsListsEveryPeerInOrder: op=stats shows each listed peer, in
// list order, enabled or not, with its counts; a peer that never
// reconciled has no last_recon and no last_error.
func TestStatsListsEveryPeerInOrder(t *testing.T) {
	peers := []Peer{{Address: "127.0.0.2:11370"}, {Address: "127.0.0.3:11370", Disabled: true}}
	m, err := NewManager(ManagerConfig{Peers: peers}, NewTree(), newRecordingFetcher(), nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(m.Stats(context.Background()))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"recon_peers":[` +
		`{"address":"127.0.0.2:11370","elements_received":0,"elements_sent":0,"enabled":true,"failures":0,"keys_rejected":0,"keys_stored":0,"sessions":0},` +
		`{"address":"127.0.0.3:11370","elements_received":0,"elements_sent":0,"enabled":false,"failures":0,"keys_rejected":0,"keys_stored":0,"sessions":0}]}`
	if string(b) != want {
		t.Errorf("stats:\n got %s\nwant %s", b, want)
	}

	// With no peer listed the section is an empty list, not null.
	m, err = NewManager(ManagerConfig{}, NewTree(), newRecordingFetcher(), nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if b, err := json.Marshal(m.Stats(context.Background())); err != nil || string(b) != `{"recon_peers":[]}` {
		t.Errorf("stats without peers: %s %v", b, err)
	}
}

// TestStatsLastReconIsTheLastGoodRound: a round whose fetch fails is an
// attempt, not a recon: op=stats shows when it was tried and since when
// the peer has been failing, never why (the error is for the logs); the
// next good round becomes last_recon and clears the failure.
func TestStatsLastReconIsTheLastGoodRound(t *testing.T) {
	d, a, _, _ := splitSets(81, 300, 4, 4)
	lnB := listen(t)
	mB, err := NewManager(ManagerConfig{HTTPPort: 11381, Peers: []Peer{{Address: "127.0.0.1:1"}}}, BuildTree(d), newRecordingFetcher(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	peerB := Peer{Address: lnB.Addr().String()}
	mA, err := NewManager(ManagerConfig{Peers: []Peer{peerB}}, BuildTree(a),
		&flakyFetcher{fails: 1, next: newRecordingFetcher()}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go mB.Serve(ctx, lnB)

	peerStats := func() map[string]any {
		t.Helper()
		b, err := json.Marshal(mA.Stats(ctx))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "store unavailable") || strings.Contains(string(b), "last_error") {
			t.Errorf("op=stats shows the raw error: %s", b)
		}
		var s struct {
			Peers []map[string]any `json:"recon_peers"`
		}
		if err := json.Unmarshal(b, &s); err != nil || len(s.Peers) != 1 {
			t.Fatalf("stats %s: %v", b, err)
		}
		return s.Peers[0]
	}

	if _, _, err := mA.ReconcileWith(ctx, peerB); err == nil {
		t.Fatal("a round whose fetch failed succeeded")
	}
	st := mA.Status()[0]
	if !st.LastSuccess.IsZero() || st.FailingSince.IsZero() || st.LastRecon.IsZero() || st.HTTP != "http://127.0.0.1:11381" {
		t.Errorf("after a failed fetch: %+v", st)
	}
	p := peerStats()
	if p["last_recon"] != nil || p["last_attempt"] == nil || p["failing_since"] == nil {
		t.Errorf("after a failed fetch: %v", p)
	}

	if _, _, err := mA.ReconcileWith(ctx, peerB); err != nil {
		t.Fatal(err)
	}
	st = mA.Status()[0]
	if st.LastSuccess.IsZero() || !st.FailingSince.IsZero() || st.LastOutgoing != st.LastSuccess || !st.LastIncoming.IsZero() {
		t.Errorf("after a good round: %+v", st)
	}
	p = peerStats()
	if p["last_recon"] != st.LastSuccess.UTC().Format(time.RFC3339) || p["failing_since"] != nil {
		t.Errorf("after a good round: %v", p)
	}
}
