package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kith-keyserver/kith/identity/keys/bulk"
	"github.com/kith-keyserver/kith/identity/postgres"
)

func runDump(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "dump", "dump --dir DIR [flags]\n\nWrites every stored key as SKS-format dump files (concatenated binary keys,\nsks-dump-NNNN.pgp), from one consistent snapshot of the store. The files\nload into kith load and into SKS. Version 6 keys, which gpg and SKS cannot\nread (gpg stops reading a whole file at one), go into DIR/v6/sks-dump-v6-NNNN.pgp,\nfor kith load and Hockeypuck. Keys that are not well formed are skipped and counted.")
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
	// A dump of v6 keys alone has files only in DIR/v6, which a second
	// dump would fail on half-way (files are never overwritten).
	for _, pattern := range []string{filepath.Join(*dir, "sks-dump-*.pgp"), filepath.Join(*dir, bulk.V6Dir, "sks-dump-v6-*.pgp")} {
		if old, _ := filepath.Glob(pattern); len(old) > 0 {
			return fmt.Errorf("dump: %s already holds a dump (%s); choose an empty directory", *dir, old[0])
		}
	}
	log := newLogger(env.stderr, cfg)
	st, err := openExistingStore(ctx, cfg, log, postgres.Options{SkipMigrate: true})
	if err != nil {
		return err
	}
	defer st.Close()
	// Only once the store is open: a dump from no store makes nothing.
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return fmt.Errorf("dump: %w", err)
	}

	w, err := bulk.Dump(ctx, st.Store, *dir, *perFile, log)
	if err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	fmt.Fprintf(env.stdout, "dumped %d keys into %d files in %s\n", w.Keys, w.Files, *dir)
	if w.V6Keys > 0 {
		fmt.Fprintf(env.stdout, "dumped %d v6 keys into %d files in %s\n", w.V6Keys, w.V6Files, filepath.Join(*dir, bulk.V6Dir))
	}
	if n := w.SkippedTotal(); n > 0 {
		reasons := make([]string, 0, len(w.Skipped))
		for r, c := range w.Skipped {
			reasons = append(reasons, fmt.Sprintf("%s: %d", r, c))
		}
		sort.Strings(reasons)
		fmt.Fprintf(env.stdout, "skipped %d keys that are not well formed (%s); kith repair fixes malformed ones\n", n, strings.Join(reasons, ", "))
	}
	return nil
}
