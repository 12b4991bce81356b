package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kith-keyserver/kith/identity/postgres"
)

func runDump(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "dump", "dump --dir DIR [flags]\n\nWrites every stored key as SKS-format dump files (concatenated binary keys,\nsks-dump-NNNN.pgp), from one consistent snapshot of the store. The files\nload into kith load and into SKS.")
	dir := fs.String("dir", "", "`directory` to write the dump files to (created if missing; must hold no dump yet)")
	perFile := fs.Int("keys-per-file", 15000, "`number` of keys in each dump file")
	cfg, rest, err := loadConfig(fs, args, env.environ)
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

	w := &dumpWriter{dir: *dir, perFile: *perFile}
	err = st.DumpKeys(ctx, w.add)
	if cerr := w.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	fmt.Fprintf(env.stdout, "dumped %d keys into %d files in %s\n", w.keys, w.files, *dir)
	return nil
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
}

func (w *dumpWriter) add(packets []byte) error {
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
