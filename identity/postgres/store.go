package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync/atomic"

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
	pool *pgxpool.Pool
	// writes is the pool of the connections kept for key writes
	// (writeTx); pool itself when none are kept.
	writes *pgxpool.Pool
	policy pgp.Policy
	log    *slog.Logger

	group keyGroup // AddKey calls waiting for a group transaction
	// lookups and wordReads are the lookups by primary fingerprint and
	// the reads of a word's keys that wait for a connection.
	lookups   batcher[fingerprintLookup, lookupAnswer]
	wordReads batcher[wordRead, []keys.Stored]
	writing   atomic.Int32 // key write transactions running (writeTx)

	// deferred holds the search indexes a load on this Store deferred
	// (DeferIndexes), until they are built; nil otherwise.
	deferred atomic.Pointer[DeferredIndexes]

	// goLexemes: the database splits user IDs into words as
	// keys.Lexemes does (its locale is C), so searches by words can be
	// rechecked in Go (findByWords).
	goLexemes bool
	words     wordCounts // where searches by words start
}

// Options tune how the store connects.
type Options struct {
	// MaxConns caps the connections the store opens; 0 keeps pgx's
	// default (the larger of 4 and the number of CPUs). A quarter of
	// them, one or two (writeConns), are kept for key writes.
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
	// The store's statements are lookups and writes of a few rows, which
	// PostgreSQL's JIT never speeds up; but it compiles a statement whose
	// estimate passes jit_above_cost at every execution (~100 ms), and a
	// table not yet analysed (after a bulk load) makes a one-key search
	// by words estimate that much. A URL that sets jit keeps its choice.
	if _, ok := cfg.ConnConfig.RuntimeParams["jit"]; !ok {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	writeCfg := cfg.Copy()
	w := writeConns(cfg.MaxConns)
	cfg.MaxConns -= w
	if cfg.MinConns > cfg.MaxConns {
		cfg.MinConns = cfg.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	writes := pool
	if w > 0 {
		writeCfg.MaxConns, writeCfg.MinConns = w, 0
		if writes, err = pgxpool.NewWithConfig(ctx, writeCfg); err != nil {
			pool.Close()
			return nil, fmt.Errorf("postgres: connect: %w", err)
		}
	}
	s := &Store{pool: pool, writes: writes, policy: pgp.DefaultPolicy(), log: opts.Logger}
	// Batches at once: a connection each, and no more than this server
	// has cores. Each batch keeps a PostgreSQL backend and a goroutine
	// busy; with as many batches as the three connections of the default
	// pool on 2 cores, they were smaller and contended for the cores:
	// two at once answered 27% more cold lookups (one, as many).
	batches := min(int(cfg.MaxConns), runtime.GOMAXPROCS(0))
	s.lookups.max, s.lookups.sameForm, s.lookups.run = batches, sameLookupForm, s.runLookups
	s.wordReads.max, s.wordReads.sameForm, s.wordReads.run = batches, sameWordReadForm, s.runWordReads
	// While keys are written, reads run a batch at a time (larger ones):
	// beside 32 readers, uploads waited for a core at every step, and
	// their p99 was 50-70 ms; with reads yielding, 38-43 ms, for 2-13%
	// fewer reads.
	writing := func() bool { return s.writing.Load() > 0 }
	s.lookups.yield, s.wordReads.yield = writing, writing
	if s.log == nil {
		s.log = slog.Default()
	}
	if opts.Policy != nil {
		s.policy = *opts.Policy
	}
	if err := s.Ping(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if !opts.SkipMigrate {
		if _, err := s.Migrate(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	if s.goLexemes, err = s.splitsWordsAsGo(ctx); err != nil {
		s.Close()
		return nil, err
	}
	s.warm(ctx, min(opts.WarmConns, int(cfg.MaxConns)))
	return s, nil
}

// lexemeProbe holds characters whose case or class differs between the
// C locale and others: letters with accents, the Kelvin sign (which
// folds to an ASCII k), a dotted capital I, other scripts, a ligature.
const lexemeProbe = "Josè ÅSA Kelvin İstanbul Ωmega 日本 ﬁnn ǅemal abc123 1e5"

// splitsWordsAsGo reports whether the database makes the words of a user
// ID (migration 0001's expression) as keys.Lexemes does, on a text that
// any locale but C splits or folds otherwise.
func (s *Store) splitsWordsAsGo(ctx context.Context) (bool, error) {
	var got []string
	if err := s.pool.QueryRow(ctx, `SELECT tsvector_to_array(to_tsvector('simple', `+searchText+`))`, lexemeProbe).Scan(&got); err != nil {
		return false, fmt.Errorf("postgres: probe the database's words: %w", err)
	}
	want := keys.Lexemes(lexemeProbe)
	slices.Sort(got)
	slices.Sort(want)
	return slices.Equal(got, slices.Compact(want)), nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: ping: %w", err)
	}
	return nil
}

// writeConns is how many of maxConns connections are kept for key writes: a
// quarter, one or two (the group transactions of AddKey run two at once,
// maxGroupWriters), none when maxConns is below 2. Lookups take a connection
// per request, so that with a shared pool a burst of them queued every
// upload's transaction behind the readers: uploads beside 32 readers
// were spending more time waiting for a connection than writing.
func writeConns(maxConns int32) int32 {
	if maxConns < 2 {
		return 0
	}
	return min(max(maxConns/4, 1), maxGroupWriters)
}

// Close waits for queries in flight and closes every connection. Indexes
// deferred and not built stay recorded, for the next open.
func (s *Store) Close() {
	if d := s.deferred.Swap(nil); d != nil {
		d.release()
	}
	s.pool.Close()
	if s.writes != s.pool {
		s.writes.Close()
	}
}

// Collector returns Prometheus metrics of the connection pool, of how
// searches by words started and of the reads answered together.
func (s *Store) Collector() prometheus.Collector {
	if s.writes == s.pool {
		return storeCollector{[]*pgxpool.Pool{s.pool}, s}
	}
	return storeCollector{[]*pgxpool.Pool{s.pool, s.writes}, s}
}

// inTx runs fn in a transaction, committing when it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}

// writeTx runs fn in a transaction on a connection kept for key writes:
// a key write waits for none of the connections lookups hold, and takes
// one. fn's first batch carries the BEGIN and its commit batch the COMMIT
// (writeTxn), so that a write costs as few round trips as it has steps
// that need an answer: beside many lookups, every round trip of an
// upload waited its turn for a core. When fn fails the transaction is
// rolled back.
func (s *Store) writeTx(ctx context.Context, fn func(context.Context, *writeTxn) error) error {
	s.writing.Add(1)
	defer s.writing.Add(-1)
	conn, err := s.writes.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire a write connection: %w", err)
	}
	defer conn.Release()
	tx := &writeTxn{conn: conn}
	if err := fn(ctx, tx); err != nil {
		if tx.begun && !tx.ended {
			// A connection left in a transaction is closed by the pool
			// on release, whatever this rollback manages.
			conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
		return err
	}
	if !tx.ended {
		return errors.New("postgres: write transaction neither committed nor failed")
	}
	return nil
}

// writeTxn is a transaction whose BEGIN travels with its first batch and
// whose COMMIT with its last (commit). Between them, Query and CopyFrom
// run inside it.
type writeTxn struct {
	conn         *pgxpool.Conn
	begun, ended bool
}

// SendBatch sends b inside the transaction, beginning it first in the same
// round trip when it has not begun.
func (t *writeTxn) SendBatch(ctx context.Context, b *pgx.Batch) (pgx.BatchResults, error) {
	if t.begun {
		return t.conn.SendBatch(ctx, b), nil
	}
	withBegin := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+1)}
	withBegin.Queue("BEGIN")
	withBegin.QueuedQueries = append(withBegin.QueuedQueries, b.QueuedQueries...)
	t.begun = true
	br := t.conn.SendBatch(ctx, withBegin)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, fmt.Errorf("begin: %w", err)
	}
	return br, nil
}

// begin begins the transaction on its own, when no batch began it.
func (t *writeTxn) begin(ctx context.Context) error {
	if t.begun {
		return nil
	}
	t.begun = true
	if _, err := t.conn.Exec(ctx, "BEGIN"); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	return nil
}

// Query runs sql inside the transaction.
func (t *writeTxn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.conn.Query(ctx, sql, args...)
}

// CopyFrom copies rows into table inside the transaction.
func (t *writeTxn) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, rows pgx.CopyFromSource) (int64, error) {
	if err := t.begin(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, columns, rows)
}

// commit sends b's statements (which need no answer but success), COMMIT
// and then after's statements, in one round trip. after's run only when
// everything before them succeeded (PostgreSQL skips the rest of a
// pipeline after an error), together in an implicit transaction of their
// own once this one has committed. It returns the results of after's
// statements for the caller to read, and close.
func (t *writeTxn) commit(ctx context.Context, b, after *pgx.Batch) (pgx.BatchResults, error) {
	all := &pgx.Batch{}
	all.QueuedQueries = append(all.QueuedQueries, b.QueuedQueries...)
	all.Queue("COMMIT")
	if after != nil {
		all.QueuedQueries = append(all.QueuedQueries, after.QueuedQueries...)
	}
	br, err := t.SendBatch(ctx, all)
	if err != nil {
		return nil, err
	}
	for range b.QueuedQueries {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, err
		}
	}
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, fmt.Errorf("commit: %w", err)
	}
	t.ended = true
	return br, nil
}

// storeCollector reports the store's connections, for lookups and kept
// for writes, together, how its searches by words started and how many
// statements answered its batched reads.
type storeCollector struct {
	pools []*pgxpool.Pool
	s     *Store
}

var (
	poolDescs = struct {
		total, idle, acquired, max, acquires, waits, waitSeconds, wordSearches, batchedReads, batchStatements *prometheus.Desc
	}{
		total:       prometheus.NewDesc("kith_store_pool_connections", "Open connections in the store's pool.", nil, nil),
		idle:        prometheus.NewDesc("kith_store_pool_idle_connections", "Idle connections in the store's pool.", nil, nil),
		acquired:    prometheus.NewDesc("kith_store_pool_acquired_connections", "Connections in use.", nil, nil),
		max:         prometheus.NewDesc("kith_store_pool_max_connections", "The pool's connection limit.", nil, nil),
		acquires:    prometheus.NewDesc("kith_store_pool_acquires_total", "Connections handed out.", nil, nil),
		waits:       prometheus.NewDesc("kith_store_pool_empty_acquires_total", "Acquires that had to wait for a connection.", nil, nil),
		waitSeconds: prometheus.NewDesc("kith_store_pool_acquire_wait_seconds_total", "Time spent waiting for a connection.", nil, nil),
		wordSearches: prometheus.NewDesc("kith_store_word_searches_total",
			"Searches by words, by how they started: from the word guessed rarest (guess), from a guess that was not rare, then counted (missed), counted by PostgreSQL (counted).",
			[]string{"start"}, nil),
		batchedReads: prometheus.NewDesc("kith_store_batched_reads_total",
			"Reads that are answered together when they wait for a connection, alone or not, by what they read: the key of a primary fingerprint (fingerprint), the keys of a search's rarest word (word). Over kith_store_batch_statements_total: the reads a statement answered.",
			[]string{"read"}, nil),
		batchStatements: prometheus.NewDesc("kith_store_batch_statements_total",
			"Statements that answered the batched reads, by what they read.", []string{"read"}, nil),
	}
)

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) {
	d := poolDescs
	for _, x := range []*prometheus.Desc{d.total, d.idle, d.acquired, d.max, d.acquires, d.waits, d.waitSeconds, d.wordSearches, d.batchedReads, d.batchStatements} {
		ch <- x
	}
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	var total, idle, acquired, maxConns, acquires, waits, waitSeconds float64
	for _, p := range c.pools {
		st := p.Stat()
		total += float64(st.TotalConns())
		idle += float64(st.IdleConns())
		acquired += float64(st.AcquiredConns())
		maxConns += float64(st.MaxConns())
		acquires += float64(st.AcquireCount())
		waits += float64(st.EmptyAcquireCount())
		waitSeconds += st.AcquireDuration().Seconds()
	}
	d := poolDescs
	ch <- prometheus.MustNewConstMetric(d.total, prometheus.GaugeValue, total)
	ch <- prometheus.MustNewConstMetric(d.idle, prometheus.GaugeValue, idle)
	ch <- prometheus.MustNewConstMetric(d.acquired, prometheus.GaugeValue, acquired)
	ch <- prometheus.MustNewConstMetric(d.max, prometheus.GaugeValue, maxConns)
	ch <- prometheus.MustNewConstMetric(d.acquires, prometheus.CounterValue, acquires)
	ch <- prometheus.MustNewConstMetric(d.waits, prometheus.CounterValue, waits)
	ch <- prometheus.MustNewConstMetric(d.waitSeconds, prometheus.CounterValue, waitSeconds)
	w := &c.s.words
	ch <- prometheus.MustNewConstMetric(d.wordSearches, prometheus.CounterValue, float64(w.fromGuess.Load()), "guess")
	ch <- prometheus.MustNewConstMetric(d.wordSearches, prometheus.CounterValue, float64(w.missed.Load()), "missed")
	ch <- prometheus.MustNewConstMetric(d.wordSearches, prometheus.CounterValue, float64(w.counted.Load()), "counted")
	for _, b := range []struct {
		read  string
		reads *atomic.Int64
		stmts *atomic.Int64
	}{{"fingerprint", &c.s.lookups.reads, &c.s.lookups.batches}, {"word", &c.s.wordReads.reads, &c.s.wordReads.batches}} {
		ch <- prometheus.MustNewConstMetric(d.batchedReads, prometheus.CounterValue, float64(b.reads.Load()), b.read)
		ch <- prometheus.MustNewConstMetric(d.batchStatements, prometheus.CounterValue, float64(b.stmts.Load()), b.read)
	}
}
