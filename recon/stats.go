// stats.go: the peers' status as HKP's op=stats shows it.

package recon

import (
	"context"
	"time"
)

// Stats returns the op=stats section of the peers' status: under
// "recon_peers", one entry per listed peer with its address, whether it
// is enabled, its session, failure, element and key counts, its last
// good round ("last_recon") and last attempt ("last_attempt") when there
// are any. Why a round failed is not in it (the error may name internal
// addresses; the manager logs it). It fits hkp.Options.ExtraStats.
func (m *Manager) Stats(ctx context.Context) map[string]any {
	peers := []map[string]any{} // [], not null, when no peer is listed
	for _, p := range m.Status() {
		peer := map[string]any{
			"address":           p.Peer.Address,
			"enabled":           !p.Peer.Disabled,
			"sessions":          p.Sessions,
			"failures":          p.Failures,
			"elements_received": p.ElementsReceived,
			"elements_sent":     p.ElementsSent,
			"keys_stored":       p.KeysStored,
			"keys_rejected":     p.KeysRejected,
		}
		if !p.LastSuccess.IsZero() {
			peer["last_recon"] = p.LastSuccess.UTC().Format(time.RFC3339)
		}
		if !p.LastRecon.IsZero() {
			peer["last_attempt"] = p.LastRecon.UTC().Format(time.RFC3339)
		}
		if !p.FailingSince.IsZero() {
			peer["failing_since"] = p.FailingSince.UTC().Format(time.RFC3339)
		}
		peers = append(peers, peer)
	}
	return map[string]any{"recon_peers": peers}
}
