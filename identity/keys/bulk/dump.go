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
	// Keys is how many keys were written, into Files files.
	Keys, Files int
	// Skipped counts the keys left out because gpg cannot read them, by
	// reason ("malformed", "unknown algorithm", "unreadable version (v6
	// keys among them)").
	Skipped map[string]int
}

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
// overwriting a file), from one consistent snapshot of the store. Keys
// gpg cannot read are left out, logged to log and counted. It returns
// the summary also when it fails.
func Dump(ctx context.Context, store keys.Lister, dir string, perFile int, log *slog.Logger) (*DumpSummary, error) {
	w := &dumpWriter{dir: dir, perFile: perFile, log: log, sum: &DumpSummary{Skipped: map[string]int{}}}
	err := store.DumpKeys(ctx, w.add)
	if cerr := w.close(); err == nil {
		err = cerr
	}
	return w.sum, err
}

// dumpCheck is why a stored key stays out of a dump, or "" when it goes
// in: gpg stops reading a whole file at one packet it cannot read, so
// every key must pass pgp.CheckKey (framing and structure, no signature
// checks).
func dumpCheck(packets []byte) string {
	k, err := pgp.ParseKey(packets)
	if err == nil {
		err = pgp.CheckKey(k)
	}
	switch {
	case err == nil:
		return ""
	case errors.Is(err, pgp.ErrUnknownVersion):
		return "unreadable version (v6 keys among them)"
	case errors.Is(err, pgp.ErrUnknownAlgorithm):
		return "unknown algorithm"
	}
	return "malformed"
}

// dumpWriter spreads keys over numbered dump files.
type dumpWriter struct {
	dir     string
	perFile int
	f       *os.File
	bw      *bufio.Writer
	inFile  int
	log     *slog.Logger
	sum     *DumpSummary
}

func (w *dumpWriter) add(packets []byte) error {
	if reason := dumpCheck(packets); reason != "" {
		w.sum.Skipped[reason]++
		fp := ""
		if k, err := pgp.ParseKey(packets); err == nil {
			fp = fmt.Sprintf("%X", k.Fingerprint())
		}
		w.log.Warn("dump: skipping a key gpg cannot read", "fingerprint", fp, "reason", reason)
		return nil
	}
	if w.f == nil || w.inFile == w.perFile {
		if err := w.close(); err != nil {
			return err
		}
		name := filepath.Join(w.dir, fmt.Sprintf("sks-dump-%04d.pgp", w.sum.Files))
		f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		w.f, w.bw, w.inFile = f, bufio.NewWriterSize(f, 1<<20), 0
		w.sum.Files++
	}
	if _, err := w.bw.Write(packets); err != nil {
		return err
	}
	w.inFile++
	w.sum.Keys++
	return nil
}

func (w *dumpWriter) close() error {
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
