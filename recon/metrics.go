// Prometheus metrics for recon, registered on a caller's Registerer.

package recon

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics holds the Manager's collectors; a nil *metrics records nothing.
type metrics struct {
	sessions *prometheus.CounterVec
	duration *prometheus.HistogramVec
	missing  *prometheus.CounterVec
	sent     *prometheus.CounterVec
	keys     *prometheus.CounterVec
	changed  *prometheus.CounterVec
	refusals *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, tree *Tree) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		sessions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kith_recon_sessions_total", Help: "Recon sessions by peer, role and result.",
		}, []string{"peer", "role", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kith_recon_session_seconds", Help: "Recon session duration.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
		}, []string{"role"}),
		missing: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kith_recon_elements_received_total", Help: "Digests recon found missing locally, by peer.",
		}, []string{"peer"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kith_recon_elements_sent_total", Help: "Digests recon told a peer it lacks.",
		}, []string{"peer"}),
		keys: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kith_recon_fetched_keys_total", Help: "Keys fetched from peers, by result.",
		}, []string{"peer", "result"}),
		changed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kith_recon_keys_changed_by_policy_total",
			Help: "Keys fetched from peers that the key policy changed from the peer's form (stored or unchanged): their digests differ between the two sides for good.",
		}, []string{"peer"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kith_recon_refused_connections_total", Help: "Recon connections closed unserved, by reason.",
		}, []string{"reason"}),
	}
	size := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kith_recon_tree_digests", Help: "Digests in the recon prefix tree.",
	}, func() float64 { return float64(tree.Len()) })
	for _, c := range []prometheus.Collector{m.sessions, m.duration, m.missing, m.sent, m.keys, m.changed, m.refusals, size} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("recon: registering metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) session(peer, role string, err error, took time.Duration, missing, sent int) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.sessions.WithLabelValues(peer, role, result).Inc()
	m.duration.WithLabelValues(role).Observe(took.Seconds())
	m.missing.WithLabelValues(peer).Add(float64(missing))
	m.sent.WithLabelValues(peer).Add(float64(sent))
}

func (m *metrics) fetched(peer string, fr FetchResult) {
	if m == nil {
		return
	}
	m.keys.WithLabelValues(peer, "stored").Add(float64(fr.Stored))
	m.keys.WithLabelValues(peer, "rejected").Add(float64(fr.Rejected))
	m.keys.WithLabelValues(peer, "unchanged").Add(float64(fr.Unchanged))
	m.changed.WithLabelValues(peer).Add(float64(fr.Changed))
}

func (m *metrics) refused(reason string) {
	if m == nil {
		return
	}
	m.refusals.WithLabelValues(reason).Inc()
}
