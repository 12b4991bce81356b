package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/pgp"
)

func runDump(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "dump", "dump --dir DIR [flags]\n\nWrites every stored key as SKS-format dump files (concatenated binary keys,\nsks-dump-NNNN.pgp), from one consistent snapshot of the store. The files\nload into kith load and into SKS. Keys gpg cannot read (malformed, or v6,\nwhich gpg 2.2 stops reading a whole file at) are skipped and counted.")
	dir := fs.String("dir", "", "`directory` to write the dump files to (created if missing; must hold no dump yet)")
	perFile := fs.Int("keys-per-file", 15000, "`number` of keys in each dump file")
	cfg, rest, err := loadToolConfig(fs, args, env.environ)
	if err != nil {
		return err
	}
	if *dir == "" || len(rest) > 0 {
		return fmt.Errorf("%w: dump takes --dir DIR and no arguments", errUsage)
	}
	if *perFile <= 0 {
		return fmt.Errorf("%w: --keys-per-file must be positive", errUsage)
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	if old, _ := filepath.Glob(filepath.Join(*dir, "sks-dump-*.pgp")); len(old) > 0 {
		return fmt.Errorf("dump: %s already holds a dump (%s); choose an empty directory", *dir, filepath.Base(old[0]))
	}
	log := newLogger(env.stderr, cfg)
	st, err := openSharedStore(ctx, cfg, log, postgres.Options{SkipMigrate: true})
	if err != nil {
		return err
	}
	defer st.Close()

	w := &dumpWriter{dir: *dir, perFile: *perFile, log: log, skipped: map[string]int{}}
	err = st.DumpKeys(ctx, w.add)
	if cerr := w.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	fmt.Fprintf(env.stdout, "dumped %d keys into %d files in %s\n", w.keys, w.files, *dir)
	if n := w.skippedTotal(); n > 0 {
		reasons := make([]string, 0, len(w.skipped))
		for r, c := range w.skipped {
			reasons = append(reasons, fmt.Sprintf("%s: %d", r, c))
		}
		sort.Strings(reasons)
		fmt.Fprintf(env.stdout, "skipped %d keys gpg cannot read (%s); kith repair fixes malformed ones\n", n, strings.Join(reasons, ", "))
	}
	return nil
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
	keys    int
	files   int
	log     *slog.Logger
	skipped map[string]int // keys left out, by reason
}

func (w *dumpWriter) skippedTotal() int {
	n := 0
	for _, c := range w.skipped {
		n += c
	}
	return n
}

func (w *dumpWriter) add(packets []byte) error {
	if reason := dumpCheck(packets); reason != "" {
		w.skipped[reason]++
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
		name := filepath.Join(w.dir, fmt.Sprintf("sks-dump-%04d.pgp", w.files))
		f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		w.f, w.bw, w.inFile = f, bufio.NewWriterSize(f, 1<<20), 0
		w.files++
	}
	if _, err := w.bw.Write(packets); err != nil {
		return err
	}
	w.inFile++
	w.keys++
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
