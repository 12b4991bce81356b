package recon

import (
	"context"
	"encoding/json"
	"testing"

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
}
