// Package httpserve is the HTTP plumbing kith serve puts in front of the
// frontends' routes: a gate that answers "starting" until the server is
// ready, the health check, and the request metrics.
//
// It owns what every route shares (status and latency per route, the
// answer while starting, /pks/health, /metrics); it does not own any
// route of a protocol (hkp, web, web/api) or how the server is wired
// (cmd/kith).
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// StartGate answers 503 "starting" until Open hands it the server's
// handler, so that a health check during initdb gets an answer at once.
// The zero value is a closed gate.
type StartGate struct {
	next atomic.Pointer[http.Handler]
}

// Open hands every later request to h.
func (g *StartGate) Open(h http.Handler) { g.next.Store(&h) }

// ServeHTTP serves r with the handler Open gave, or answers 503 "starting"
// with Retry-After before.
func (g *StartGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := g.next.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Retry-After", "5")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintln(w, "starting")
}

// Pinger is what the health check needs of the store.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Handler adds the health check (GET /pks/health, see Health) and, when
// publicMetrics, the metrics of reg (GET /metrics, see Metrics) to mux,
// which holds the frontends' routes, and puts it all behind Instrument.
// Without publicMetrics /metrics is left to a listener of its own
// (metrics_listen), and mux answers it as any unknown path.
func Handler(mux *http.ServeMux, st Pinger, restarting error, reg *prometheus.Registry, publicMetrics bool, log *slog.Logger) http.Handler {
	mux.Handle("GET /pks/health", Health(st, restarting, log))
	if publicMetrics {
		mux.Handle("GET /metrics", Metrics(reg))
	}
	return Instrument(mux, reg)
}

// Metrics serves reg's metrics in Prometheus' exposition format, for
// GET /metrics on the public listener or on a listener of its own.
func Metrics(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// Health answers 200 "ok" when the store answers within two seconds, 503
// otherwise: the error's text when it is restarting (the embedded
// cluster's supervisor starting its server again), "store unreachable"
// for any other failure.
func Health(st Pinger, restarting error, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := st.Ping(ctx); err != nil {
			log.Warn("health check: store unreachable", "err", err)
			w.WriteHeader(http.StatusServiceUnavailable)
			if restarting != nil && errors.Is(err, restarting) {
				fmt.Fprintln(w, err)
				return
			}
			fmt.Fprintln(w, "store unreachable")
			return
		}
		fmt.Fprintln(w, "ok")
	})
}

// Instrument counts requests (kith_http_requests_total, by route and
// status code) and measures their latency
// (kith_http_request_duration_seconds, by route) per route: the mux
// pattern that served them, "unmatched" for none. It registers the
// metrics with reg. It also sets each response's Date from the clock
// reading it takes anyway, formatted once a second (net/http formats it
// for every response: 2% of a cached lookup's CPU).
func Instrument(next http.Handler, reg prometheus.Registerer) http.Handler {
	var dates dateCache
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kith_http_requests_total",
		Help: "HTTP requests served, by route and status code.",
	}, []string{"route", "code"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kith_http_request_duration_seconds",
		Help:    "HTTP request latency by route.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"route"})
	reg.MustRegister(requests, latency)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w.Header()["Date"] = []string{dates.at(start)}
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r)
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		requests.WithLabelValues(route, strconv.Itoa(sw.code)).Inc()
		latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// dateCache holds the Date header value of the last second asked for.
type dateCache struct{ last atomic.Pointer[stampedDate] }

// stampedDate is a Date header value and the second it stands for.
type stampedDate struct {
	second int64
	value  string
}

// at returns the Date header value of t, formatting it only when t is in
// another second than the last one asked for.
func (d *dateCache) at(t time.Time) string {
	if p := d.last.Load(); p != nil && p.second == t.Unix() {
		return p.value
	}
	p := &stampedDate{second: t.Unix(), value: t.UTC().Format(http.TimeFormat)}
	d.last.Store(p)
	return p.value
}

// statusWriter remembers the status code a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	code        int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.code = code
		w.wroteHeader = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
