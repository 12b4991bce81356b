package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kith-keyserver/kith/cmd/internal/httpserve"
	"github.com/kith-keyserver/kith/cmd/internal/tlsserve"
	"github.com/kith-keyserver/kith/hkp"
	hkpv2 "github.com/kith-keyserver/kith/hkp/v2"
	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/maillink"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/ratelimit"
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
	var tlsLn, httpLn net.Listener
	if cfg.TLS.enabled() {
		if tlsLn, err = net.Listen("tcp", cfg.TLS.Listen); err != nil {
			return fmt.Errorf("setting tls.listen: %w", err)
		}
		defer tlsLn.Close()
	}
	if cfg.TLS.HTTPListen != "" {
		if httpLn, err = net.Listen("tcp", cfg.TLS.HTTPListen); err != nil {
			return fmt.Errorf("setting tls.http_listen: %w", err)
		}
		defer httpLn.Close()
	}
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
	reg := prometheus.NewRegistry()
	if cfg.MetricsListen != "" {
		metricsLn, err := listenMetrics(cfg.MetricsListen, reg, log)
		if err != nil {
			return err
		}
		defer metricsLn.Close()
	}

	// Answer at once while the store starts (initdb and the cluster's
	// start take a while): 503 "starting" until the frontends are ready.
	// With TLS, the plain listeners send browsers to https from the start.
	gate := &httpserve.StartGate{}
	plain := http.Handler(gate)
	if cfg.TLS.enabled() {
		plain = tlsserve.Redirect(gate, cfg.httpsPort())
	}
	servers := &httpServers{log: log, served: make(chan error, 3)}
	defer servers.close() // a failed start; after a clean shutdown it does nothing
	servers.serve(ln, plain, nil)
	if httpLn != nil {
		servers.serve(httpLn, plain, nil)
	}

	policy := pgp.DefaultPolicy()
	// The whole pool opens, warmed, at start: a burst of lookups after a
	// start otherwise waits for backends to fork, log in and plan (first
	// 2,500 cold lookups from 32 clients: p99 17-24 ms, warmed 11-13 ms).
	st, err := openStore(ctx, cfg, log, postgres.Options{Policy: &policy, WarmConns: cfg.DatabaseMaxConns})
	if err != nil {
		return err
	}
	defer st.Close()

	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), st.Collector())

	// HTTPS starts once the store is open: ACME keeps its account and
	// certificates there, for every node.
	var tlsSrv *tlsserve.Server
	if tlsLn != nil {
		if tlsSrv, err = newTLSServer(cfg, st.Store, log); err != nil {
			return err
		}
	}

	ca, certPolicy, err := certificateAuthority(ctx, cfg, st.Store)
	if err != nil {
		return err
	}
	// The identity Service's blocks (an owner's deletion) go through the
	// keys Service, built below over the identity Service, so that they
	// drop this node's cached answers as any key change does.
	blocks := &keyBlocklist{}
	svc, err := newIdentityServiceWithCA(st.Store, cfg.serverName(), cfg.hostPolicy(), blocks, ca, certPolicy, cfg.SMTP.MailsPerAddressPerHour)
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
	providers, err := newProviders(ctx, cfg, st.Store, log)
	if err != nil {
		return err
	}
	apiOpts := api.Options{Service: svc, Keys: st, Watcher: st, Tree: st,
		ChallengesPerMinute: cfg.ChallengesPerMinute, Logger: log.With("component", "api")}
	if len(cfg.OIDC.Providers) > 0 {
		// Device logins approve SSH certificates (ssh-cert --device).
		apiOpts.Providers = providers
	}
	ids, err := api.NewHandler(ctx, apiOpts)
	if err != nil {
		return err
	}
	// The one upload path of OpenPGP keys, for every frontend and recon.
	ks := keys.NewService(st.Store, keys.Options{Policy: policy, Uploads: keys.UploadPolicy(cfg.HKP.Uploads),
		Identities: svc, Logger: log.With("component", "keys"), MaxConcurrentUploads: cfg.HKP.MaxConcurrentUploads})
	blocks.keys = ks
	var peers *recon.Manager
	if reconLn != nil {
		if peers, err = startRecon(ctx, cfg, st.Store, ks, reconLn, ln.Addr().String(), log, reg); err != nil {
			return err
		}
	}
	limits := cfg.newClientLimits()
	hkpOpts := hkp.Options{
		UploadLimit:      limits.uploads,
		EmailLookupLimit: limits.emailLookups,
		Version:          version,
		Logger:           log.With("component", "hkp"),
		Registerer:       reg,
		VerifiedEmails:   hkpVerifiedEmails(cfg, st.Store),
		MaxAnswerSize:    cfg.HKP.MaxAnswerBytes,
		// op=stats names this server and node, and shows each recon
		// peer's status.
		Hostname: cfg.statsHostname(),
		Nodename: cfg.nodename(),
		Contact:  cfg.Contact,
		HTTPAddr: portOnly(ln.Addr()),
	}
	if peers != nil {
		hkpOpts.ReconAddr = portOnly(reconLn.Addr())
		hkpOpts.Peers = reconPeerStats(peers)
		hkpOpts.ExtraStats = peers.Stats
	}
	hkpHandler := hkp.NewHandler(st.Store, ks, hkpOpts)
	// A write on this node drops the HKP answers it outdates before it
	// returns (other nodes' writes come through the notifications, Run).
	ks.Subscribe(hkpHandler)
	go hkpHandler.Run(ctx)

	tl, logHandler, err := newTransparencyLog(ctx, cfg, st.Store, svc, reg, log.With("component", "tlog"))
	if err != nil {
		return err
	}
	go tl.Run(ctx)

	mux := http.NewServeMux()
	hkpHandler.Register(mux)
	// HKP v2 (draft-ietf-openpgp-hkp) under /pks/v2/, beside the legacy
	// routes above, which stay as gpg knows them. The prefix log lets
	// clients refresh only keys whose prefix changed. Submissions take the
	// one upload path and its budgets; lookups by address share the email
	// budget and hkp.email_lookup's rule, and read each user ID's
	// confidence from the evidence.
	prefixLog := hkpv2.NewPrefixLog(st.Store, hkpv2.PrefixLogOptions{MinKeys: cfg.HKP.PrefixLogMinKeys,
		Registerer: reg, Logger: log.With("component", "hkpv2")})
	// sendtoken mails the verify link VKS and the pages mail, through the
	// identity service's window and per-recipient cap; PUT canonical with
	// its token is following that link.
	v2Mail, err := cfg.mailer(log.With("component", "mail"))
	if err != nil {
		return err
	}
	hkpv2.NewHandler(st.Store, st.Store, hkpv2.Options{Uploads: ks, UploadLimit: limits.uploads,
		EmailLookupLimit: limits.emailLookups, VerifiedOnly: cfg.HKP.EmailLookup == "verified",
		Corroborations: svc, MaxAnswerSize: cfg.HKP.MaxAnswerBytes, PrefixLog: prefixLog,
		Emails: svc, Mailer: &maillink.Mailer{PublicURL: cfg.publicURL(), Server: cfg.serverName(), Mail: v2Mail},
		MailRequestLimit: ratelimit.New(cfg.MailRequestsPerMinute, nil),
		Logger:           log.With("component", "hkpv2")}).Register(mux)
	ids.Register(mux)
	logHandler.Register(mux)
	if err := mountWitness(ctx, mux, cfg, st.Store, reg, log.With("component", "witness")); err != nil {
		return err
	}
	if err := mountPages(ctx, mux, cfg, st.Store, svc, ks, providers, limits, log); err != nil {
		return err
	}
	if err := mountDiscovery(ctx, mux, cfg, st.Store, svc, ks, limits, log); err != nil {
		return err
	}
	// Every limit and log line after this reads the client from
	// RemoteAddr, resolved once behind trusted_proxies.
	handler := cfg.proxies().Handler(httpserve.Handler(mux, st, errRestarting, reg, cfg.MetricsListen == "", log))
	attrs := []any{"version", version, "listen", ln.Addr().String()}
	if tlsSrv != nil {
		// ACME http-01 challenges are answered on every listener (the
		// plain ones never redirect them); the manager learns here that
		// it may use them, before the HTTPS listener serves.
		handler = tlsSrv.Challenges(handler)
		servers.serve(tlsLn, gate, tlsSrv.TLSConfig())
		attrs = append(attrs, "tls_listen", tlsLn.Addr().String())
		go tlsSrv.Prefetch(ctx, cfg.TLS.ACMENames)
	}
	gate.Open(handler)
	log.Info("kith serving", attrs...)

	select {
	case err := <-servers.served:
		return fmt.Errorf("serve: %w", err)
	case <-st.Failed():
		servers.close()
		return fmt.Errorf("serve: %w", st.cluster.Err())
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing requests in flight", "timeout", cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.ShutdownTimeout))
	defer cancel()
	servers.shutdown(sctx)
	log.Info("stopped")
	return nil
}

// httpServers are kith serve's HTTP servers, one a listener: the plain
// listener, the HTTPS one and a second plain one.
type httpServers struct {
	log    *slog.Logger
	all    []*http.Server
	served chan error // each server's end; room for every one
}

// serve serves h on ln, over TLS with conf when it is not nil.
func (s *httpServers) serve(ln net.Listener, h http.Handler, conf *tls.Config) {
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         conf,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      120 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.all = append(s.all, srv)
	go func() {
		if conf != nil {
			s.served <- srv.ServeTLS(ln, "", "")
			return
		}
		s.served <- srv.Serve(ln)
	}()
}

// shutdown lets every server finish its requests in flight until ctx ends,
// and waits for each to stop.
func (s *httpServers) shutdown(ctx context.Context) {
	var wg sync.WaitGroup
	for _, srv := range s.all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Shutdown(ctx); err != nil {
				s.log.Warn("requests still running at shutdown were cut off", "err", err)
			}
		}()
	}
	wg.Wait()
	for range s.all {
		if err := <-s.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Warn("serve", "err", err)
		}
	}
	s.all = nil
}

// close stops every server at once.
func (s *httpServers) close() {
	for _, srv := range s.all {
		srv.Close()
	}
}

// newIdentityService builds the node's one identity service over st.
func newIdentityService(st *postgres.Store, server string, hosts identity.HostPolicy) (*identity.Service, error) {
	return newIdentityServiceWithCA(st, server, hosts, st, nil, identity.CertificatePolicy{}, 0)
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
// blocks through blocks, issues SSH certificates with ca (nil: none)
// under policy, and mails one address at most mailsPerAddress links an
// hour (smtp.mails_per_address_per_hour; 0: the default).
func newIdentityServiceWithCA(st *postgres.Store, server string, hosts identity.HostPolicy, blocks identity.Blocklist,
	ca identity.CertificateAuthority, policy identity.CertificatePolicy, mailsPerAddress int) (*identity.Service, error) {
	svc, err := identity.NewService(st, &verify.Verifier{Keys: st}, identity.ServiceOptions{Server: server, Blocklist: blocks, Hosts: hosts,
		CA: ca, Certificates: policy, MailsPerAddress: mailsPerAddress})
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
