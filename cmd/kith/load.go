package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/keys/bulk"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/pgp"
)

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
	st, err := openExistingStore(ctx, cfg, log, postgres.Options{})
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
	// Into an empty store, the search indexes are built once after the
	// data: sorting it all once costs less than updating them key by key.
	deferred, err := st.DeferIndexes(ctx)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	stopProgress := p.run(ctx, log)
	sum, err := bulk.Load(ctx, ks, *workers, files, &p.Progress)
	stopProgress()
	if deferred != nil {
		// Also when the load failed or was interrupted: the store must
		// not stay without them (a killed load leaves them recorded for
		// the next open of the store).
		log.Info("building the search indexes")
		if berr := deferred.Build(context.WithoutCancel(ctx)); berr != nil {
			err = errors.Join(err, berr)
		}
	}
	writeLoadSummary(env.stdout, sum, time.Since(p.start))
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	return nil
}

// writeLoadSummary prints what happened to every key.
func writeLoadSummary(w io.Writer, s *bulk.Summary, took time.Duration) {
	var b strings.Builder
	n := 0
	for _, c := range s.Changes {
		n += c
	}
	rejected := 0
	for _, c := range s.Rejected {
		rejected += c
	}
	rate := 0.0
	if took > 0 {
		rate = float64(n+rejected) / took.Seconds()
	}
	fmt.Fprintf(&b, "loaded %d keys in %s (%.0f keys/s): %d inserted, %d updated, %d unchanged, %d rejected\n",
		n+rejected, took.Round(time.Millisecond), rate,
		s.Changes[keys.Inserted], s.Changes[keys.Updated], s.Changes[keys.Unchanged], rejected)
	if n := s.Changes[keys.Blocked] + s.Changes[keys.Reduced]; n > 0 {
		fmt.Fprintf(&b, "  blocklist: %d refused, %d stored in part\n", s.Changes[keys.Blocked], s.Changes[keys.Reduced])
	}
	reasons := make([]string, 0, len(s.Rejected))
	for r := range s.Rejected {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(&b, "  rejected, %s: %d\n", r, s.Rejected[r])
	}
	if s.Dropped.Total() > 0 {
		fmt.Fprintf(&b, "  packets dropped by the policy: %s\n", s.Dropped.String())
	}
	io.WriteString(w, b.String())
}

// loadProgress is what the progress display reads; the loader updates it.
type loadProgress struct {
	w          io.Writer
	tty        bool
	start      time.Time
	totalFiles int
	totalBytes int64
	bulk.Progress
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
					log.Info("loading", "files", fmt.Sprintf("%d/%d", p.Files.Load(), p.totalFiles),
						"keys", p.Keys.Load(), "keys_per_second", int(p.rate()), "eta", p.eta().String())
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
	return float64(p.Keys.Load()) / s
}

// eta extrapolates from the share of bytes read so far.
func (p *loadProgress) eta() time.Duration {
	read := p.Bytes.Load()
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
		frac = float64(p.Bytes.Load()) / float64(p.totalBytes)
	}
	const width = 30
	fill := int(frac * width)
	if fill > width {
		fill = width
	}
	return fmt.Sprintf("[%s%s] %3.0f%%  files %d/%d  keys %d  %.0f keys/s  ETA %s ",
		strings.Repeat("=", fill), strings.Repeat(" ", width-fill), frac*100,
		p.Files.Load(), p.totalFiles, p.Keys.Load(), p.rate(), p.eta())
}
