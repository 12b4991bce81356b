package postgres

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
)

// The store implements the key store.
var _ keys.Store = (*Store)(nil)

// Store is the PostgreSQL store. It is safe for concurrent use.
type Store struct {
	pool   *pgxpool.Pool
	policy pgp.Policy
	log    *slog.Logger

	group keyGroup // AddKey calls waiting for a group transaction
}

// Options tune how the store connects.
type Options struct {
	// MaxConns caps the pool; 0 keeps pgx's default (the larger of 4 and
	// the number of CPUs).
	MaxConns int32
	// WarmConns is how many connections Open opens and prepares the key
	// lookups on before it returns, so that the first burst of requests
	// does not wait for backends to start, log in and read their
	// catalogs. They stay in the pool until idle for pgx's idle time.
	WarmConns int
	// SkipMigrate opens the store without applying migrations, for tools
	// that must not change the schema.
	SkipMigrate bool
	// Policy merges uploads with stored keys; nil means pgp.DefaultPolicy.
	Policy *pgp.Policy
	// Logger receives what the store cannot return as an error (a
	// notification that failed after its write committed); nil means
	// slog.Default().
	Logger *slog.Logger
}

// Open connects to the database at url (any libpq connection string or
// URL), applies pending migrations and returns the store.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse database URL: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	s := &Store{pool: pool, policy: pgp.DefaultPolicy(), log: opts.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	if opts.Policy != nil {
		s.policy = *opts.Policy
	}
	if err := s.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if !opts.SkipMigrate {
		if _, err := s.Migrate(ctx); err != nil {
			pool.Close()
			return nil, err
		}
	}
	s.warm(ctx, min(opts.WarmConns, int(cfg.MaxConns)))
	return s, nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: ping: %w", err)
	}
	return nil
}

// Close waits for queries in flight and closes every connection.
func (s *Store) Close() { s.pool.Close() }

// Collector returns Prometheus metrics of the connection pool.
func (s *Store) Collector() prometheus.Collector { return poolCollector{s.pool} }

// inTx runs fn in a transaction, committing when it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}

type poolCollector struct{ pool *pgxpool.Pool }

var (
	poolDescs = struct {
		total, idle, acquired, max, acquires, waits, waitSeconds *prometheus.Desc
	}{
		total:       prometheus.NewDesc("kith_store_pool_connections", "Open connections in the store's pool.", nil, nil),
		idle:        prometheus.NewDesc("kith_store_pool_idle_connections", "Idle connections in the store's pool.", nil, nil),
		acquired:    prometheus.NewDesc("kith_store_pool_acquired_connections", "Connections in use.", nil, nil),
		max:         prometheus.NewDesc("kith_store_pool_max_connections", "The pool's connection limit.", nil, nil),
		acquires:    prometheus.NewDesc("kith_store_pool_acquires_total", "Connections handed out.", nil, nil),
		waits:       prometheus.NewDesc("kith_store_pool_empty_acquires_total", "Acquires that had to wait for a connection.", nil, nil),
		waitSeconds: prometheus.NewDesc("kith_store_pool_acquire_wait_seconds_total", "Time spent waiting for a connection.", nil, nil),
	}
)

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	d := poolDescs
	for _, x := range []*prometheus.Desc{d.total, d.idle, d.acquired, d.max, d.acquires, d.waits, d.waitSeconds} {
		ch <- x
	}
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.pool.Stat()
	d := poolDescs
	ch <- prometheus.MustNewConstMetric(d.total, prometheus.GaugeValue, float64(st.TotalConns()))
	ch <- prometheus.MustNewConstMetric(d.idle, prometheus.GaugeValue, float64(st.IdleConns()))
	ch <- prometheus.MustNewConstMetric(d.acquired, prometheus.GaugeValue, float64(st.AcquiredConns()))
	ch <- prometheus.MustNewConstMetric(d.max, prometheus.GaugeValue, float64(st.MaxConns()))
	ch <- prometheus.MustNewConstMetric(d.acquires, prometheus.CounterValue, float64(st.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(d.waits, prometheus.CounterValue, float64(st.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(d.waitSeconds, prometheus.CounterValue, st.AcquireDuration().Seconds())
}
