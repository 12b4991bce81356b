// One recon session over a connection, in either role.
//
// The side that accepted the connection drives: it walks its own tree from
// the root, sending ReconRqstFull for leaves and small nodes and
// ReconRqstPoly for the rest, up to MaxOutstanding requests then Flush, and
// reads one reply per request: Elements (what the driver lacks), FullElements
// (the answerer's whole node; the driver replies with Elements of what the
// answerer lacks) or SyncFail (the driver descends). It ends with Done.
//
// The side that initiated the connection answers: it reconciles each
// ReconRqstPoly against its own node, replying Elements of what the driver
// lacks and keeping what it lacks itself; answers ReconRqstFull with
// Elements of what the driver lacks; and keeps the elements the driver sends
// it in Elements. So each side ends knowing what it lacks, and fetches those
// keys itself.

package recon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"strconv"
	"strings"
	"time"
)

// Session defaults, as SKS uses them.
const (
	DefaultReadTimeout    = 300 * time.Second
	DefaultDialTimeout    = 30 * time.Second
	DefaultSessionTimeout = 3600 * time.Second
	DefaultMaxOutstanding = 100
	// DefaultMaxMissing bounds the elements one session may report missing.
	DefaultMaxMissing = 1 << 22
	// maxPendingOutput makes the answerer flush even without Flush.
	maxPendingOutput = 4 << 20
)

// SessionConfig controls one recon session. The zero value uses the
// defaults above, Kith's parameters and DefaultFilters.
type SessionConfig struct {
	// HTTPPort is the local HKP port announced in Config (peers fetch
	// /pks/hashquery from it).
	HTTPPort int
	// Filters is announced verbatim in Config, and the peer's filters must
	// equal it as a set (SKS compares sets, Hockeypuck sorted strings, so
	// announcing the peer's own string passes both). Empty means
	// DefaultFilters.
	Filters string
	// SelectFilters, if set, is called with the peer's Config before the
	// local one is sent, to choose Filters then; the session then reads the
	// peer's Config first. For listeners that cannot tell peers apart by IP.
	SelectFilters func(remote *Config) (string, error)
	// ReadTimeout bounds each read and write. Default 300 s.
	ReadTimeout time.Duration
	// Timeout bounds the whole session. Default 3600 s.
	Timeout time.Duration
	// MaxOutstanding is how many requests the driver sends before Flush.
	MaxOutstanding int
	// MaxMessageSize bounds one received message. Default 64 MiB.
	MaxMessageSize int
	// MaxMissing bounds the elements one session reports missing.
	MaxMissing int
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

func (c SessionConfig) withDefaults() SessionConfig {
	if c.Filters == "" {
		c.Filters = DefaultFilters
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultSessionTimeout
	}
	if c.MaxOutstanding <= 0 {
		c.MaxOutstanding = DefaultMaxOutstanding
	}
	if c.MaxMessageSize <= 0 {
		c.MaxMessageSize = DefaultMaxMessageSize
	}
	if c.MaxMissing <= 0 {
		c.MaxMissing = DefaultMaxMissing
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Result is what one session learned.
type Result struct {
	// Remote is the peer's handshake Config.
	Remote Config
	// Missing holds the elements the peer has and the local side lacks:
	// the digests to fetch from the peer.
	Missing [][16]byte
	// PeerMissing holds the elements this side sent the peer in Elements
	// messages as ones it lacks. It is not the whole of what the peer lacks:
	// where one side sends a whole node (ReconRqstFull, FullElements) the
	// other works out its own missing elements, as SKS does.
	PeerMissing [][16]byte
	// BytesRead and BytesWritten count the bytes on the connection.
	BytesRead, BytesWritten int64
	// Requests counts the requests the driver sent or the answerer answered.
	Requests int
}

// Drive runs the driving role, for the side that accepted conn, against
// tree. It closes conn when done.
func Drive(ctx context.Context, conn net.Conn, tree *Tree, cfg SessionConfig) (Result, error) {
	s := newSession(ctx, conn, tree, cfg, "drive")
	defer s.close()
	err := s.handshake()
	if err == nil {
		err = s.drive()
	}
	return s.result(), s.finish(err)
}

// Answer runs the answering role, for the side that initiated conn, against
// tree. It closes conn when done.
func Answer(ctx context.Context, conn net.Conn, tree *Tree, cfg SessionConfig) (Result, error) {
	s := newSession(ctx, conn, tree, cfg, "answer")
	defer s.close()
	err := s.handshake()
	if err == nil {
		err = s.answer()
	}
	return s.result(), s.finish(err)
}

// session is the state of one recon session.
type session struct {
	ctx      context.Context
	cfg      SessionConfig
	role     string
	tree     *Tree
	conn     net.Conn
	counted  *countingConn
	r        *bufio.Reader
	out      []byte
	deadline time.Time
	stop     func() bool
	log      *slog.Logger

	remote      Config
	missing     map[[16]byte]struct{}
	peerMissing map[[16]byte]struct{}
	requests    int
	handshaken  bool
}

func newSession(ctx context.Context, conn net.Conn, tree *Tree, cfg SessionConfig, role string) *session {
	cfg = cfg.withDefaults()
	cc := &countingConn{Conn: conn}
	s := &session{
		ctx: ctx, cfg: cfg, role: role, tree: tree, conn: conn, counted: cc,
		r:           bufio.NewReaderSize(cc, 64<<10),
		deadline:    time.Now().Add(cfg.Timeout),
		log:         cfg.Logger.With("role", role, "peer", conn.RemoteAddr().String()),
		missing:     make(map[[16]byte]struct{}),
		peerMissing: make(map[[16]byte]struct{}),
	}
	if d, ok := ctx.Deadline(); ok && d.Before(s.deadline) {
		s.deadline = d
	}
	// Cancelling ctx unblocks any read or write at once.
	s.stop = context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	return s
}

func (s *session) close() {
	s.stop()
	s.conn.Close()
}

func (s *session) result() Result {
	r := Result{Remote: s.remote, BytesRead: s.counted.read, BytesWritten: s.counted.written, Requests: s.requests}
	for d := range s.missing {
		r.Missing = append(r.Missing, d)
	}
	for d := range s.peerMissing {
		r.PeerMissing = append(r.PeerMissing, d)
	}
	return r
}

// finish tells the peer why the session failed (best effort) and wraps err.
func (s *session) finish(err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := s.ctx.Err(); ctxErr != nil {
		err = fmt.Errorf("%w (%w)", err, ctxErr)
	} else if s.handshaken && !errors.Is(err, errPeerGone) {
		s.out = s.out[:0]
		s.send(&ErrorMessage{Text: "kith: " + err.Error()})
		s.flushWithin(5 * time.Second)
	}
	return fmt.Errorf("recon: %s session with %s: %w", s.role, s.conn.RemoteAddr(), err)
}

// errPeerGone marks errors after which nothing more can be sent.
var errPeerGone = errors.New("peer closed the connection")

// ioDeadline returns the deadline for the next read or write.
func (s *session) ioDeadline(d time.Duration) time.Time {
	t := time.Now().Add(d)
	if s.deadline.Before(t) {
		return s.deadline
	}
	return t
}

func (s *session) send(m Message) error {
	b, err := m.appendBody(append(s.out, 0, 0, 0, 0, byte(m.Type())))
	if err != nil {
		return err
	}
	start := len(s.out)
	n := len(b) - start - 4
	b[start], b[start+1], b[start+2], b[start+3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	s.out = b
	return nil
}

func (s *session) flush() error { return s.flushWithin(s.cfg.ReadTimeout) }

func (s *session) flushWithin(d time.Duration) error {
	if len(s.out) == 0 {
		return nil
	}
	s.conn.SetWriteDeadline(s.ioDeadline(d))
	_, err := s.counted.Write(s.out)
	s.out = s.out[:0]
	if err != nil {
		return s.ioErr("writing", err)
	}
	return nil
}

func (s *session) recv() (Message, error) {
	s.conn.SetReadDeadline(s.ioDeadline(s.cfg.ReadTimeout))
	m, err := ReadMessage(s.r, s.cfg.MaxMessageSize)
	if err != nil {
		return nil, s.ioErr("reading", err)
	}
	return m, nil
}

func (s *session) ioErr(op string, err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, ErrProtocol):
		return err
	case errors.As(err, &ne) && ne.Timeout():
		// The I/O deadline is the context's deadline when that comes
		// first, and may fire a moment before the context reports it.
		if d, ok := s.ctx.Deadline(); ok && !time.Now().Before(d) {
			return fmt.Errorf("%s: %w", op, context.DeadlineExceeded)
		}
		if err := s.ctx.Err(); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		return fmt.Errorf("%s: peer did not answer in time: %w", op, err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return fmt.Errorf("%s: %w: %w", op, errPeerGone, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Handshake.

const (
	configPassed = "passed"
	configFailed = "failed"
)

func (s *session) localConfig() *Config {
	return &Config{Version: Version, HTTPPort: s.cfg.HTTPPort, BitQuantum: bitQuantum, MBar: mbar, Filters: s.cfg.Filters}
}

func (s *session) handshake() error {
	readRemote := func() error {
		m, err := s.recv()
		if err != nil {
			return fmt.Errorf("handshake: %w", err)
		}
		c, ok := m.(*Config)
		if !ok {
			if e, ok := m.(*ErrorMessage); ok {
				return fmt.Errorf("handshake: peer sent error: %q", e.Text)
			}
			return fmt.Errorf("handshake: %w", protoErr("expected Config, got %v", m.Type()))
		}
		s.remote = *c
		return nil
	}
	if s.cfg.SelectFilters != nil {
		if err := readRemote(); err != nil {
			return err
		}
		f, err := s.cfg.SelectFilters(&s.remote)
		if err != nil {
			s.send(s.localConfig())
			writeString(s, configFailed)
			writeString(s, err.Error())
			s.flushWithin(5 * time.Second)
			return fmt.Errorf("handshake: %w", err)
		}
		s.cfg.Filters = f
		s.send(s.localConfig())
		if err := s.flush(); err != nil {
			return fmt.Errorf("handshake: %w", err)
		}
	} else {
		s.send(s.localConfig())
		if err := s.flush(); err != nil {
			return fmt.Errorf("handshake: %w", err)
		}
		if err := readRemote(); err != nil {
			return err
		}
	}
	if reason := CheckConfig(&s.remote, s.cfg.Filters); reason != "" {
		writeString(s, configFailed)
		writeString(s, reason)
		s.flushWithin(5 * time.Second)
		return fmt.Errorf("handshake: peer's config refused: %s", reason)
	}
	writeString(s, configPassed)
	if err := s.flush(); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	s.conn.SetReadDeadline(s.ioDeadline(s.cfg.ReadTimeout))
	status, err := readString(s.r, maxStringLen)
	if err != nil {
		return fmt.Errorf("handshake: reading peer's verdict: %w", s.ioErr("reading", err))
	}
	switch status {
	case configPassed:
		s.handshaken = true
		s.log.Debug("recon handshake passed", "version", s.remote.Version, "filters", s.remote.Filters, "http_port", s.remote.HTTPPort)
		return nil
	case configFailed:
		reason, _ := readString(s.r, maxStringLen)
		return fmt.Errorf("handshake: peer refused our config: %q", reason)
	}
	return fmt.Errorf("handshake: %w", protoErr("verdict %q is neither passed nor failed", status))
}

// Write lets handshake strings go into the pending output.
func (s *session) Write(b []byte) (int, error) {
	s.out = append(s.out, b...)
	return len(b), nil
}

// CheckConfig returns why the peer's Config is unacceptable to a side
// announcing filters, or "" if it is acceptable: bitquantum and mbar must
// match, the version be at least 0.1.5 (as SKS requires) and the filters
// equal as a set.
func CheckConfig(remote *Config, filters string) string {
	switch {
	case remote.BitQuantum != bitQuantum:
		return fmt.Sprintf("bitquantum %d, want %d", remote.BitQuantum, bitQuantum)
	case remote.MBar != mbar:
		return fmt.Sprintf("mbar %d, want %d", remote.MBar, mbar)
	case !versionAtLeast(remote.Version, [3]int{0, 1, 5}):
		return fmt.Sprintf("version %q is older than 0.1.5", remote.Version)
	case !FiltersEqual(remote.Filters, filters):
		return fmt.Sprintf("filters do not match: %q, want %q", remote.Filters, filters)
	}
	return ""
}

// FiltersEqual reports whether two comma-separated filter lists name the
// same set of filters.
func FiltersEqual(a, b string) bool {
	set := func(s string) map[string]bool {
		m := make(map[string]bool)
		for f := range strings.SplitSeq(s, ",") {
			if f = strings.TrimSpace(f); f != "" {
				m[f] = true
			}
		}
		return m
	}
	sa, sb := set(a), set(b)
	if len(sa) != len(sb) {
		return false
	}
	for f := range sa {
		if !sb[f] {
			return false
		}
	}
	return true
}

func versionAtLeast(v string, min [3]int) bool {
	parts := strings.Split(v, ".")
	for i := 0; i < 3; i++ {
		x := 0
		if i < len(parts) {
			var err error
			if x, err = strconv.Atoi(parts[i]); err != nil {
				return false
			}
		}
		if x != min[i] {
			return x > min[i]
		}
	}
	return true
}

// Shared helpers.

func (s *session) addMissing(set map[[16]byte]struct{}, ds [][16]byte) error {
	for _, d := range ds {
		set[d] = struct{}{}
	}
	if len(set) > s.cfg.MaxMissing {
		return fmt.Errorf("more than %d elements missing: raise MaxMissing or load a dump", s.cfg.MaxMissing)
	}
	return nil
}

// checkUnder returns a protocol error if any element lies outside p.
func checkUnder(p Prefix, ds [][16]byte, what string) error {
	for _, d := range ds {
		if !p.Contains(d) {
			return protoErr("%s for prefix %q holds %x, outside it", what, p, d)
		}
	}
	return nil
}

// diff returns the elements of a not in b.
func diff(a, b [][16]byte) [][16]byte {
	in := make(map[[16]byte]struct{}, len(b))
	for _, d := range b {
		in[d] = struct{}{}
	}
	var out [][16]byte
	for _, d := range a {
		if _, ok := in[d]; !ok {
			out = append(out, d)
			in[d] = struct{}{}
		}
	}
	return out
}

func samplesBig(v *nodeView) []*big.Int {
	out := make([]*big.Int, numSamples)
	for i, x := range v.samples {
		out[i] = x.big()
	}
	return out
}

// countingConn counts the bytes through a connection.
type countingConn struct {
	net.Conn
	read, written int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read += int64(n)
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.written += int64(n)
	return n, err
}
