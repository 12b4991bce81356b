// submit.go: the log's end of tlog-witness: asking each witness of a
// policy to cosign a new checkpoint, within a bound, and merging the
// cosignatures that arrive.

package witness

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/sumdb/note"
	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/identity/tlog/policy"
)

// DefaultTimeout bounds one round of add-checkpoint requests: a
// checkpoint is published with the cosignatures that arrived by then
// (fail open).
const DefaultTimeout = 5 * time.Second

// retryEvery is how often a published checkpoint that lacks some
// witness's cosignature is submitted again while the log does not grow.
const retryEvery = time.Minute

// maxResponse bounds a witness's answer.
const maxResponse = 64 << 10

// SubmitterOptions configures a Submitter.
type SubmitterOptions struct {
	// Timeout bounds a round of requests; zero means DefaultTimeout.
	Timeout time.Duration
	// Client makes the requests; nil means one with no timeout of its
	// own (Timeout bounds each round).
	Client *http.Client
	// Logger gets refusals and failures; nil discards them.
	Logger *slog.Logger
	// Registerer gets the metrics; nil records none.
	Registerer prometheus.Registerer
}

// Submitter asks the witnesses of a policy (those with a URL, their
// submission prefix) to cosign the log's checkpoints. It implements
// tlog.Witnesses.
type Submitter struct {
	policy  *policy.Policy
	client  *http.Client
	timeout time.Duration
	log     *slog.Logger
	metrics *metrics

	mu sync.Mutex
	// known is each witness's size as last learned (a cosignature or a
	// 409), by index in the policy's Witnesses.
	known map[int]int64
	// retried is when a checkpoint of this size was last submitted again.
	retried     time.Time
	retriedSize int64
}

var _ tlog.Witnesses = (*Submitter)(nil)

// NewSubmitter returns the submitter for the witnesses of p.
func NewSubmitter(p *policy.Policy, opts SubmitterOptions) (*Submitter, error) {
	n := 0
	for _, w := range p.Witnesses {
		if w.URL != "" {
			n++
		}
	}
	if n == 0 {
		return nil, errors.New("witness: the policy names no witness with a URL to submit checkpoints to")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Client == nil {
		opts.Client = &http.Client{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Submitter{policy: p, client: opts.Client, timeout: opts.Timeout, log: opts.Logger,
		metrics: newMetrics(opts.Registerer, p), known: map[int]int64{}}, nil
}

// Witness asks every witness (with a URL, and whose cosignature signed
// lacks) to cosign signed, the log's checkpoint c,
// whose previous checkpoint covered prev entries; prove returns the
// consistency proof from an older size to c. It returns signed with the
// valid cosignatures that arrived within the timeout merged in; never an
// error: a witness that refuses or is down leaves its cosignature out.
func (s *Submitter) Witness(ctx context.Context, signed []byte, c tlog.Checkpoint, prev int64, prove func(old int64) (xtlog.TreeProof, error)) []byte {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	type result struct {
		i     int
		lines []byte
	}
	results := make(chan result)
	n := 0
	// A witness whose cosignature signed carries already (submitted
	// again after a round that missed others) is not asked twice.
	have := s.policy.Cosigners(signed)
	for i, w := range s.policy.Witnesses {
		if w.URL == "" || have[i] {
			continue
		}
		n++
		go func() {
			lines, err := s.submit(ctx, i, signed, c, prev, prove)
			if err != nil {
				s.log.Warn("tlog: a witness did not cosign the checkpoint", "witness", w.Name, "url", w.URL, "size", c.Size, "err", err)
			}
			results <- result{i, lines}
		}()
	}
	var verifiers []note.Verifier
	var extra []byte
	for range n {
		r := <-results
		if r.lines != nil {
			// Each answer holds a valid cosignature (addCheckpoint checked
			// it); each ends its last line, so that no two answers run
			// into one line.
			extra = append(extra, r.lines...)
			if !bytes.HasSuffix(extra, []byte("\n")) {
				extra = append(extra, '\n')
			}
			verifiers = append(verifiers, s.policy.Witnesses[r.i].Verifier)
		}
	}
	merged, err := tlog.MergeSignatures(signed, extra, verifiers...)
	if err != nil {
		s.log.Warn("tlog: a witness's cosignatures do not merge", "err", err)
		merged = signed
	}
	s.record(merged, c.Size)
	return merged
}

// Retry reports whether the published checkpoint signed, which the log
// has not outgrown, should be submitted again: when some witness did not
// cosign it, at most once a minute.
func (s *Submitter) Retry(signed []byte) bool {
	cosigned := s.policy.Cosigners(signed)
	missing := false
	for i, w := range s.policy.Witnesses {
		if w.URL != "" && !cosigned[i] {
			missing = true
		}
	}
	if !missing {
		return false
	}
	c, err := tlog.ParseCheckpoint(noteText(signed))
	if err != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.Size == s.retriedSize && time.Since(s.retried) < retryEvery {
		return false
	}
	s.retried, s.retriedSize = time.Now(), c.Size
	return true
}

// noteText is the text of a signed note (nil if it is not one).
func noteText(signed []byte) []byte {
	text, _, _ := tlog.SplitNote(signed)
	return text
}

// record updates the metrics after a round.
func (s *Submitter) record(merged []byte, size int64) {
	if s.metrics == nil {
		return
	}
	cosigned := s.policy.Cosigners(merged)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, w := range s.policy.Witnesses {
		if w.URL == "" {
			continue
		}
		known := s.known[i]
		if cosigned[i] {
			known = size
		}
		s.metrics.size.WithLabelValues(w.Name).Set(float64(known))
		s.metrics.behind.WithLabelValues(w.Name).Set(float64(size - known))
	}
	q := 0.0
	if s.policy.Satisfied(cosigned) {
		q = 1
	}
	s.metrics.quorum.Set(q)
}

// errConflict carries a witness's size from a 409.
type errConflict struct{ size int64 }

func (e errConflict) Error() string { return fmt.Sprintf("the witness holds size %d", e.size) }

// submit asks witness i, once with the size it is thought to hold and
// once more with the size it answers in a 409.
func (s *Submitter) submit(ctx context.Context, i int, signed []byte, c tlog.Checkpoint, prev int64, prove func(old int64) (xtlog.TreeProof, error)) ([]byte, error) {
	w := s.policy.Witnesses[i]
	s.mu.Lock()
	old, ok := s.known[i]
	s.mu.Unlock()
	if !ok || old > c.Size {
		old = prev
	}
	for attempt := 0; ; attempt++ {
		lines, err := s.addCheckpoint(ctx, w, signed, c, old, prove)
		var conflict errConflict
		if errors.As(err, &conflict) {
			s.setKnown(i, conflict.size)
			if conflict.size > c.Size {
				s.metrics.request(w.Name, "ahead")
				return nil, fmt.Errorf("the witness cosigned a larger tree (%d) than this checkpoint's (%d): the log lost entries it had published", conflict.size, c.Size)
			}
			if attempt == 0 {
				old = conflict.size
				continue
			}
		}
		if err != nil {
			return nil, err
		}
		s.setKnown(i, c.Size)
		return lines, nil
	}
}

func (s *Submitter) setKnown(i int, size int64) {
	s.mu.Lock()
	s.known[i] = size
	s.mu.Unlock()
}

// addCheckpoint makes one add-checkpoint request.
func (s *Submitter) addCheckpoint(ctx context.Context, w policy.Witness, signed []byte, c tlog.Checkpoint, old int64, prove func(old int64) (xtlog.TreeProof, error)) ([]byte, error) {
	body := fmt.Appendf(nil, "old %d\n", old)
	if old > 0 && old < c.Size {
		proof, err := prove(old)
		if err != nil {
			return nil, fmt.Errorf("consistency proof from %d to %d: %w", old, c.Size, err)
		}
		for _, h := range proof {
			body = append(append(body, base64.StdEncoding.EncodeToString(h[:])...), '\n')
		}
	}
	body = append(append(body, '\n'), signed...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(w.URL, "/")+"/add-checkpoint", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	resp, err := s.client.Do(req)
	if err != nil {
		s.metrics.request(w.Name, "unreachable")
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		s.metrics.request(w.Name, "unreachable")
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		// A 200 counts only with a valid cosignature by this witness: a
		// malformed answer would otherwise spoil the merge of every other
		// witness's cosignature with it.
		merged, err := tlog.MergeSignatures(signed, answer, w.Verifier)
		if _, ok := w.Verifier.CosignedAt(merged); err != nil || !ok {
			s.metrics.request(w.Name, "bad_answer")
			return nil, fmt.Errorf("200 without a valid cosignature by the witness's key: %q", clipAnswer(answer))
		}
		s.metrics.request(w.Name, "cosigned")
		return answer, nil
	case http.StatusConflict:
		size, err := strconv.ParseInt(strings.TrimSuffix(string(answer), "\n"), 10, 64)
		if err != nil || size < 0 {
			s.metrics.request(w.Name, "error")
			return nil, fmt.Errorf("409 without a size: %q", answer)
		}
		if size == old && old == c.Size {
			// The witness holds the size asked: its 409 says that it
			// cosigned another root for it (C2SP tlog-witness), a fork.
			s.metrics.request(w.Name, "inconsistent")
			return nil, fmt.Errorf("the witness cosigned another root for size %d (409): the log showed it a fork", c.Size)
		}
		s.metrics.request(w.Name, "conflict")
		return nil, errConflict{size}
	case http.StatusNotFound:
		s.metrics.request(w.Name, "unknown_log")
		return nil, fmt.Errorf("the witness does not know the log %s (404): ask its operator to add the log key", c.Origin)
	case http.StatusForbidden:
		s.metrics.request(w.Name, "forbidden")
		return nil, fmt.Errorf("the witness does not trust the log's key or does not know the log (403): ask its operator to add the log key")
	case http.StatusUnprocessableEntity:
		s.metrics.request(w.Name, "inconsistent")
		return nil, fmt.Errorf("the witness finds the checkpoint of %d inconsistent with the one of %d it cosigned (422): %s", c.Size, old, bytes.TrimSpace(answer))
	default:
		s.metrics.request(w.Name, "error")
		return nil, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(answer))
	}
}

// clipAnswer is the start of a witness's answer, for an error.
func clipAnswer(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}

// metrics holds the Submitter's collectors; a nil *metrics records
// nothing.
type metrics struct {
	requests *prometheus.CounterVec
	size     *prometheus.GaugeVec
	behind   *prometheus.GaugeVec
	quorum   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, p *policy.Policy) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kith_log_witness_requests_total",
			Help: "add-checkpoint requests to each witness by outcome (cosigned, conflict, unknown_log, forbidden, inconsistent, ahead, unreachable, error, bad_answer: a 200 without a valid cosignature).",
		}, []string{"witness", "outcome"}),
		size: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kith_log_witness_cosigned_size",
			Help: "The tree size each witness last cosigned, as this node last learned it.",
		}, []string{"witness"}),
		behind: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kith_log_witness_behind_entries",
			Help: "Entries of the checkpoint this node signed last that each witness has not cosigned (0: it cosigned that checkpoint).",
		}, []string{"witness"}),
		quorum: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kith_log_checkpoint_witnessed",
			Help: "1 when the checkpoint this node signed last carries the quorum of log.witness_policy, else 0.",
		}),
	}
	reg.MustRegister(m.requests, m.size, m.behind, m.quorum)
	for _, w := range p.Witnesses {
		if w.URL != "" {
			m.size.WithLabelValues(w.Name)
			m.behind.WithLabelValues(w.Name)
		}
	}
	return m
}

func (m *metrics) request(witness, outcome string) {
	if m != nil {
		m.requests.WithLabelValues(witness, outcome).Inc()
	}
}
