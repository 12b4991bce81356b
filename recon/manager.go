// The peer manager: the recon listener, the membership list and the gossip
// loop that reconciles with a random peer every interval, then hands what
// was found missing to a Fetcher.

package recon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kith-keyserver/kith/identity/retry"
)

// Peer is one membership entry: a keyserver Kith reconciles with.
type Peer struct {
	// Address is the peer's recon host:port.
	Address string
	// HTTP is the peer's HKP base URL, for /pks/hashquery. Empty means
	// http://HOST:PORT with the peer's host and the HTTP port it announces.
	HTTP string
	// Filters is announced to the peer verbatim and must equal, as a set,
	// what the peer announces. Empty means DefaultFilters. Use the peer's
	// own string for Hockeypuck, which compares exact sorted strings.
	Filters string
	// Disabled keeps the entry (connections from it are still accepted)
	// but the gossip loop never picks it.
	Disabled bool
}

func (p Peer) filters() string {
	if p.Filters == "" {
		return DefaultFilters
	}
	return p.Filters
}

// ManagerConfig configures a Manager. Zero fields take the defaults.
type ManagerConfig struct {
	// Listen is the recon listen address. Default 127.0.0.1:11370.
	Listen string
	// Interval is the mean time between gossip rounds; each wait is drawn
	// from ±25% around it. After a failed round the wait backs off from
	// GossipRetryMin (or Interval, if shorter), doubling up to Interval,
	// each wait lengthened by up to half of itself at random. Default 60 s.
	Interval time.Duration
	// HTTPPort is the local HKP port, announced to peers for hashquery.
	HTTPPort int
	// Peers is the membership list.
	Peers []Peer
	// DialTimeout bounds connecting to a peer. Default 30 s.
	DialTimeout time.Duration
	// ReadTimeout bounds each read and write. Default 300 s.
	ReadTimeout time.Duration
	// SessionTimeout bounds a whole recon. Default 3600 s.
	SessionTimeout time.Duration
	// MaxIncoming bounds concurrent incoming sessions. Default 4.
	MaxIncoming int
}

// DefaultListen is the default recon listen address: loopback only.
const DefaultListen = "127.0.0.1:11370"

// DefaultInterval is the default mean time between gossip rounds.
const DefaultInterval = 60 * time.Second

// GossipRetryMin is the first wait after a failed gossip round: long
// enough that a peer that is down (or restarting) is not dialled again at
// once, short enough that a passing fault costs one round only.
const GossipRetryMin = 5 * time.Second

// gossipRetryJitter lengthens each retry wait by up to half of itself.
const gossipRetryJitter = 0.5

// Refused connections are logged at most once per refusalLogEvery for
// each remote address, for up to refusalLogAddrs addresses at a time.
const (
	refusalLogEvery = time.Minute
	refusalLogAddrs = 4096
)

// PeerStatus is a snapshot of one peer's recon history. A round is a
// session and the fetch of what it found missing; it is good when both
// succeeded. LastError may name internal addresses: it is for the logs,
// never for strangers.
type PeerStatus struct {
	Peer             Peer
	LastRecon        time.Time     // when the last session ended
	LastSuccess      time.Time     // when a round last ended good, in either role
	LastDuration     time.Duration // how long the last session took
	Sessions         int           // sessions in either role
	Failures         int           // failed sessions and fetches
	LastError        string        // why the last failure failed
	ElementsReceived int           // digests found missing here, from this peer
	ElementsSent     int           // digests this side told the peer it lacks
	KeysStored       int           // fetched keys the store accepted
	KeysUnchanged    int           // fetched keys whose merge changed nothing
	KeysRejected     int           // fetched keys the store rejected

	// HTTP is the peer's HKP base URL: Peer.HTTP, or the one built from
	// the port its last good session announced (empty until then).
	HTTP         string
	LastIncoming time.Time // when a round the peer started last ended good
	LastOutgoing time.Time // when a round this side started last ended good
	FailingSince time.Time // when the rounds began failing; zero after a good one

	// gossipFailed counts the gossip rounds this side started with the
	// peer that failed in a row, for the level of their log lines. Unlike
	// FailingSince, a good round the peer started does not reset it.
	gossipFailed int
}

// Manager runs recon with a set of peers: it accepts their connections
// (driving those sessions), gossips with a random one every interval
// (answering), and fetches what each session found missing. It is safe for
// concurrent use.
type Manager struct {
	cfg     ManagerConfig
	tree    *Tree
	fetcher Fetcher
	log     *slog.Logger
	metrics *metrics
	sem     chan struct{}

	// refusals limits the log lines about refused connections.
	refusals *logLimiter
	// dial connects to a peer and wait sleeps between gossip rounds;
	// tests replace them.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	wait func(ctx context.Context, d time.Duration) bool

	mu     sync.Mutex
	peers  []Peer
	status map[string]*PeerStatus
}

// NewManager returns a Manager for tree. Fetched keys go to fetcher; logs
// to logger (nil discards); metrics are registered on reg (nil skips them).
func NewManager(cfg ManagerConfig, tree *Tree, fetcher Fetcher, logger *slog.Logger, reg prometheus.Registerer) (*Manager, error) {
	if tree == nil || fetcher == nil {
		return nil, errors.New("recon: NewManager needs a tree and a fetcher")
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.MaxIncoming <= 0 {
		cfg.MaxIncoming = 4
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	d := &net.Dialer{Timeout: cfg.DialTimeout}
	m := &Manager{cfg: cfg, tree: tree, fetcher: fetcher, log: logger,
		sem:      make(chan struct{}, cfg.MaxIncoming),
		refusals: newLogLimiter(refusalLogEvery, refusalLogAddrs, time.Now),
		dial:     d.DialContext, wait: retry.Wait,
		status: make(map[string]*PeerStatus)}
	if err := m.SetPeers(cfg.Peers); err != nil {
		return nil, err
	}
	var err error
	if m.metrics, err = newMetrics(reg, tree); err != nil {
		return nil, err
	}
	return m, nil
}

// SetPeers replaces the membership list.
func (m *Manager) SetPeers(peers []Peer) error {
	for _, p := range peers {
		if _, _, err := net.SplitHostPort(p.Address); err != nil {
			return fmt.Errorf("recon: peer address %q: %w", p.Address, err)
		}
		if p.HTTP != "" {
			if u, err := url.Parse(p.HTTP); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
				return fmt.Errorf("recon: peer %s: HTTP base URL %q is not an http(s) URL", p.Address, p.HTTP)
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.peers = append([]Peer(nil), peers...)
	for _, p := range peers {
		if st, ok := m.status[p.Address]; ok {
			st.Peer = p
			if p.HTTP != "" {
				st.HTTP = p.HTTP
			}
		} else {
			m.status[p.Address] = &PeerStatus{Peer: p, HTTP: p.HTTP}
		}
	}
	return nil
}

// Status returns a snapshot of every listed peer's status, in list order.
func (m *Manager) Status() []PeerStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]PeerStatus, 0, len(m.peers))
	for _, p := range m.peers {
		out = append(out, *m.status[p.Address])
	}
	return out
}

// Run listens on the configured address, accepts peers' sessions and
// gossips until ctx is done.
func (m *Manager) Run(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", m.cfg.Listen)
	if err != nil {
		return fmt.Errorf("recon: listening on %s: %w", m.cfg.Listen, err)
	}
	errc := make(chan error, 1)
	go func() { errc <- m.Serve(ctx, ln) }()
	m.Gossip(ctx)
	return <-errc
}

// Serve accepts recon connections on ln until ctx is done, closing ln. Only
// listed peers' IPs are served; others are closed with a logged reason.
func (m *Manager) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer ln.Close()
	m.log.Info("recon: listening", "addr", ln.Addr().String())
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			return fmt.Errorf("recon: accepting: %w", err)
		}
		select {
		case m.sem <- struct{}{}:
		default:
			m.refused(c, "busy", "recon: refused connection: too many sessions")
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-m.sem }()
			m.serveConn(ctx, c)
		}()
	}
}

// peersAt returns the listed peers whose host resolves to ip.
func (m *Manager) peersAt(ctx context.Context, ip net.IP) []Peer {
	m.mu.Lock()
	peers := append([]Peer(nil), m.peers...)
	m.mu.Unlock()
	var out []Peer
	for _, p := range peers {
		host, _, _ := net.SplitHostPort(p.Address)
		if pip := net.ParseIP(host); pip != nil {
			if pip.Equal(ip) {
				out = append(out, p)
			}
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		addrs, err := net.DefaultResolver.LookupIPAddr(rctx, host)
		cancel()
		if err != nil {
			m.log.Debug("recon: resolving peer", "peer", p.Address, "err", err)
			continue
		}
		for _, a := range addrs {
			if a.IP.Equal(ip) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

func (m *Manager) serveConn(ctx context.Context, c net.Conn) {
	remote := c.RemoteAddr().String()
	host, _, _ := net.SplitHostPort(remote)
	cands := m.peersAt(ctx, net.ParseIP(host))
	if len(cands) == 0 {
		m.refused(c, "unlisted", "recon: refused connection: not a listed peer")
		return
	}
	peer := cands[0]
	cfg := m.sessionConfig(peer)
	if !sameFilters(cands) {
		// Several entries share this IP: pick by what the peer announces.
		cfg.SelectFilters = func(rc *Config) (string, error) {
			for _, p := range cands {
				if FiltersEqual(rc.Filters, p.filters()) && announcedPort(p, rc.HTTPPort) {
					peer = p
					return p.filters(), nil
				}
			}
			for _, p := range cands {
				if FiltersEqual(rc.Filters, p.filters()) {
					peer = p
					return p.filters(), nil
				}
			}
			return "", fmt.Errorf("filters do not match: %q", rc.Filters)
		}
	}
	start := time.Now()
	res, err := Drive(ctx, c, m.tree, cfg)
	if _, err := m.finishSession(ctx, peer, "drive", host, start, res, err); err != nil {
		m.log.Warn("recon: session failed", "peer", peer.Address, "role", "drive", "err", err)
	}
}

// refused counts and closes a connection served nothing, and logs it
// unless a line for the same remote IP and reason was logged in the last
// minute: anyone can connect, and each connection must not buy a line.
func (m *Manager) refused(c net.Conn, reason, msg string) {
	remote := c.RemoteAddr().String()
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	m.metrics.refused(reason)
	if ok, suppressed := m.refusals.allow(reason + " " + host); ok {
		m.log.Warn(msg, "remote", remote, "suppressed_since_last", suppressed)
	}
	c.Close()
}

func sameFilters(ps []Peer) bool {
	for _, p := range ps[1:] {
		if !FiltersEqual(p.filters(), ps[0].filters()) {
			return false
		}
	}
	return true
}

// announcedPort reports whether p's HTTP URL uses the announced port.
func announcedPort(p Peer, port int) bool {
	u, err := url.Parse(p.HTTP)
	return err == nil && u.Port() == strconv.Itoa(port)
}

func (m *Manager) sessionConfig(p Peer) SessionConfig {
	return SessionConfig{
		HTTPPort:    m.cfg.HTTPPort,
		Filters:     p.filters(),
		ReadTimeout: m.cfg.ReadTimeout,
		Timeout:     m.cfg.SessionTimeout,
		Logger:      m.log,
	}
}

// Gossip reconciles with a random enabled peer every interval (±25%)
// until ctx is done. After a failed round (peer unreachable, session
// error, fetch or store failure) the next one comes sooner: after
// GossipRetryMin, then twice that and so on up to the interval, each
// wait jittered (see retry.Backoff); a good round resets the backoff.
// A peer's first failed round is logged as a warning with the wait
// before the next round; while its rounds keep failing they are logged
// at debug level, and its first good round after them at info level, so
// a dead peer costs one warning, not one per retry. Failures are also
// counted in Status.
func (m *Manager) Gossip(ctx context.Context) {
	m.gossip(ctx, m.jittered())
}

// gossip is Gossip with the first round after first.
func (m *Manager) gossip(ctx context.Context, first time.Duration) {
	b := retry.Backoff{Min: min(GossipRetryMin, m.cfg.Interval), Max: m.cfg.Interval, Jitter: gossipRetryJitter}
	for wait := first; m.wait(ctx, wait); {
		wait = m.jittered()
		p, ok := m.pickPeer()
		if !ok {
			continue
		}
		_, _, err := m.reconcile(ctx, p)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			wait = b.Next()
			m.roundFailed(p, err, wait)
			continue
		}
		b.Reset()
		m.roundSucceeded(p)
	}
}

// roundFailed logs a failed gossip round with p: a warning the first time
// in a row, debug lines after it.
func (m *Manager) roundFailed(p Peer, err error, wait time.Duration) {
	m.mu.Lock()
	st := m.statusOf(p)
	st.gossipFailed++
	n := st.gossipFailed
	m.mu.Unlock()
	if n == 1 {
		m.log.Warn("recon: gossip round failed", "peer", p.Address, "err", err, "retry_in", wait)
		return
	}
	m.log.Debug("recon: gossip round failed again", "peer", p.Address, "failed_rounds", n, "err", err, "retry_in", wait)
}

// roundSucceeded logs that p recovered, if its rounds were failing.
func (m *Manager) roundSucceeded(p Peer) {
	m.mu.Lock()
	st := m.statusOf(p)
	n := st.gossipFailed
	st.gossipFailed = 0
	m.mu.Unlock()
	if n > 0 {
		m.log.Info("recon: gossip with peer works again", "peer", p.Address, "failed_rounds", n)
	}
}

// jittered returns the interval ±25%.
func (m *Manager) jittered() time.Duration {
	return time.Duration(float64(m.cfg.Interval) * (0.75 + 0.5*rand.Float64()))
}

func (m *Manager) pickPeer() (Peer, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var enabled []Peer
	for _, p := range m.peers {
		if !p.Disabled {
			enabled = append(enabled, p)
		}
	}
	if len(enabled) == 0 {
		return Peer{}, false
	}
	return enabled[rand.IntN(len(enabled))], true
}

// ReconcileWith dials peer now, answers its recon session and fetches what
// the session found missing. The error, if any, is also logged and in
// Status.
func (m *Manager) ReconcileWith(ctx context.Context, peer Peer) (Result, FetchResult, error) {
	res, fr, err := m.reconcile(ctx, peer)
	if err != nil {
		m.log.Warn("recon: session failed", "peer", peer.Address, "role", "answer", "err", err)
	}
	return res, fr, err
}

// reconcile is ReconcileWith without the log line on failure.
func (m *Manager) reconcile(ctx context.Context, peer Peer) (Result, FetchResult, error) {
	start := time.Now()
	c, err := m.dial(ctx, "tcp", peer.Address)
	if err != nil {
		err = fmt.Errorf("recon: dialing %s: %w", peer.Address, err)
		m.finishSession(ctx, peer, "answer", "", start, Result{}, err)
		return Result{}, FetchResult{}, err
	}
	host, _, _ := net.SplitHostPort(peer.Address)
	res, err := Answer(ctx, c, m.tree, m.sessionConfig(peer))
	fr, ferr := m.finishSession(ctx, peer, "answer", host, start, res, err)
	if err == nil {
		err = ferr
	}
	return res, fr, err
}

// finishSession records a session and fetches what it found missing. The
// caller logs a failure.
func (m *Manager) finishSession(ctx context.Context, peer Peer, role, host string, start time.Time, res Result, err error) (FetchResult, error) {
	took := time.Since(start)
	m.metrics.session(peer.Address, role, err, took, len(res.Missing), len(res.PeerMissing))
	m.mu.Lock()
	st := m.statusOf(peer)
	st.Sessions++
	st.LastRecon = time.Now()
	st.LastDuration = took
	if err != nil {
		st.failed(err, st.LastRecon)
	} else {
		st.ElementsReceived += len(res.Missing)
		st.ElementsSent += len(res.PeerMissing)
	}
	if err == nil && peer.HTTP == "" && res.Remote.HTTPPort > 0 && host != "" {
		peer.HTTP = "http://" + net.JoinHostPort(host, strconv.Itoa(res.Remote.HTTPPort))
		st.HTTP = peer.HTTP
	}
	if err == nil && len(res.Missing) == 0 {
		st.good(role, st.LastRecon)
	}
	m.mu.Unlock()
	if err != nil {
		return FetchResult{}, err
	}
	m.log.Info("recon: session done", "peer", peer.Address, "role", role, "missing", len(res.Missing),
		"peer_missing", len(res.PeerMissing), "took", took, "bytes_in", res.BytesRead, "bytes_out", res.BytesWritten)
	if len(res.Missing) == 0 {
		return FetchResult{}, nil
	}
	fr, ferr := m.fetcher.Fetch(ctx, peer, res.Missing)
	if ferr != nil {
		ferr = fmt.Errorf("recon: fetching from %s: %w", peer.Address, ferr)
	}
	m.metrics.fetched(peer.Address, fr)
	m.mu.Lock()
	st = m.statusOf(peer)
	st.KeysStored += fr.Stored
	st.KeysUnchanged += fr.Unchanged
	st.KeysRejected += fr.Rejected
	if ferr != nil {
		st.failed(ferr, time.Now())
	} else {
		st.good(role, time.Now())
	}
	m.mu.Unlock()
	if ferr != nil {
		return fr, ferr
	}
	m.log.Info("recon: fetched", "peer", peer.Address, "requested", fr.Requested, "stored", fr.Stored,
		"unchanged", fr.Unchanged, "changed_by_policy", fr.Changed, "rejected", fr.Rejected, "skipped", fr.Skipped)
	return fr, nil
}

// failed records a failed session or fetch at t.
func (st *PeerStatus) failed(err error, t time.Time) {
	st.Failures++
	st.LastError = err.Error()
	if st.FailingSince.IsZero() {
		st.FailingSince = t
	}
}

// good records a round in role ("drive": the peer started it, "answer":
// this side did) that ended good at t.
func (st *PeerStatus) good(role string, t time.Time) {
	st.LastSuccess = t
	st.FailingSince = time.Time{}
	if role == "drive" {
		st.LastIncoming = t
	} else {
		st.LastOutgoing = t
	}
}

// statusOf returns the status entry for peer; m.mu must be held.
func (m *Manager) statusOf(p Peer) *PeerStatus {
	st, ok := m.status[p.Address]
	if !ok {
		st = &PeerStatus{Peer: p}
		m.status[p.Address] = st
	}
	return st
}
