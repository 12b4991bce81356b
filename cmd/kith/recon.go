// recon.go: wiring this node's recon (recon/node) from the configuration.

package main

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kith-keyserver/kith/hkp"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/recon"
	"github.com/kith-keyserver/kith/recon/node"
)

// startRecon runs the recon node over st on ln with cfg's peers and
// interval, telling peers to fetch from the HKP at httpAddr; fetched keys
// go through uploads.
func startRecon(ctx context.Context, cfg Config, st node.Store, uploads keys.Uploader,
	ln net.Listener, httpAddr string, log *slog.Logger, reg prometheus.Registerer) (*recon.Manager, error) {
	_, portStr, _ := net.SplitHostPort(httpAddr)
	httpPort, _ := strconv.Atoi(portStr)
	peers := make([]recon.Peer, len(cfg.Recon.Peers))
	for i, p := range cfg.Recon.Peers {
		peers[i] = recon.Peer{Address: p.Address, HTTP: p.HTTP, Filters: p.Filters, Disabled: p.Enabled != nil && !*p.Enabled}
	}
	return node.Start(ctx, node.Config{Interval: time.Duration(cfg.Recon.Interval), HTTPPort: httpPort, Peers: peers},
		st, uploads, ln, log.With("component", "recon"), reg)
}

// reconPeerStats lists m's peers as op=stats shows them.
func reconPeerStats(m *recon.Manager) func(context.Context) []hkp.PeerStatus {
	return func(context.Context) []hkp.PeerStatus {
		var out []hkp.PeerStatus
		for _, p := range m.Status() {
			out = append(out, hkp.PeerStatus{
				Address:          p.Peer.Address,
				HTTP:             p.HTTP,
				Enabled:          !p.Peer.Disabled,
				LastGood:         p.LastSuccess,
				LastIncoming:     p.LastIncoming,
				LastOutgoing:     p.LastOutgoing,
				LastAttempt:      p.LastRecon,
				FailingSince:     p.FailingSince,
				KeysReceived:     p.KeysStored,
				ElementsReceived: p.ElementsReceived,
				ElementsSent:     p.ElementsSent,
			})
		}
		return out
	}
}

// portOnly is addr as ":PORT", as op=stats announces this server's
// listeners (the address it binds stays private).
func portOnly(addr net.Addr) string {
	_, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return ""
	}
	return ":" + port
}
