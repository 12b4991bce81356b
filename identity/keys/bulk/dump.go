package bulk

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
)

// DumpSummary is what a dump wrote and left out.
type DumpSummary struct {
	// Keys is how many keys gpg and SKS read were written, into Files
	// files.
	Keys, Files int
	// V6Keys is how many version 6 keys were written, into V6Files files
	// of their own (see Dump).
	V6Keys, V6Files int
	// Skipped counts the keys left out because they are not well formed,
	// by reason ("malformed", "unknown algorithm", "unreadable version").
	Skipped map[string]int
}

// V6Dir is the subdirectory of a dump that holds its version 6 keys.
const V6Dir = "v6"

// SkippedTotal is how many keys were left out.
func (s *DumpSummary) SkippedTotal() int {
	n := 0
	for _, c := range s.Skipped {
		n += c
	}
	return n
}

// Dump writes every key in store as SKS-format dump files in dir
// (concatenated binary keys, sks-dump-NNNN.pgp, perFile keys each, never
// overwriting a file), from one consistent snapshot of the store. gpg
// stops reading a whole file at one packet it cannot read, and SKS's
// loader reads every *.pgp file of the directory it is given, so the
// version 6 keys go into files of their own, v6/sks-dump-v6-NNNN.pgp
// (V6Dir), which kith load and Hockeypuck read. Keys that are not well
// formed are left out, logged to log and counted. It returns the summary
// also when it fails.
func Dump(ctx context.Context, store keys.Lister, dir string, perFile int, log *slog.Logger) (*DumpSummary, error) {
	sum := &DumpSummary{Skipped: map[string]int{}}
	w := &dumpWriter{
		files: dumpFiles{dir: dir, name: "sks-dump-%04d.pgp", perFile: perFile, keys: &sum.Keys, n: &sum.Files},
		v6:    dumpFiles{dir: filepath.Join(dir, V6Dir), name: "sks-dump-v6-%04d.pgp", perFile: perFile, keys: &sum.V6Keys, n: &sum.V6Files},
		log:   log, sum: sum,
	}
	err := store.DumpKeys(ctx, w.add)
	if cerr := w.files.close(); err == nil {
		err = cerr
	}
	if cerr := w.v6.close(); err == nil {
		err = cerr
	}
	return w.sum, err
}

// dumpCheck is why a stored key stays out of a dump, or "" when it goes
// in, and whether it goes in the v6 files: every key must pass
// pgp.CheckKey, or be a v6 key that passes pgp.CheckWellFormed (framing
// and structure, no signature checks).
func dumpCheck(packets []byte) (reason string, v6 bool) {
	k, err := pgp.ParseKey(packets)
	if err == nil {
		if err = pgp.CheckKey(k); errors.Is(err, pgp.ErrUnknownVersion) && pgp.CheckWellFormed(k) == nil {
			return "", true
		}
	}
	switch {
	case err == nil:
		return "", false
	case errors.Is(err, pgp.ErrUnknownVersion):
		return "unreadable version", false
	case errors.Is(err, pgp.ErrUnknownAlgorithm):
		return "unknown algorithm", false
	}
	return "malformed", false
}

// dumpWriter spreads keys over the numbered dump files.
type dumpWriter struct {
	files, v6 dumpFiles
	log       *slog.Logger
	sum       *DumpSummary
}

// dumpFiles is one series of numbered dump files.
type dumpFiles struct {
	dir, name string // name: a format of the file's number
	perFile   int
	f         *os.File
	bw        *bufio.Writer
	inFile    int
	keys, n   *int // keys written, files made
}

func (w *dumpWriter) add(packets []byte) error {
	reason, v6 := dumpCheck(packets)
	if reason != "" {
		w.sum.Skipped[reason]++
		fp := ""
		if k, err := pgp.ParseKey(packets); err == nil {
			fp = fmt.Sprintf("%X", k.Fingerprint())
		}
		w.log.Warn("dump: skipping a key that is not well formed", "fingerprint", fp, "reason", reason)
		return nil
	}
	if v6 {
		return w.v6.add(packets)
	}
	return w.files.add(packets)
}

func (d *dumpFiles) add(packets []byte) error {
	if d.f == nil || d.inFile == d.perFile {
		if err := d.close(); err != nil {
			return err
		}
		if err := os.MkdirAll(d.dir, 0o755); err != nil {
			return err
		}
		name := filepath.Join(d.dir, fmt.Sprintf(d.name, *d.n))
		f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		d.f, d.bw, d.inFile = f, bufio.NewWriterSize(f, 1<<20), 0
		*d.n++
	}
	if _, err := d.bw.Write(packets); err != nil {
		return err
	}
	d.inFile++
	*d.keys++
	return nil
}

func (w *dumpFiles) close() error {
	if w.f == nil {
		return nil
	}
	err := w.bw.Flush()
	if serr := w.f.Sync(); err == nil {
		err = serr
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	return err
}
