// /pks/hashquery: how keys found missing by recon are fetched. This file
// keeps both ends of the format together: the client (HashQueryFetcher)
// and the encodings a server needs (package hkp serves it with them).
//
//	request:  int32 count, then count times (int32 16, 16 digest bytes)
//	response: int32 count, then count times (int32 length, binary packets),
//	          then CRLF, as SKS ends every HTTP body
//
// All integers are big-endian.

package recon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// HashQuery limits.
const (
	// MaxHashQueryBatch is the most digests Kith asks for in one request,
	// as SKS does; a server should accept at least this many.
	MaxHashQueryBatch = 100
	// DefaultMaxHashQueryResponse caps one response body.
	DefaultMaxHashQueryResponse = 64 << 20
	// DefaultMaxKeySize caps one key in a response.
	DefaultMaxKeySize = 16 << 20
)

// ErrRejected is what a fetcher's store callback wraps when it refuses a
// key (policy, parse failure): the fetch goes on with the next key and the
// key's digest is not asked for again for a while.
var ErrRejected = errors.New("recon: key rejected")

// ErrUnchanged is what a store callback wraps when the key, merged with
// the stored one, changed nothing (the local key already holds all of it,
// and more, so the digests differ): it counts as unchanged, not stored,
// and the digest is not asked for again for a while, like a rejected one.
var ErrUnchanged = errors.New("recon: key merged without change")

// ErrChangedByPolicy is what a store callback wraps when the local key
// policy changed the peer's key (dropped certifications over a cap, say)
// before it was stored or merged: what the local side then holds is not
// the peer's form, so the peer's digest will never be in the local tree.
// The key counts in FetchResult.Changed, and as stored, or as unchanged
// when the error wraps ErrUnchanged too; its digest is not asked for
// again for a while, like a rejected one. It is not a refusal.
var ErrChangedByPolicy = errors.New("recon: key stored changed by the key policy")

// MarshalHashQueryRequest returns the /pks/hashquery request body for digests.
func MarshalHashQueryRequest(digests [][16]byte) []byte {
	b := make([]byte, 0, 4+20*len(digests))
	b = binary.BigEndian.AppendUint32(b, uint32(len(digests)))
	for _, d := range digests {
		b = binary.BigEndian.AppendUint32(b, 16)
		b = append(b, d[:]...)
	}
	return b
}

// ParseHashQueryRequest parses a /pks/hashquery request body holding at most
// maxDigests digests (0 means MaxHashQueryBatch). Trailing bytes are an error.
func ParseHashQueryRequest(body []byte, maxDigests int) ([][16]byte, error) {
	if maxDigests <= 0 {
		maxDigests = MaxHashQueryBatch
	}
	d := &decoder{b: body}
	n := d.count(20)
	if d.err == nil && n > maxDigests {
		d.fail("hashquery for %d digests (limit %d)", n, maxDigests)
	}
	out := make([][16]byte, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		if l := d.int(); l != 16 && d.err == nil {
			d.fail("hashquery digest %d is %d bytes, want 16", i, l)
		}
		if v := d.take(16); v != nil {
			out = append(out, [16]byte(v))
		}
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d trailing bytes after hashquery", len(d.b))
	}
	if d.err != nil {
		return nil, fmt.Errorf("recon: parsing hashquery request: %w", d.err)
	}
	return out, nil
}

// HashQueryRequestSize is the length of a /pks/hashquery request body
// for n digests: the body cap of a server that accepts n.
func HashQueryRequestSize(n int) int64 { return 4 + 20*int64(n) }

// HashQueryResponseSize is the length of a /pks/hashquery response body
// holding n keys of keyBytes bytes in all, for Content-Length.
func HashQueryResponseSize(n int, keyBytes int64) int64 { return 4 + 4*int64(n) + keyBytes + 2 }

// WriteHashQueryResponse writes a /pks/hashquery response body holding
// keys, each the binary packets of one transferable public key.
func WriteHashQueryResponse(w io.Writer, keys [][]byte) error {
	bw := bufio.NewWriter(w)
	rw, err := NewHashQueryResponseWriter(bw, len(keys))
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := rw.WriteKey(k); err != nil {
			return err
		}
	}
	if err := rw.Close(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("recon: writing hashquery response: %w", err)
	}
	return nil
}

// HashQueryResponseWriter writes a /pks/hashquery response body one key
// at a time, so that a server can stream keys as its store reads them.
type HashQueryResponseWriter struct {
	w    io.Writer
	left int // keys announced and not yet written
}

// NewHashQueryResponseWriter writes the count of a response that will
// hold n keys to w.
func NewHashQueryResponseWriter(w io.Writer, n int) (*HashQueryResponseWriter, error) {
	if _, err := w.Write(binary.BigEndian.AppendUint32(nil, uint32(n))); err != nil {
		return nil, fmt.Errorf("recon: writing hashquery response: %w", err)
	}
	return &HashQueryResponseWriter{w: w, left: n}, nil
}

// WriteKey writes one key's binary packets; writing more keys than
// announced is an error.
func (rw *HashQueryResponseWriter) WriteKey(packets []byte) error {
	if rw.left <= 0 {
		return errors.New("recon: writing hashquery response: more keys than announced")
	}
	rw.left--
	if _, err := rw.w.Write(binary.BigEndian.AppendUint32(nil, uint32(len(packets)))); err != nil {
		return fmt.Errorf("recon: writing hashquery response: %w", err)
	}
	if _, err := rw.w.Write(packets); err != nil {
		return fmt.Errorf("recon: writing hashquery response: %w", err)
	}
	return nil
}

// Close ends the response with CRLF; it fails if fewer keys were written
// than announced.
func (rw *HashQueryResponseWriter) Close() error {
	if rw.left != 0 {
		return fmt.Errorf("recon: writing hashquery response: %d announced keys not written", rw.left)
	}
	if _, err := io.WriteString(rw.w, "\r\n"); err != nil {
		return fmt.Errorf("recon: writing hashquery response: %w", err)
	}
	return nil
}

// HashQueryLimits bound what ReadHashQueryResponse accepts.
type HashQueryLimits struct {
	MaxKeys    int   // most keys in one response; 0 means MaxHashQueryBatch
	MaxKeySize int   // most bytes in one key; 0 means DefaultMaxKeySize
	MaxBody    int64 // most bytes in the body; 0 means DefaultMaxHashQueryResponse
}

// errResponseTooLarge marks a response over the body cap.
var errResponseTooLarge = errors.New("hashquery response too large")

// ReadHashQueryResponse reads a /pks/hashquery response body, calling fn
// with each key's bytes (valid only during the call) in order. A trailing
// CRLF, which SKS appends, is accepted; anything else after the keys is an
// error.
func ReadHashQueryResponse(r io.Reader, lim HashQueryLimits, fn func(key []byte) error) error {
	if lim.MaxKeys <= 0 {
		lim.MaxKeys = MaxHashQueryBatch
	}
	if lim.MaxKeySize <= 0 {
		lim.MaxKeySize = DefaultMaxKeySize
	}
	if lim.MaxBody <= 0 {
		lim.MaxBody = DefaultMaxHashQueryResponse
	}
	lr := &io.LimitedReader{R: r, N: lim.MaxBody + 1}
	br := bufio.NewReader(lr)
	readInt := func() (int, error) {
		var b [4]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			if lr.N <= 0 {
				return 0, errResponseTooLarge
			}
			return 0, err
		}
		return int(int32(binary.BigEndian.Uint32(b[:]))), nil
	}
	n, err := readInt()
	if err != nil {
		return fmt.Errorf("recon: hashquery response count: %w", err)
	}
	if n < 0 || n > lim.MaxKeys {
		return fmt.Errorf("recon: hashquery response: %w", protoErr("%d keys (limit %d)", n, lim.MaxKeys))
	}
	var buf []byte
	for i := 0; i < n; i++ {
		l, err := readInt()
		if err != nil {
			return fmt.Errorf("recon: hashquery response key %d: %w", i, err)
		}
		if l < 0 || l > lim.MaxKeySize {
			return fmt.Errorf("recon: hashquery response key %d: %w", i, protoErr("%d bytes (limit %d)", l, lim.MaxKeySize))
		}
		if int64(l) > lr.N+int64(br.Buffered()) {
			return fmt.Errorf("recon: hashquery response key %d: %w", i, errResponseTooLarge)
		}
		if cap(buf) < l {
			buf = make([]byte, l)
		}
		buf = buf[:l]
		if _, err := io.ReadFull(br, buf); err != nil {
			return fmt.Errorf("recon: hashquery response key %d of %d bytes: %w", i, l, err)
		}
		if err := fn(buf); err != nil {
			return err
		}
	}
	rest, err := io.ReadAll(io.LimitReader(br, 16))
	if err != nil {
		return fmt.Errorf("recon: hashquery response trailer: %w", err)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return fmt.Errorf("recon: hashquery response: %w", protoErr("%d unexpected bytes after %d keys", len(rest), n))
	}
	return nil
}

// FetchResult counts what one fetch did.
type FetchResult struct {
	Requested int // digests asked for
	Skipped   int // digests not asked for: rejected recently, or being fetched by another Fetch
	Received  int // keys in the responses
	Stored    int // keys the store callback accepted
	Unchanged int // keys whose merge changed nothing (ErrUnchanged)
	Rejected  int // keys the store callback rejected
	// Changed counts the keys, stored or unchanged, that the local key
	// policy changed from the peer's form (ErrChangedByPolicy).
	Changed int
}

// Fetcher gets the keys the local side lacks from a peer and stores them.
type Fetcher interface {
	Fetch(ctx context.Context, peer Peer, missing [][16]byte) (FetchResult, error)
}

// HashQueryFetcher is the Fetcher that asks a peer's /pks/hashquery in
// batches of at most 100 digests, halving a batch when the peer fails or
// its response is too large and growing it back after successes. It is
// safe for concurrent use.
type HashQueryFetcher struct {
	// Store receives each fetched key's bytes. Returning an error that
	// wraps ErrRejected, ErrUnchanged or ErrChangedByPolicy says what
	// became of the key, and the fetch goes on; any other error stops it.
	Store func(ctx context.Context, key []byte) error
	// KeyDigest, if set, returns a key's SKS digest, so rejected keys and
	// digests the peer did not serve are remembered one by one. Without it
	// a batch that had any such key is remembered whole (its stored keys
	// are in the tree by the next round anyway).
	KeyDigest func(key []byte) ([16]byte, error)
	// Client is the HTTP client; nil means one with a 5-minute timeout.
	Client *http.Client
	// Limits bound each response; MaxKeys is set per batch.
	Limits HashQueryLimits
	// Logger receives logs; nil discards them.
	Logger *slog.Logger

	mu       sync.Mutex
	batch    int
	rejected *boundedSet
	inflight map[[16]byte]struct{} // digests some Fetch is asking for
	client   *http.Client
}

// Rejected digests are remembered this long, at most this many.
const (
	rejectTTL = 24 * time.Hour
	rejectCap = 100_000
)

// NewHashQueryFetcher returns a fetcher that hands keys to store.
func NewHashQueryFetcher(store func(ctx context.Context, key []byte) error, logger *slog.Logger) *HashQueryFetcher {
	return &HashQueryFetcher{Store: store, Logger: logger}
}

func (f *HashQueryFetcher) init() {
	if f.rejected == nil {
		f.rejected = newBoundedSet(rejectCap, rejectTTL)
		f.inflight = make(map[[16]byte]struct{})
		f.batch = MaxHashQueryBatch
		f.client = f.Client
		if f.client == nil {
			f.client = &http.Client{Timeout: 5 * time.Minute}
		}
		if f.Logger == nil {
			f.Logger = slog.New(slog.DiscardHandler)
		}
	}
}

// Fetch implements Fetcher.
func (f *HashQueryFetcher) Fetch(ctx context.Context, peer Peer, missing [][16]byte) (FetchResult, error) {
	f.mu.Lock()
	f.init()
	var res FetchResult
	todo := make([][16]byte, 0, len(missing))
	now := time.Now()
	for _, d := range missing {
		// A digest another Fetch is asking for is left to it: sessions
		// with one peer can overlap (a peer that starts a round every few
		// seconds, a fetch of big keys that takes longer), and each key
		// must be checked and stored once, not once per session.
		_, busy := f.inflight[d]
		if busy || f.rejected.has(d, now) {
			res.Skipped++
			continue
		}
		f.inflight[d] = struct{}{}
		todo = append(todo, d)
	}
	f.mu.Unlock()
	defer func(todo [][16]byte) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, d := range todo {
			delete(f.inflight, d)
		}
	}(todo)
	if peer.HTTP == "" {
		return res, fmt.Errorf("recon: fetching from %s: no HTTP base URL", peer.Address)
	}
	url := strings.TrimSuffix(peer.HTTP, "/") + "/pks/hashquery"
	singleFailures := 0
	for len(todo) > 0 {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		f.mu.Lock()
		n := min(f.batch, len(todo))
		f.mu.Unlock()
		batch := todo[:n]
		err := f.fetchBatch(ctx, url, batch, &res)
		if err == nil {
			singleFailures = 0
			todo = todo[n:]
			f.mu.Lock()
			f.batch = min(2*f.batch, MaxHashQueryBatch)
			f.mu.Unlock()
			continue
		}
		var fatal *fatalStoreError
		if errors.As(err, &fatal) || ctx.Err() != nil {
			return res, err
		}
		if n == 1 {
			// One digest the peer cannot serve: remember it and go on,
			// unless the peer fails every time.
			if singleFailures++; singleFailures >= 3 {
				return res, fmt.Errorf("recon: fetching from %s: %w", peer.Address, err)
			}
			f.Logger.Warn("recon: hashquery for one key failed", "peer", peer.Address, "digest", fmt.Sprintf("%x", batch[0]), "err", err)
			f.remember(batch)
			todo = todo[1:]
			continue
		}
		f.mu.Lock()
		f.batch = max(n/2, 1)
		f.mu.Unlock()
		f.Logger.Debug("recon: hashquery batch failed, halving", "peer", peer.Address, "batch", n, "err", err)
		if !retryable(err) {
			return res, fmt.Errorf("recon: fetching from %s: %w", peer.Address, err)
		}
	}
	return res, nil
}

// fatalStoreError is a store callback error that stops the fetch.
type fatalStoreError struct{ err error }

func (e *fatalStoreError) Error() string { return "recon: storing a fetched key: " + e.err.Error() }
func (e *fatalStoreError) Unwrap() error { return e.err }

// httpStatusError is a non-200 hashquery answer.
type httpStatusError struct{ status int }

func (e *httpStatusError) Error() string { return fmt.Sprintf("HTTP status %d", e.status) }

// retryable reports whether a smaller batch might succeed where this failed.
func retryable(err error) bool {
	var se *httpStatusError
	if errors.As(err, &se) {
		return se.status == http.StatusRequestEntityTooLarge || se.status >= 500
	}
	return errors.Is(err, errResponseTooLarge) || errors.Is(err, ErrProtocol) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded) || isTimeout(err)
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

func (f *HashQueryFetcher) remember(ds [][16]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	for _, d := range ds {
		f.rejected.add(d, now)
	}
}

func (f *HashQueryFetcher) fetchBatch(ctx context.Context, url string, batch [][16]byte, res *FetchResult) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(MarshalHashQueryRequest(batch)))
	if err != nil {
		return fmt.Errorf("recon: hashquery request: %w", err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := f.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return &httpStatusError{status: resp.StatusCode}
	}
	lim := f.Limits
	lim.MaxKeys = len(batch)
	var received, rejected, unchanged, changed int
	served := make(map[[16]byte]bool)
	err = ReadHashQueryResponse(resp.Body, lim, func(key []byte) error {
		received++
		if f.KeyDigest != nil {
			if d, err := f.KeyDigest(key); err == nil {
				served[d] = true
			}
		}
		if err := f.Store(ctx, key); err != nil {
			switch {
			case errors.Is(err, ErrUnchanged):
				unchanged++
			case errors.Is(err, ErrRejected):
				rejected++
			case errors.Is(err, ErrChangedByPolicy):
			default:
				return &fatalStoreError{err}
			}
			if errors.Is(err, ErrChangedByPolicy) {
				changed++
			}
			if f.KeyDigest != nil {
				if d, err := f.KeyDigest(key); err == nil {
					served[d] = false // served, but asking again brings nothing
				}
			}
			return nil
		}
		return nil
	})
	res.Received += received
	res.Rejected += rejected
	res.Unchanged += unchanged
	res.Changed += changed
	res.Stored += received - rejected - unchanged
	if err != nil {
		return err
	}
	res.Requested += len(batch)
	// Remember what we will not get by asking again.
	switch {
	case f.KeyDigest != nil:
		var forget [][16]byte
		for _, d := range batch {
			if ok, seen := served[d]; !seen || !ok {
				forget = append(forget, d)
			}
		}
		f.remember(forget)
	case rejected > 0 || changed > 0 || received < len(batch):
		f.remember(batch)
	}
	return nil
}

// boundedSet remembers digests for a while, forgetting the oldest first
// once full.
type boundedSet struct {
	cap   int
	ttl   time.Duration
	at    map[[16]byte]time.Time
	order [][16]byte // insertion order, a ring once full
	next  int
}

func newBoundedSet(cap int, ttl time.Duration) *boundedSet {
	return &boundedSet{cap: cap, ttl: ttl, at: make(map[[16]byte]time.Time)}
}

func (s *boundedSet) has(d [16]byte, now time.Time) bool {
	t, ok := s.at[d]
	return ok && now.Sub(t) < s.ttl
}

func (s *boundedSet) add(d [16]byte, now time.Time) {
	if _, ok := s.at[d]; ok {
		s.at[d] = now
		return
	}
	if len(s.order) < s.cap {
		s.order = append(s.order, d)
	} else {
		delete(s.at, s.order[s.next])
		s.order[s.next] = d
		s.next = (s.next + 1) % s.cap
	}
	s.at[d] = now
}

func (s *boundedSet) len() int { return len(s.at) }
