package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/embedded"
)

// openedStore is the store a command works on, with whatever must be shut
// down after it.
type openedStore struct {
	*postgres.Store
	cluster *embedded.Cluster
}

// Close closes the store, then stops the embedded cluster if one runs.
func (o *openedStore) Close() {
	if o.Store != nil {
		o.Store.Close()
	}
	if o.cluster != nil {
		o.cluster.Stop()
	}
}

// errRestarting is what Ping says while the supervised embedded cluster
// starts its server again after a crash.
var errRestarting = errors.New("database restarting")

// Ping checks that the store answers; with the embedded cluster it first
// asks the supervisor, so that a restart reads as one.
func (o *openedStore) Ping(ctx context.Context) error {
	if o.cluster != nil {
		switch st := o.cluster.State(); st {
		case embedded.Running:
		case embedded.Restarting:
			return errRestarting
		default:
			return fmt.Errorf("database %s", st)
		}
	}
	return o.Store.Ping(ctx)
}

// Failed is closed when the embedded cluster's supervisor gave up; never
// with an external database.
func (o *openedStore) Failed() <-chan struct{} {
	if o.cluster == nil {
		return nil
	}
	return o.cluster.Failed()
}

// openStore connects to the configured database, or, with no database URL,
// starts the embedded cluster in the data directory first, creating it on
// first use. Either way it applies pending migrations unless opts say
// otherwise. Only kith serve and kith migrate make a store.
func openStore(ctx context.Context, cfg Config, log *slog.Logger, opts postgres.Options) (*openedStore, error) {
	return openStoreWith(ctx, cfg, log, opts, embedded.Start, true)
}

// openSharedStore is openStore for tools that may run beside kith serve:
// when the server already runs the embedded cluster, they use it.
func openSharedStore(ctx context.Context, cfg Config, log *slog.Logger, opts postgres.Options) (*openedStore, error) {
	return openStoreWith(ctx, cfg, log, opts, embedded.StartOrAttach, true)
}

// openExistingStore is openSharedStore for the tools that work on a
// server's store (log-key, load, dump, repair, block): with no database
// URL they use the embedded cluster the data directory already holds and
// create nothing, so that one run from the wrong directory stops with an
// error that says where it looked, rather than working on (or printing
// the log key of) a new empty store.
func openExistingStore(ctx context.Context, cfg Config, log *slog.Logger, opts postgres.Options) (*openedStore, error) {
	return openStoreWith(ctx, cfg, log, opts, embedded.StartOrAttach, false)
}

func openStoreWith(ctx context.Context, cfg Config, log *slog.Logger, opts postgres.Options,
	start func(context.Context, embedded.Options) (*embedded.Cluster, error), create bool) (*openedStore, error) {
	url := cfg.DatabaseURL
	o := &openedStore{}
	if url == "" {
		if create {
			if err := ensureDataDir(cfg.DataDir); err != nil {
				return nil, fmt.Errorf("setting data_dir: %w", err)
			}
		}
		cluster, err := start(ctx, embedded.Options{
			Dir:      filepath.Join(cfg.DataDir, "postgres"),
			Existing: !create,
			User:     cfg.PostgresUser,
			Logger:   log,
		})
		if err != nil {
			if errors.Is(err, embedded.ErrNoServer) {
				return nil, err
			}
			if errors.Is(err, embedded.ErrNoCluster) {
				return nil, noStoreError(cfg.DataDir)
			}
			return nil, fmt.Errorf("setting data_dir: embedded PostgreSQL: %w", err)
		}
		o.cluster = cluster
		url = cluster.URL()
	}
	if opts.MaxConns == 0 {
		opts.MaxConns = int32(cfg.DatabaseMaxConns)
	}
	if opts.Logger == nil {
		opts.Logger = log
	}
	s, err := postgres.Open(ctx, url, opts)
	if err != nil {
		o.Close()
		if cfg.DatabaseURL != "" {
			return nil, fmt.Errorf("setting database_url: %w", err)
		}
		return nil, err
	}
	o.Store = s
	return o, nil
}

// noStoreError says, in one line, that the data directory dir holds no
// store, and how to name the right one.
func noStoreError(dir string) error {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return fmt.Errorf("setting data_dir: no Kith store in %s (no PostgreSQL cluster in its postgres/): name the server's data directory with --data-dir, KITH_DATA_DIR or data_dir in the --config file, or its database with --database-url; only kith serve (and kith migrate) create one", dir)
}

// ensureDataDir creates the data directory and checks that Kith can write
// to it. It stays searchable by others so that the embedded cluster's user
// can reach its own directory inside it when Kith runs as root.
func ensureDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	probe, err := os.CreateTemp(dir, ".write-test-")
	if err != nil {
		return fmt.Errorf("%s is not writable: %w", dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return nil
}

func runMigrate(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "migrate", "migrate [flags]")
	cfg, _, err := loadToolConfig(fs, args, env.environ)
	if err != nil {
		return err
	}
	log := newLogger(env.stderr, cfg)
	st, err := openSharedStore(ctx, cfg, log, postgres.Options{SkipMigrate: true})
	if err != nil {
		return err
	}
	defer st.Close()
	v, err := st.Migrate(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "schema version %d\n", v)
	return nil
}
