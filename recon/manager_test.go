package recon

import (
	"context"
	"errors"
	"fmt"
	"github.com/kith-keyserver/kith/identity/testkit"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// recordingFetcher records what it is asked to fetch.
type recordingFetcher struct {
	mu    sync.Mutex
	calls []fetchCall
	got   chan struct{}
}

type fetchCall struct {
	peer    Peer
	missing [][16]byte
}

func newRecordingFetcher() *recordingFetcher { return &recordingFetcher{got: make(chan struct{}, 16)} }

func (f *recordingFetcher) Fetch(ctx context.Context, peer Peer, missing [][16]byte) (FetchResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, fetchCall{peer, missing})
	f.mu.Unlock()
	f.got <- struct{}{}
	return FetchResult{Requested: len(missing), Stored: len(missing)}, nil
}

func (f *recordingFetcher) wait(t *testing.T) fetchCall {
	t.Helper()
	select {
	case <-f.got:
	case <-time.After(30 * time.Second):
		t.Fatal("no fetch within 30 s")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[len(f.calls)-1]
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func TestManagersReconcileAndFetch(t *testing.T) {
	d, a, dOnly, aOnly := splitSets(77, 3000, 40, 60)
	lnA, lnB := listen(t), listen(t)
	peerA := Peer{Address: lnA.Addr().String(), HTTP: "http://127.0.0.1:11371"}
	peerB := Peer{Address: lnB.Addr().String()} // HTTP from its Config
	fa, fb := newRecordingFetcher(), newRecordingFetcher()
	regA := prometheus.NewRegistry()
	mA, err := NewManager(ManagerConfig{HTTPPort: 11371, Peers: []Peer{peerB}}, BuildTree(a), fa, nil, regA)
	if err != nil {
		t.Fatal(err)
	}
	mB, err := NewManager(ManagerConfig{HTTPPort: 11381, Peers: []Peer{peerA}}, BuildTree(d), fb, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go mA.Serve(ctx, lnA)
	go mB.Serve(ctx, lnB)

	// A dials B: A answers, B drives; each fetches what it lacks.
	res, fr, err := mA.ReconcileWith(ctx, peerB)
	if err != nil {
		t.Fatal(err)
	}
	if !sameDigests(res.Missing, dOnly) || fr.Stored != len(dOnly) {
		t.Fatalf("A missing %d, want %d", len(res.Missing), len(dOnly))
	}
	callA := fa.wait(t)
	if callA.peer.HTTP != "http://127.0.0.1:11381" {
		t.Errorf("A fetched from %q, want the port B announced", callA.peer.HTTP)
	}
	callB := fb.wait(t)
	if !sameDigests(callB.missing, aOnly) || callB.peer.HTTP != peerA.HTTP {
		t.Fatalf("B fetched %d from %q, want %d from %q", len(callB.missing), callB.peer.HTTP, len(aOnly), peerA.HTTP)
	}
	st := mA.Status()
	if len(st) != 1 || st[0].Sessions != 1 || st[0].ElementsReceived != len(dOnly) || st[0].KeysStored != len(dOnly) || st[0].LastSuccess.IsZero() {
		t.Fatalf("A status = %+v", st)
	}
	if got := counterValue(t, mA.metrics.missing.WithLabelValues(peerB.Address)); got != float64(len(dOnly)) {
		t.Errorf("elements received metric = %v", got)
	}
	if got := counterValue(t, mA.metrics.sessions.WithLabelValues(peerB.Address, "answer", "ok")); got != 1 {
		t.Errorf("sessions metric = %v", got)
	}
}

func TestManagerRefusesUnlistedPeers(t *testing.T) {
	ln := listen(t)
	reg := prometheus.NewRegistry()
	m, err := NewManager(ManagerConfig{Peers: []Peer{{Address: "127.0.0.2:11370"}}}, NewTree(), newRecordingFetcher(), nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Serve(ctx, ln)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read from refused connection = %v, want EOF", err)
	}
	if got := counterValue(t, m.metrics.refusals.WithLabelValues("unlisted")); got != 1 {
		t.Fatalf("refusals = %v", got)
	}
}

func TestManagerGossipsWithRandomPeer(t *testing.T) {
	d, a, dOnly, _ := splitSets(78, 500, 5, 5)
	lnB := listen(t)
	fB := newRecordingFetcher()
	mB, err := NewManager(ManagerConfig{Peers: []Peer{{Address: "127.0.0.1:1"}}}, BuildTree(d), fB, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	fA := newRecordingFetcher()
	peers := []Peer{{Address: lnB.Addr().String(), HTTP: "http://127.0.0.1:2"}, {Address: "127.0.0.1:3", Disabled: true}}
	mA, err := NewManager(ManagerConfig{Interval: 20 * time.Millisecond, Peers: peers}, BuildTree(a), fA, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go mB.Serve(ctx, lnB)
	go mA.Gossip(ctx)
	call := fA.wait(t)
	if !sameDigests(call.missing, dOnly) || call.peer.Address != lnB.Addr().String() {
		t.Fatalf("gossip fetched %d from %s", len(call.missing), call.peer.Address)
	}
	if st := mA.Status(); st[1].Sessions != 0 {
		t.Fatal("gossip picked a disabled peer")
	}
}

func TestManagerPicksPeerByAnnouncedFilters(t *testing.T) {
	// Two entries on one IP with different filters: the listener reads the
	// peer's Config first and answers with the matching entry's filters.
	d, a, _, aOnly := splitSets(79, 200, 3, 3)
	ln := listen(t)
	fB := newRecordingFetcher()
	peers := []Peer{
		{Address: "127.0.0.1:5", HTTP: "http://127.0.0.1:6", Filters: "hockeypuck.x,yminsky.dedup"},
		{Address: "127.0.0.1:7", HTTP: "http://127.0.0.1:8"},
	}
	mB, err := NewManager(ManagerConfig{Peers: peers}, BuildTree(d), fB, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go mB.Serve(ctx, ln)
	mA, err := NewManager(ManagerConfig{Peers: []Peer{{Address: ln.Addr().String(), Filters: "yminsky.dedup,hockeypuck.x"}}}, BuildTree(a), newRecordingFetcher(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := mA.ReconcileWith(ctx, mA.Status()[0].Peer); err != nil {
		t.Fatal(err)
	}
	call := fB.wait(t)
	if call.peer.Address != "127.0.0.1:5" || !sameDigests(call.missing, aOnly) {
		t.Fatalf("listener attributed the session to %s", call.peer.Address)
	}
}

func TestManagerRecordsDialFailure(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	m, err := NewManager(ManagerConfig{Peers: []Peer{{Address: addr}}}, NewTree(), newRecordingFetcher(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.ReconcileWith(context.Background(), Peer{Address: addr}); err == nil {
		t.Fatal("ReconcileWith a dead address succeeded")
	}
	st := m.Status()[0]
	if st.Failures != 1 || !strings.Contains(st.LastError, "dialing") {
		t.Fatalf("status = %+v", st)
	}
}

func TestNewManagerRejectsBadPeers(t *testing.T) {
	for _, p := range []Peer{{Address: "no-port"}, {Address: "h:1", HTTP: "ftp://x"}} {
		if _, err := NewManager(ManagerConfig{Peers: []Peer{p}}, NewTree(), newRecordingFetcher(), nil, nil); err == nil {
			t.Errorf("NewManager accepted peer %+v", p)
		}
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// flakyFetcher fails its first fails calls, as a store that is down would,
// then hands the rest to next.
type flakyFetcher struct {
	mu    sync.Mutex
	fails int
	next  Fetcher
}

func (f *flakyFetcher) Fetch(ctx context.Context, peer Peer, missing [][16]byte) (FetchResult, error) {
	f.mu.Lock()
	fail := f.fails > 0
	if fail {
		f.fails--
	}
	f.mu.Unlock()
	if fail {
		return FetchResult{}, errors.New("store unavailable")
	}
	return f.next.Fetch(ctx, peer, missing)
}

// waitRecorder stands in for the gossip loop's sleep: it records each
// wait and returns at once, until a wait as long as a normal round's
// (the interval is an hour in these tests) ends the loop.
type waitRecorder struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (w *waitRecorder) wait(ctx context.Context, d time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waits = append(w.waits, d)
	return ctx.Err() == nil && d < 30*time.Minute
}

// logLines returns the lines of a text log that contain msg.
func logLines(log, msg string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, msg) {
			out = append(out, line)
		}
	}
	return out
}

// checkRetryWaits checks the waits after failed rounds: the first at
// least GossipRetryMin (seconds, not the 100 ms that made a dead peer get
// a connection and a warning every few hundred milliseconds), each within
// its jitter and, below the cap, longer than the one before.
func checkRetryWaits(t *testing.T, waits []time.Duration, interval time.Duration) {
	t.Helper()
	base := GossipRetryMin
	for i, d := range waits {
		if d < base || d >= base+base/2 {
			t.Errorf("retry wait %d = %v, want in [%v, %v)", i, d, base, base+base/2)
		}
		if i > 0 && base < interval && d <= waits[i-1] {
			t.Errorf("retry wait %d = %v, not longer than the one before (%v)", i, d, waits[i-1])
		}
		base = min(2*base, interval)
	}
}

func TestGossipRetriesFailedRoundsWithBackoff(t *testing.T) {
	// The interval is an hour, so only the backoff can explain the
	// retries: two sessions the peer hangs up on, then one whose fetch
	// fails, then one that works.
	d, a, dOnly, _ := splitSets(80, 300, 4, 4)
	lnB := listen(t)
	mB, err := NewManager(ManagerConfig{Peers: []Peer{{Address: "127.0.0.1:1"}}}, BuildTree(d), newRecordingFetcher(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	fA := newRecordingFetcher()
	peer := Peer{Address: lnB.Addr().String(), HTTP: "http://127.0.0.1:2"}
	mA, err := NewManager(ManagerConfig{Interval: time.Hour, Peers: []Peer{peer}}, BuildTree(a),
		&flakyFetcher{fails: 1, next: fA}, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), nil)
	if err != nil {
		t.Fatal(err)
	}
	var w waitRecorder
	mA.wait = w.wait
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for range 2 {
			c, err := lnB.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
		mB.Serve(ctx, lnB)
	}()
	mA.gossip(ctx, 0) // returns at the first normal wait, after the good round

	call := fA.wait(t)
	if !sameDigests(call.missing, dOnly) {
		t.Fatalf("fetched %d digests, want %d", len(call.missing), len(dOnly))
	}
	if st := mA.Status()[0]; st.Sessions != 4 || st.Failures != 3 {
		t.Fatalf("status = %+v, want 4 sessions and 3 failures", st)
	}
	if len(w.waits) != 5 {
		t.Fatalf("waits %v, want the first, three retries and a normal one", w.waits)
	}
	checkRetryWaits(t, w.waits[1:4], time.Hour)
	if d := w.waits[4]; d < 45*time.Minute {
		t.Errorf("wait after the good round = %v, want the interval ±25%%", d)
	}
	failed := logLines(logs.String(), "gossip round failed")
	if len(failed) != 3 {
		t.Fatalf("%d failure lines, want 3:\n%s", len(failed), logs.String())
	}
	for i, line := range failed {
		level := map[bool]string{true: "level=WARN", false: "level=DEBUG"}[i == 0]
		if !strings.Contains(line, level) || !strings.Contains(line, "peer="+peer.Address) || !strings.Contains(line, "retry_in=") {
			t.Errorf("failure line %d = %q, want %s, the peer and the wait", i, line, level)
		}
	}
	if !strings.Contains(failed[2], "store unavailable") {
		t.Errorf("fetch failure line = %q, want the store's error", failed[2])
	}
	if back := logLines(logs.String(), "works again"); len(back) != 1 || !strings.Contains(back[0], "level=INFO") || !strings.Contains(back[0], "failed_rounds=3") {
		t.Errorf("recovery lines %q, want one at INFO with failed_rounds=3", back)
	}
}

// TestGossipWithDeadPeerWarnsOnce: a peer that cannot be reached for six
// rounds costs one warning, debug lines after it, and one info line when
// it comes back; the waits grow from seconds up to the interval.
func TestGossipWithDeadPeerWarnsOnce(t *testing.T) {
	d, a, dOnly, _ := splitSets(81, 200, 3, 3)
	lnB := listen(t)
	mB, err := NewManager(ManagerConfig{Peers: []Peer{{Address: "127.0.0.1:1"}}}, BuildTree(d), newRecordingFetcher(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go mB.Serve(ctx, lnB)

	var logs testkit.SyncBuffer
	fA := newRecordingFetcher()
	peer := Peer{Address: "192.0.2.1:11370", HTTP: "http://127.0.0.1:2"} // never dialled for real
	const interval = time.Minute
	mA, err := NewManager(ManagerConfig{Interval: interval, Peers: []Peer{peer}}, BuildTree(a), fA,
		slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), nil)
	if err != nil {
		t.Fatal(err)
	}
	const dead = 6
	var dials []string
	mA.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials = append(dials, addr)
		if len(dials) <= dead {
			return nil, errors.New("connection refused")
		}
		return (&net.Dialer{}).DialContext(ctx, network, lnB.Addr().String())
	}
	var w waitRecorder
	mA.wait = func(ctx context.Context, d time.Duration) bool {
		w.wait(ctx, d)
		return len(dials) <= dead // stop after the good round
	}
	mA.gossip(ctx, 0)

	if len(dials) != dead+1 || dials[0] != peer.Address {
		t.Fatalf("dialled %v, want %s %d times", dials, peer.Address, dead+1)
	}
	if call := fA.wait(t); !sameDigests(call.missing, dOnly) {
		t.Fatalf("fetched %d digests after recovery, want %d", len(call.missing), len(dOnly))
	}
	if len(w.waits) != dead+2 {
		t.Fatalf("waits %v, want the first, %d retries and a normal one", w.waits, dead)
	}
	checkRetryWaits(t, w.waits[1:dead+1], interval)
	out := logs.String()
	if n := len(logLines(out, "level=WARN")); n != 1 {
		t.Errorf("%d warnings for %d failed rounds, want 1:\n%s", n, dead, out)
	}
	if n := len(logLines(out, "gossip round failed again")); n != dead-1 {
		t.Errorf("%d debug lines for the failures after the first, want %d:\n%s", n, dead-1, out)
	}
	if back := logLines(out, "works again"); len(back) != 1 || !strings.Contains(back[0], "level=INFO") {
		t.Errorf("recovery lines %q, want one at INFO", back)
	}
}

// TestManagerLogsRefusedConnectionsOncePerMinute: connections from an
// address that is not a peer are each counted but logged once a minute.
func TestManagerLogsRefusedConnectionsOncePerMinute(t *testing.T) {
	ln := listen(t)
	reg := prometheus.NewRegistry()
	var logs testkit.SyncBuffer
	m, err := NewManager(ManagerConfig{Peers: []Peer{{Address: "127.0.0.2:11370"}}}, NewTree(), newRecordingFetcher(),
		slog.New(slog.NewTextHandler(&logs, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.refusals = newLogLimiter(refusalLogEvery, refusalLogAddrs, func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Serve(ctx, ln)
	connect := func(n int) {
		for range n {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			// The refusal is counted and logged before the close we wait for.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err != io.EOF {
				t.Fatalf("read from refused connection = %v, want EOF", err)
			}
			c.Close()
		}
	}
	connect(10)
	if got := counterValue(t, m.metrics.refusals.WithLabelValues("unlisted")); got != 10 {
		t.Fatalf("refusals = %v, want 10", got)
	}
	if lines := logLines(logs.String(), "refused connection"); len(lines) != 1 {
		t.Fatalf("%d log lines for 10 refused connections in a minute, want 1:\n%s", len(lines), logs.String())
	}
	mu.Lock()
	now = now.Add(refusalLogEvery)
	mu.Unlock()
	connect(1)
	lines := logLines(logs.String(), "refused connection")
	if len(lines) != 2 || !strings.Contains(lines[1], "suppressed_since_last=9") {
		t.Fatalf("after a minute: lines %q, want a second one saying 9 were suppressed", lines)
	}
}

func TestLogLimiterStaysBounded(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newLogLimiter(time.Minute, 3, func() time.Time { return now })
	for _, k := range []string{"a", "b", "c"} {
		if ok, _ := l.allow(k); !ok {
			t.Fatalf("first line for %s refused", k)
		}
	}
	// Past the maximum, new keys share one allowance.
	if ok, _ := l.allow("d"); !ok {
		t.Fatal("first key over the maximum refused")
	}
	if ok, _ := l.allow("e"); ok {
		t.Fatal("second key over the maximum allowed in the same minute")
	}
	if ok, _ := l.allow("a"); ok {
		t.Fatal("second line for a tracked key allowed in the same minute")
	}
	for i := range 1000 {
		l.allow(fmt.Sprint("flood", i))
	}
	if n := len(l.last); n > 4 {
		t.Fatalf("limiter tracks %d keys, want at most 3 and the shared one", n)
	}
	now = now.Add(time.Minute)
	if ok, _ := l.allow("f"); !ok {
		t.Fatal("a new key refused after the minute, when the old ones are forgotten")
	}
	if n := len(l.last); n > 4 {
		t.Fatalf("limiter tracks %d keys, want at most 4", n)
	}
}
