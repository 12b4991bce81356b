// metrics.go: the handler's Prometheus collectors. Request counts and
// latency per route belong to the server (cmd/kith); these say what HKP
// did: lookups by op and outcome, cache use, uploads by outcome.

package hkp

import "github.com/prometheus/client_golang/prometheus"

// metrics holds the collectors; a nil *metrics (no Registerer) records
// nothing.
type metrics struct {
	lookups      *prometheus.CounterVec
	cacheHits    prometheus.Counter
	cacheMisses  prometheus.Counter
	cacheEvicted prometheus.Counter
	cacheDropped prometheus.Counter
	cacheBytes   prometheus.Gauge
	cacheEntries prometheus.Gauge
	addKeys      *prometheus.CounterVec
	hashQuery    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kith_hkp_lookups_total",
			Help: "HKP lookups by op and outcome (found, not_found, truncated, too_many, bad_request, error).",
		}, []string{"op", "outcome"}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kith_hkp_cache_hits_total",
			Help: "HKP lookups answered from the answer cache.",
		}),
		cacheMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kith_hkp_cache_misses_total",
			Help: "HKP lookups that went to the store.",
		}),
		cacheEvicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kith_hkp_cache_evictions_total",
			Help: "Cached answers evicted to stay within the cache size.",
		}),
		cacheDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kith_hkp_cache_invalidations_total",
			Help: "Cached answers dropped because a key changed.",
		}),
		cacheBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kith_hkp_cache_bytes",
			Help: "Bytes held by the answer cache.",
		}),
		cacheEntries: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kith_hkp_cache_entries",
			Help: "Answers held by the answer cache.",
		}),
		addKeys: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kith_hkp_add_keys_total",
			Help: "Keys uploaded through /pks/add by outcome (inserted, updated, unchanged, rejected, error), and refused requests (bad_request; busy: too many uploads at once).",
		}, []string{"outcome"}),
		hashQuery: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kith_hkp_hashquery_keys_total",
			Help: "Keys served through /pks/hashquery.",
		}),
	}
	reg.MustRegister(m.lookups, m.cacheHits, m.cacheMisses, m.cacheEvicted, m.cacheDropped,
		m.cacheBytes, m.cacheEntries, m.addKeys, m.hashQuery)
	return m
}

func (m *metrics) lookup(op, outcome string) {
	if m != nil {
		m.lookups.WithLabelValues(op, outcome).Inc()
	}
}

func (m *metrics) hit() {
	if m != nil {
		m.cacheHits.Inc()
	}
}

func (m *metrics) miss() {
	if m != nil {
		m.cacheMisses.Inc()
	}
}

func (m *metrics) evicted(n int) {
	if m != nil && n > 0 {
		m.cacheEvicted.Add(float64(n))
	}
}

func (m *metrics) dropped(n int) {
	if m != nil && n > 0 {
		m.cacheDropped.Add(float64(n))
	}
}

func (m *metrics) size(bytes int64, entries int) {
	if m != nil {
		m.cacheBytes.Set(float64(bytes))
		m.cacheEntries.Set(float64(entries))
	}
}

func (m *metrics) added(outcome string) {
	if m != nil {
		m.addKeys.WithLabelValues(outcome).Inc()
	}
}

func (m *metrics) hashQueryKeys(n int) {
	if m != nil {
		m.hashQuery.Add(float64(n))
	}
}
