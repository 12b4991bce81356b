package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kith-keyserver/kith/hkp"
	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/recon"
	"github.com/kith-keyserver/kith/web/api"
)

func runServe(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "serve", "serve [flags]")
	cfg, rest, err := loadConfig(fs, args, env.environ)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("%w: serve takes no arguments, got %q", errUsage, rest)
	}
	log := newLogger(env.stderr, cfg)

	// Bind first: a busy or bad address fails before any cluster starts.
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("setting listen: %w", err)
	}
	defer ln.Close()
	var reconLn net.Listener
	if cfg.Recon.Listen != "off" {
		if reconLn, err = net.Listen("tcp", cfg.Recon.Listen); err != nil {
			return fmt.Errorf("setting recon.listen: %w", err)
		}
		defer reconLn.Close()
	}
	if cfg.DebugListen != "" {
		debugLn, err := listenDebug(cfg.DebugListen, log)
		if err != nil {
			return err
		}
		defer debugLn.Close()
	}

	// Answer at once while the store starts (initdb and the cluster's
	// start take a while): 503 "starting" until the frontends are ready.
	gate := &startGate{}
	srv := &http.Server{
		Handler:           gate,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      120 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer srv.Close() // a failed start; after a clean shutdown it does nothing

	policy := pgp.DefaultPolicy()
	// The whole pool opens, warmed, at start: a burst of lookups after a
	// start otherwise waits for backends to fork, log in and plan (first
	// 2,500 cold lookups from 32 clients: p99 17-24 ms, warmed 11-13 ms).
	st, err := openStore(ctx, cfg, log, postgres.Options{Policy: &policy, WarmConns: cfg.DatabaseMaxConns})
	if err != nil {
		return err
	}
	defer st.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), st.Collector())

	ca, certPolicy, err := certificateAuthority(ctx, cfg, st.Store)
	if err != nil {
		return err
	}
	// The identity Service's blocks (an owner's deletion) go through the
	// keys Service, built below over the identity Service, so that they
	// drop this node's cached answers as any key change does.
	blocks := &keyBlocklist{}
	svc, err := newIdentityServiceWithCA(st.Store, cfg.serverName(), cfg.hostPolicy(), blocks, ca, certPolicy)
	if err != nil {
		return err
	}
	// Catch up on key changes whose link refresh never ran (a crash
	// between a key write and its sync): every linked key, once, beside
	// serving.
	go func() {
		if n, err := svc.SyncLinkedKeys(ctx); err != nil {
			if ctx.Err() == nil {
				log.Warn("sync the identity links of linked keys", "err", err)
			}
		} else {
			log.Debug("identity links of linked keys synced", "keys", n)
		}
	}()
	ids, err := api.NewHandler(ctx, api.Options{Service: svc, Keys: st, Watcher: st,
		ChallengesPerMinute: cfg.ChallengesPerMinute, Logger: log.With("component", "api")})
	if err != nil {
		return err
	}
	// The one upload path of OpenPGP keys, for every frontend and recon.
	ks := keys.NewService(st.Store, keys.Options{Policy: policy, Uploads: keys.UploadPolicy(cfg.HKP.Uploads),
		Identities: svc, Logger: log.With("component", "keys")})
	blocks.keys = ks
	var peers *recon.Manager
	if reconLn != nil {
		if peers, err = startRecon(ctx, cfg, st.Store, ks, reconLn, ln.Addr().String(), log, reg); err != nil {
			return err
		}
	}
	hkpHandler := hkp.NewHandler(st.Store, ks, hkp.Options{
		Version:        version,
		Logger:         log.With("component", "hkp"),
		Registerer:     reg,
		ExtraStats:     reconStats(peers),
		VerifiedEmails: hkpVerifiedEmails(cfg, st.Store),
		MaxAnswerSize:  cfg.HKP.MaxAnswerBytes,
	})
	// A write on this node drops the HKP answers it outdates before it
	// returns (other nodes' writes come through the notifications, Run).
	ks.Subscribe(hkpHandler)
	go hkpHandler.Run(ctx)

	tl, logHandler, err := newTransparencyLog(ctx, cfg, st.Store, svc, log.With("component", "tlog"))
	if err != nil {
		return err
	}
	go tl.Run(ctx)

	mux := http.NewServeMux()
	hkpHandler.Register(mux)
	ids.Register(mux)
	logHandler.Register(mux)
	if err := mountPages(ctx, mux, cfg, st.Store, svc, ks, log); err != nil {
		return err
	}
	if err := mountDiscovery(ctx, mux, cfg, st.Store, svc, ks, log); err != nil {
		return err
	}
	gate.open(newServerHandler(mux, st, reg, log))
	log.Info("kith serving", "version", version, "listen", ln.Addr().String())

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-st.Failed():
		srv.Close()
		return fmt.Errorf("serve: %w", st.cluster.Err())
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing requests in flight", "timeout", cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.ShutdownTimeout))
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("requests still running at shutdown were cut off", "err", err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("serve", "err", err)
	}
	log.Info("stopped")
	return nil
}

// newIdentityService builds the node's one identity service over st.
func newIdentityService(st *postgres.Store, server string, hosts identity.HostPolicy) (*identity.Service, error) {
	return newIdentityServiceWithCA(st, server, hosts, st, nil, identity.CertificatePolicy{})
}

// newToolKeyService builds the write path of OpenPGP keys over st for a
// command the operator runs (load, repair, block): its writes refresh the
// links the changed keys carry through the identity service, as serve's
// do; no cache of this process needs telling.
func newToolKeyService(st *postgres.Store, cfg Config, policy pgp.Policy, log *slog.Logger) (*keys.Service, error) {
	ids, err := newIdentityService(st, cfg.serverName(), cfg.hostPolicy())
	if err != nil {
		return nil, err
	}
	return keys.NewService(st, keys.Options{Policy: policy, Identities: ids, Logger: log}), nil
}

// newIdentityServiceWithCA is newIdentityService whose Service adds
// blocks through blocks and issues SSH certificates with ca (nil: none)
// under policy.
func newIdentityServiceWithCA(st *postgres.Store, server string, hosts identity.HostPolicy, blocks identity.Blocklist,
	ca identity.CertificateAuthority, policy identity.CertificatePolicy) (*identity.Service, error) {
	svc, err := identity.NewService(st, &verify.Verifier{Keys: st}, identity.ServiceOptions{Server: server, Blocklist: blocks, Hosts: hosts,
		CA: ca, Certificates: policy})
	if err != nil {
		return nil, err
	}
	return svc, nil
}

// keyBlocklist is the identity Service's blocklist in kith serve: the
// keys Service, which is built after the identity Service it refreshes
// links through and set here before serving starts.
type keyBlocklist struct{ keys *keys.Service }

// AddBlock implements identity.Blocklist.
func (b *keyBlocklist) AddBlock(ctx context.Context, blk identity.Block) (identity.BlockOutcome, error) {
	return b.keys.AddBlock(ctx, blk)
}

// startGate answers 503 "starting" until open hands it the server's
// handler, so that a health check during initdb gets an answer at once.
type startGate struct {
	next atomic.Pointer[http.Handler]
}

func (g *startGate) open(h http.Handler) { g.next.Store(&h) }

func (g *startGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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

// pinger is what the health check needs of the store.
type pinger interface {
	Ping(ctx context.Context) error
}

// newServerHandler adds the health check and metrics to mux, which holds
// the frontends' routes, and puts it all behind the metrics middleware.
func newServerHandler(mux *http.ServeMux, st pinger, reg *prometheus.Registry, log *slog.Logger) http.Handler {
	mux.Handle("GET /pks/health", healthHandler(st, log))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return instrument(mux, reg)
}

// healthHandler answers 200 when the store answers within two seconds, 503
// otherwise: "database restarting" while the embedded cluster's supervisor
// starts its server again, "store unreachable" for any other failure.
func healthHandler(st pinger, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := st.Ping(ctx); err != nil {
			log.Warn("health check: store unreachable", "err", err)
			w.WriteHeader(http.StatusServiceUnavailable)
			if errors.Is(err, errRestarting) {
				fmt.Fprintln(w, err)
				return
			}
			fmt.Fprintln(w, "store unreachable")
			return
		}
		fmt.Fprintln(w, "ok")
	})
}

// instrument counts requests and measures their latency per route (the
// mux pattern that served them).
func instrument(next http.Handler, reg prometheus.Registerer) http.Handler {
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

// reconStats shows each recon peer's status in op=stats.
func reconStats(m *recon.Manager) func(ctx context.Context) map[string]any {
	if m == nil {
		return nil
	}
	return func(ctx context.Context) map[string]any {
		var peers []map[string]any
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
			if !p.LastRecon.IsZero() {
				peer["last_recon"] = p.LastRecon.UTC().Format(time.RFC3339)
			}
			if p.LastError != "" {
				peer["last_error"] = p.LastError
			}
			peers = append(peers, peer)
		}
		return map[string]any{"recon_peers": peers}
	}
}
