package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/term"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/pgp"
)

// loadBatch is how many keys go into one store transaction. Larger batches
// cost fewer round trips; each is all-or-nothing, so a killed load leaves
// whole batches behind, never part of a key.
const loadBatch = 1000

// loadGCPercent is the garbage collector's target while a load runs,
// unless GOGC is set: its live heap is a few batches, so collecting a
// quarter as often costs little memory (~160 MB peak for 50,000 keys) and
// saves ~8% of the load's time (signature checks allocate a lot).
const loadGCPercent = 400

func runLoad(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "load", "load [flags] FILE...\n\nLoads SKS dump files (concatenated binary keys) and armored key files.\nEvery key goes through the key policy and merges with what is stored;\nloading the same files again changes nothing.")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "keys parsed and checked in parallel by this many `workers`")
	cfg, files, err := loadToolConfig(fs, args, env.environ, "public_url", "listen")
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("%w: load needs at least one FILE", errUsage)
	}
	var total int64
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			return fmt.Errorf("load: %w", err)
		}
		total += st.Size()
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		defer debug.SetGCPercent(debug.SetGCPercent(loadGCPercent))
	}
	log := newLogger(env.stderr, cfg)
	st, err := openSharedStore(ctx, cfg, log, postgres.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	// Loaded keys that identities name refresh their links as they land.
	ks, err := newToolKeyService(st.Store, cfg, pgp.DefaultPolicy(), log)
	if err != nil {
		return err
	}

	p := newLoadProgress(env.stderr, len(files), total)
	stopProgress := p.run(ctx, log)
	l := &loader{keys: ks, workers: *workers, progress: p, summary: newLoadSummary()}
	err = l.loadFiles(ctx, files)
	stopProgress()
	l.summary.write(env.stdout, time.Since(p.start))
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	return nil
}

// keyBatchWriter is what loading needs of the keys Service: the key
// policy on all cores, and batches written.
type keyBatchWriter interface {
	Process(ctx context.Context, r *pgp.Reader, workers int, fn func(pgp.Result) error) error
	AddKeys(ctx context.Context, batch []*pgp.Key) ([]keys.Change, error)
}

// loader reads key files, runs the policy on all cores and writes batches
// to the store while the next batch is being parsed.
type loader struct {
	keys     keyBatchWriter
	workers  int
	progress *loadProgress
	summary  *loadSummary
}

func (l *loader) loadFiles(ctx context.Context, files []string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []*pgp.Key, 2)
	written := make(chan error, 1)
	go func() {
		var err error
		for b := range batches {
			if err != nil {
				continue // drain
			}
			var changes []keys.Change
			changes, err = l.keys.AddKeys(ctx, b)
			if err != nil {
				cancel()
				continue
			}
			l.summary.addChanges(changes)
			l.progress.keys.Add(int64(len(b)))
		}
		written <- err
	}()

	var readErr error
	batch := make([]*pgp.Key, 0, loadBatch)
	for i, name := range files {
		if readErr = l.loadFile(ctx, name, &batch, batches); readErr != nil {
			break
		}
		l.progress.files.Store(int64(i + 1))
	}
	if readErr == nil && len(batch) > 0 {
		select {
		case batches <- batch:
		case <-ctx.Done():
			readErr = ctx.Err()
		}
	}
	close(batches)
	writeErr := <-written
	if writeErr != nil {
		return writeErr
	}
	return readErr
}

func (l *loader) loadFile(ctx context.Context, name string, batch *[]*pgp.Key, batches chan<- []*pgp.Key) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	r := pgp.NewReader(&countingReader{r: f, n: &l.progress.bytes})
	return l.keys.Process(ctx, r, l.workers, func(res pgp.Result) error {
		l.summary.addDropped(res.Report)
		if res.Err != nil {
			l.summary.addRejected(res.Err)
			l.progress.keys.Add(1)
			return nil
		}
		*batch = append(*batch, res.Key)
		if len(*batch) == loadBatch {
			select {
			case batches <- *batch:
			case <-ctx.Done():
				return ctx.Err()
			}
			*batch = make([]*pgp.Key, 0, loadBatch)
		}
		return nil
	})
}

// countingReader counts the bytes read through it, for progress.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// loadSummary counts what happened to every key.
type loadSummary struct {
	changes  map[keys.Change]int
	rejected map[string]int
	dropped  pgp.Report
}

func newLoadSummary() *loadSummary {
	return &loadSummary{changes: map[keys.Change]int{}, rejected: map[string]int{}}
}

// The summary is written from the writer goroutine (changes) and the
// reader's callback (rejections, drops); each map has one writer.
func (s *loadSummary) addChanges(cs []keys.Change) {
	for _, c := range cs {
		s.changes[c]++
	}
}

func (s *loadSummary) addRejected(err error) { s.rejected[pgp.RejectionReason(err)]++ }

func (s *loadSummary) addDropped(r pgp.Report) { s.dropped.Add(r) }

func (s *loadSummary) write(w io.Writer, took time.Duration) {
	var b strings.Builder
	n := 0
	for _, c := range s.changes {
		n += c
	}
	rejected := 0
	for _, c := range s.rejected {
		rejected += c
	}
	rate := 0.0
	if took > 0 {
		rate = float64(n+rejected) / took.Seconds()
	}
	fmt.Fprintf(&b, "loaded %d keys in %s (%.0f keys/s): %d inserted, %d updated, %d unchanged, %d rejected\n",
		n+rejected, took.Round(time.Millisecond), rate,
		s.changes[keys.Inserted], s.changes[keys.Updated], s.changes[keys.Unchanged], rejected)
	if n := s.changes[keys.Blocked] + s.changes[keys.Reduced]; n > 0 {
		fmt.Fprintf(&b, "  blocklist: %d refused, %d stored in part\n", s.changes[keys.Blocked], s.changes[keys.Reduced])
	}
	reasons := make([]string, 0, len(s.rejected))
	for r := range s.rejected {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(&b, "  rejected, %s: %d\n", r, s.rejected[r])
	}
	if s.dropped.Total() > 0 {
		fmt.Fprintf(&b, "  packets dropped by the policy: %s\n", s.dropped.String())
	}
	io.WriteString(w, b.String())
}

// loadProgress is what the progress display reads; the loader updates it.
type loadProgress struct {
	w           io.Writer
	tty         bool
	start       time.Time
	totalFiles  int
	totalBytes  int64
	files, keys atomic.Int64
	bytes       atomic.Int64
}

func newLoadProgress(w io.Writer, files int, bytes int64) *loadProgress {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	return &loadProgress{w: w, tty: tty, start: time.Now(), totalFiles: files, totalBytes: bytes}
}

// run shows progress until the returned stop function is called: a bar
// redrawn in place on a terminal, a log line every ten seconds otherwise.
func (p *loadProgress) run(ctx context.Context, log *slog.Logger) (stop func()) {
	every := 10 * time.Second
	if p.tty {
		every = 250 * time.Millisecond
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				if p.tty {
					fmt.Fprintf(p.w, "\r%s\n", p.line())
				}
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if p.tty {
					fmt.Fprintf(p.w, "\r%s", p.line())
				} else {
					log.Info("loading", "files", fmt.Sprintf("%d/%d", p.files.Load(), p.totalFiles),
						"keys", p.keys.Load(), "keys_per_second", int(p.rate()), "eta", p.eta().String())
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

func (p *loadProgress) rate() float64 {
	s := time.Since(p.start).Seconds()
	if s <= 0 {
		return 0
	}
	return float64(p.keys.Load()) / s
}

// eta extrapolates from the share of bytes read so far.
func (p *loadProgress) eta() time.Duration {
	read := p.bytes.Load()
	if read == 0 || p.totalBytes == 0 {
		return 0
	}
	elapsed := time.Since(p.start)
	left := time.Duration(float64(elapsed) * float64(p.totalBytes-read) / float64(read))
	return left.Round(time.Second)
}

func (p *loadProgress) line() string {
	frac := 0.0
	if p.totalBytes > 0 {
		frac = float64(p.bytes.Load()) / float64(p.totalBytes)
	}
	const width = 30
	fill := int(frac * width)
	if fill > width {
		fill = width
	}
	return fmt.Sprintf("[%s%s] %3.0f%%  files %d/%d  keys %d  %.0f keys/s  ETA %s ",
		strings.Repeat("=", fill), strings.Repeat(" ", width-fill), frac*100,
		p.files.Load(), p.totalFiles, p.keys.Load(), p.rate(), p.eta())
}
