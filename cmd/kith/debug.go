// debug.go: the listeners beside the public one: Go's profiler
// (debug_listen) and the metrics (metrics_listen).

package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kith-keyserver/kith/cmd/internal/httpserve"
)

// listenDebug binds the debug_listen address (validated as loopback) and
// serves Go's profiler on it, apart from the public mux so that no route of
// it ever reaches the HTTP listener. Closing the returned listener stops it.
func listenDebug(addr string, log *slog.Logger) (net.Listener, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return serveBeside(addr, "debug_listen", "profiler", mux, log)
}

// listenMetrics binds the metrics_listen address and serves reg's
// metrics there, at GET /metrics and nothing else, for a Prometheus that
// scrapes a port the public cannot reach (as Hockeypuck keeps its metrics
// on a port of their own). Closing the returned listener stops it.
func listenMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (net.Listener, error) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", httpserve.Metrics(reg))
	return serveBeside(addr, "metrics_listen", "metrics", mux, log)
}

// serveBeside binds addr, the value of setting, and serves h there apart
// from the public listener; the log says what (the profiler, the
// metrics) serves there. Closing the returned listener stops it.
func serveBeside(addr, setting, what string, h http.Handler, log *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("setting %s: %w", setting, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() { _ = srv.Serve(ln) }()
	log.Info(what+" serving", setting, ln.Addr().String())
	return ln, nil
}
