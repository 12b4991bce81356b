// Package bulk loads OpenPGP keys in bulk: SKS dump files (concatenated
// binary keys) and armored key files, through the keys Service's policy
// on all cores, written to the store in batches while the next batch is
// being parsed (Load); re-runs the policy over every stored key, writing
// back the keys it changes (Repair); and writes every stored key that gpg
// can read as SKS dump files (Dump).
//
// It owns the pipelines and their counts (Progress while a load runs,
// Summary, RepairSummary and DumpSummary when done); it does not own the key policy
// or the upload path (package keys), nor how progress and the summaries
// are shown (the command that runs them).
package bulk

import (
	"context"
	"io"
	"os"
	"sync/atomic"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
)

// BatchSize is how many keys go into one store transaction. Larger
// batches cost fewer round trips; each is all-or-nothing, so a killed
// load leaves whole batches behind, never part of a key.
const BatchSize = 1000

// Writer is what loading needs of the keys Service (keys.Service is
// one): the key policy on all cores, and batches written.
type Writer interface {
	Process(ctx context.Context, r *pgp.Reader, workers int, fn func(pgp.Result) error) error
	AddKeys(ctx context.Context, batch []*pgp.Key) ([]keys.Change, error)
}

// Progress is what a load has done so far; it may be read while the load
// runs.
type Progress struct {
	// Files is how many files were read to the end; Keys how many keys
	// were stored or rejected; Bytes how many bytes of the files were
	// read.
	Files, Keys, Bytes atomic.Int64
}

// Summary is what happened to every key of a load.
type Summary struct {
	// Changes counts the stored keys by what storing them changed.
	Changes map[keys.Change]int
	// Rejected counts the keys the policy refused, by
	// pgp.RejectionReason.
	Rejected map[string]int
	// Dropped sums the packets the policy dropped from the keys.
	Dropped pgp.Report
}

// Load reads files in order through w's policy with workers workers and
// writes the keys in batches of BatchSize, updating progress (which may
// be nil) as it goes. It returns the summary of what it did, also when it
// stops at the first error (of reading a file, or of writing a batch).
func Load(ctx context.Context, w Writer, workers int, files []string, progress *Progress) (*Summary, error) {
	if progress == nil {
		progress = new(Progress)
	}
	l := &loader{
		keys: w, workers: workers, progress: progress,
		summary: &Summary{Changes: map[keys.Change]int{}, Rejected: map[string]int{}},
	}
	err := l.loadFiles(ctx, files)
	return l.summary, err
}

// loader is one load's state. The summary is written from the writer
// goroutine (changes) and the reader's callback (rejections, drops); each
// map has one writer.
type loader struct {
	keys     Writer
	workers  int
	progress *Progress
	summary  *Summary
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
			for _, c := range changes {
				l.summary.Changes[c]++
			}
			l.progress.Keys.Add(int64(len(b)))
		}
		written <- err
	}()

	var readErr error
	batch := make([]*pgp.Key, 0, BatchSize)
	for i, name := range files {
		if readErr = l.loadFile(ctx, name, &batch, batches); readErr != nil {
			break
		}
		l.progress.Files.Store(int64(i + 1))
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
	r := pgp.NewReader(&countingReader{r: f, n: &l.progress.Bytes})
	return l.keys.Process(ctx, r, l.workers, func(res pgp.Result) error {
		l.summary.Dropped.Add(res.Report)
		if res.Err != nil {
			l.summary.Rejected[pgp.RejectionReason(res.Err)]++
			l.progress.Keys.Add(1)
			return nil
		}
		*batch = append(*batch, res.Key)
		if len(*batch) == BatchSize {
			select {
			case batches <- *batch:
			case <-ctx.Done():
				return ctx.Err()
			}
			*batch = make([]*pgp.Key, 0, BatchSize)
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
