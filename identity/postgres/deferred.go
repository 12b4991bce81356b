// deferred.go: the search indexes a bulk load into an empty store builds
// once after its data instead of row by row (DeferIndexes,
// DeferredIndexes.Build), and the healing of a store whose load died
// before it built them (Migrate).

package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// deferLock is the advisory lock ("kidx") a load holds, on a connection
// of its own, while the store's indexes are deferred: a store opened
// meanwhile leaves the recorded indexes to that load, and one opened
// after the load died (and its connection with it) builds them.
const deferLock = 0x6b696478

// deferBuilders is how many indexes Build makes at once, each on a
// connection of its own: on two cores and 60,000 keys, two at a time took
// 1.5-1.9 s, one after the other 1.9-3.7 s (PostgreSQL already builds a
// large btree with parallel workers; with those off, two at a time was no
// faster).
const deferBuilders = 2

// deferMaintenanceMem is maintenance_work_mem for the sessions that build
// the indexes: the sorts of a large store's key_words and the GIN index's
// posting lists then stay in memory. It is a cap, taken only as needed.
const deferMaintenanceMem = "512MB"

// deferrableIndexes lists, from the catalog, the indexes a load into an
// empty store defers, each with its name, its table, the statement that
// builds it (pg_get_indexdef), the one that drops it, and the one that
// makes it its table's primary key again when it was one: every index of
// the key tables that is not unique, and key_words' primary key.
//
// The unique indexes stay: a key write's race checks (ON CONFLICT, the
// unique violation that reruns a COPY) and its reads of stored keys (by
// fingerprint, by id, by position) go through them. key_words' primary key
// enforces nothing a writer relies on: each key's words are written once,
// from its user_ids rows, under its row lock (insertKeyWords). The writes
// that read through deferred indexes (deleting an updated key's words; the
// issuer lookups of a merge) are merges with stored keys, which a Store
// that deferred its indexes builds them before (errNeedIndexes).
const deferrableIndexes = `
	SELECT format('%I.%I', n.nspname, ic.relname), format('%I.%I', n.nspname, t.relname), pg_get_indexdef(i.indexrelid),
		CASE WHEN c.conname IS NULL THEN format('DROP INDEX %I.%I', n.nspname, ic.relname)
			ELSE format('ALTER TABLE %I.%I DROP CONSTRAINT %I', n.nspname, t.relname, c.conname) END,
		CASE WHEN c.conname IS NOT NULL THEN format('ALTER TABLE %I.%I ADD CONSTRAINT %I PRIMARY KEY USING INDEX %I',
			n.nspname, t.relname, c.conname, ic.relname) END
	FROM pg_index i
	JOIN pg_class ic ON ic.oid = i.indexrelid
	JOIN pg_class t ON t.oid = i.indrelid
	JOIN pg_namespace n ON n.oid = t.relnamespace
	LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid AND c.conrelid = i.indrelid AND c.contype = 'p'
	WHERE i.indrelid IN ('keys'::regclass, 'subkeys'::regclass, 'user_ids'::regclass, 'key_words'::regclass)
		AND (NOT i.indisunique OR (i.indrelid = 'key_words'::regclass AND i.indisprimary))
	ORDER BY 1`

// errNeedIndexes stops a batch that must merge with stored keys while
// this Store's indexes are deferred: AddKeys builds them and reruns it.
var errNeedIndexes = errors.New("a merge needs the deferred indexes")

// DeferredIndexes are the search indexes a load dropped to build after
// its data; the load holds them (deferLock) until Build.
type DeferredIndexes struct {
	s *Store

	mu   sync.Mutex
	conn *pgx.Conn // holds deferLock; nil once built or released
}

// DeferIndexes drops the search indexes of the key tables
// (deferrableIndexes) when no key is stored, so that a bulk load fills
// the tables without updating them row by row, and returns them for the
// load to build when it is done (Build); it returns nil when keys are
// stored or another load defers them already. Each index is recorded
// (deferred_indexes) in the transaction that drops it, so that a store
// whose load died before building them builds them when it is next
// opened or migrated.
//
// Until then every answer stays the same, but searches by key ID, email
// and words read whole tables, and writes that merge with stored keys
// read whole tables too; a key write of this Store that merges builds the
// indexes first.
func (s *Store) DeferIndexes(ctx context.Context) (*DeferredIndexes, error) {
	var stored bool
	if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT FROM keys)").Scan(&stored); err != nil {
		return nil, fmt.Errorf("postgres: defer indexes: count keys: %w", err)
	}
	if stored {
		return nil, nil
	}
	conn, err := s.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: defer indexes: %w", err)
	}
	d := &DeferredIndexes{s: s, conn: conn}
	locked, err := tryDeferLock(ctx, conn)
	if err != nil || !locked {
		d.release()
		if err != nil {
			return nil, fmt.Errorf("postgres: defer indexes: %w", err)
		}
		return nil, nil
	}
	deferred := 0
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// No writer may store a key between this check and the drop.
		if _, err := tx.Exec(ctx, "LOCK TABLE keys, subkeys, user_ids, key_words IN ACCESS EXCLUSIVE MODE"); err != nil {
			return fmt.Errorf("lock the key tables: %w", err)
		}
		var empty bool
		if err := tx.QueryRow(ctx, "SELECT NOT EXISTS (SELECT FROM keys)").Scan(&empty); err != nil {
			return fmt.Errorf("count keys: %w", err)
		}
		if !empty {
			return nil
		}
		rows, err := tx.Query(ctx, deferrableIndexes)
		if err != nil {
			return fmt.Errorf("read the indexes: %w", err)
		}
		b := &pgx.Batch{}
		for rows.Next() {
			var name, table, create, drop string
			var attach *string
			if err := rows.Scan(&name, &table, &create, &drop, &attach); err != nil {
				rows.Close()
				return fmt.Errorf("read the indexes: %w", err)
			}
			b.Queue("INSERT INTO deferred_indexes (name, table_name, statement, attach) VALUES ($1, $2, $3, $4)",
				name, table, create, attach)
			b.Queue(drop)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read the indexes: %w", err)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("drop the indexes: %w", err)
		}
		return tx.QueryRow(ctx, "SELECT count(*) FROM deferred_indexes").Scan(&deferred)
	})
	if err != nil || deferred == 0 {
		d.release()
		if err != nil {
			return nil, fmt.Errorf("postgres: defer indexes: %w", err)
		}
		return nil, nil
	}
	s.deferred.Store(d)
	return d, nil
}

// Build builds the deferred indexes again, two at a time on connections
// of their own, after vacuuming and analysing the tables searches by
// words read (buildDeferred), and lets them go. While an index is built
// its table takes no writes (a concurrent server's uploads wait); reads
// go on. Calling it again does nothing. A load calls it whether it
// succeeded or not; what it fails to build stays recorded, for the next
// open of the store.
func (d *DeferredIndexes) Build(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conn == nil {
		return nil
	}
	err := d.s.buildDeferred(ctx, d.conn)
	d.s.deferred.CompareAndSwap(d, nil)
	d.releaseLocked()
	if err != nil {
		return fmt.Errorf("postgres: build the deferred indexes: %w", err)
	}
	return nil
}

// release lets the indexes go unbuilt (Store.Close): they stay recorded.
func (d *DeferredIndexes) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.releaseLocked()
}

func (d *DeferredIndexes) releaseLocked() {
	if d.conn != nil {
		// Closing the connection releases deferLock.
		d.conn.Close(context.Background())
		d.conn = nil
	}
}

// buildDeferredNow builds the indexes this Store deferred, if any, for a
// write that must merge with stored keys.
func (s *Store) buildDeferredNow(ctx context.Context) error {
	if d := s.deferred.Load(); d != nil {
		s.log.Info("postgres: a load merges with stored keys: building the deferred indexes now")
		return d.Build(ctx)
	}
	return nil
}

// healDeferredIndexes builds the indexes a load recorded and died without
// building; those of a load still running (it holds deferLock) are left
// to it.
func (s *Store) healDeferredIndexes(ctx context.Context) error {
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM deferred_indexes").Scan(&n); err != nil {
		return fmt.Errorf("read deferred indexes: %w", err)
	}
	if n == 0 {
		return nil
	}
	conn, err := s.connect(ctx)
	if err != nil {
		return fmt.Errorf("build deferred indexes: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	locked, err := tryDeferLock(ctx, conn)
	if err != nil {
		return fmt.Errorf("build deferred indexes: %w", err)
	}
	if !locked {
		s.log.Info("postgres: a load is running: it builds the search indexes it deferred when done", "indexes", n)
		return nil
	}
	s.log.Warn("postgres: building the search indexes a load deferred and did not build", "indexes", n)
	if err := s.buildDeferred(ctx, conn); err != nil {
		return fmt.Errorf("build deferred indexes: %w", err)
	}
	return nil
}

// buildDeferred builds every index recorded in deferred_indexes, on conn
// (which holds deferLock) and on connections it opens, deferBuilders in
// all, each index in a transaction that also removes its row.
//
// First, on two connections, it vacuums and analyses key_words (its
// visibility map lets a search by words count a word's keys from the
// index alone) and analyses user_ids (whose word statistics plan the
// search's check of the candidates): ~0.2 s for 60,000 keys. That also
// orders the builds, the tables of the most rows first, so that the
// builders finish together. keys and subkeys are left to autovacuum: their
// lookups go through single-column indexes whatever the statistics say,
// and analysing keys (whose packets are most of the store) took 0.35-0.7 s.
func (s *Store) buildDeferred(ctx context.Context, conn *pgx.Conn) error {
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM deferred_indexes").Scan(&n); err != nil {
		return fmt.Errorf("read deferred indexes: %w", err)
	}
	if n == 0 {
		return nil
	}
	conns := []*pgx.Conn{conn}
	defer func() {
		for _, c := range conns[1:] {
			c.Close(context.WithoutCancel(ctx))
		}
	}()
	for len(conns) < deferBuilders {
		c, err := s.connect(ctx)
		if err != nil {
			return fmt.Errorf("build deferred indexes: %w", err)
		}
		conns = append(conns, c)
	}
	start := time.Now()
	stats := []string{"VACUUM (ANALYZE) key_words", "ANALYZE user_ids"}
	var jobs []job
	for _, st := range stats {
		jobs = append(jobs, job{st, func(c *pgx.Conn) error {
			_, err := c.Exec(ctx, st)
			return err
		}})
	}
	if err := s.runOn(ctx, conns, jobs); err != nil {
		// The indexes matter more: autovacuum will do this later.
		s.log.Warn("postgres: the statistics of the key tables", "err", err)
	}
	analysed := time.Now()
	rows, err := conn.Query(ctx, `SELECT name FROM deferred_indexes
		ORDER BY (SELECT reltuples FROM pg_class WHERE oid = to_regclass(table_name)) DESC NULLS LAST, name`)
	if err != nil {
		return fmt.Errorf("read deferred indexes: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("read deferred indexes: %w", err)
	}
	jobs = jobs[:0]
	for _, name := range names {
		jobs = append(jobs, job{"build " + name, func(c *pgx.Conn) error { return buildIndex(ctx, c, name) }})
	}
	err = s.runOn(ctx, conns, jobs)
	s.log.Info("postgres: built the deferred indexes", "indexes", len(names),
		"statistics_took", analysed.Sub(start).Round(time.Millisecond), "took", time.Since(analysed).Round(time.Millisecond))
	return err
}

// job is one statement of buildDeferred, run on the connection given.
type job struct {
	name string
	run  func(*pgx.Conn) error
}

// runOn runs jobs in order on conns, one job at a time on each, with
// maintenance_work_mem set for index builds; it runs every job and
// returns their errors joined.
func (s *Store) runOn(ctx context.Context, conns []*pgx.Conn, jobs []job) error {
	queue := make(chan job, len(jobs))
	for _, j := range jobs {
		queue <- j
	}
	close(queue)
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Exec(ctx, "SET maintenance_work_mem = '"+deferMaintenanceMem+"'"); err != nil {
				errs[i] = fmt.Errorf("set maintenance_work_mem: %w", err)
				return
			}
			for j := range queue {
				t := time.Now()
				err := j.run(c)
				s.log.Debug("postgres: deferred indexes", "step", j.name, "took", time.Since(t), "err", err)
				if err != nil {
					errs[i] = errors.Join(errs[i], fmt.Errorf("%s: %w", j.name, err))
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// buildIndex builds the recorded index name and removes its row in one
// transaction: a row another store removed first (it built the index) is
// nothing to do, and so is an index that exists already.
func buildIndex(ctx context.Context, c *pgx.Conn, name string) error {
	err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		var create string
		var attach *string
		var exists bool
		err := tx.QueryRow(ctx, `DELETE FROM deferred_indexes WHERE name = $1
			RETURNING statement, attach, to_regclass(name) IS NOT NULL`, name).Scan(&create, &attach, &exists)
		if errors.Is(err, pgx.ErrNoRows) || exists {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, create); err != nil {
			return err
		}
		if attach != nil {
			if _, err := tx.Exec(ctx, *attach); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}

// tryDeferLock takes deferLock on conn, for as long as conn lives, unless
// another session holds it.
func tryDeferLock(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var locked bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", deferLock).Scan(&locked); err != nil {
		return false, fmt.Errorf("lock: %w", err)
	}
	return locked, nil
}

// connect opens a connection of its own, outside the pools, configured as
// theirs are.
func (s *Store) connect(ctx context.Context) (*pgx.Conn, error) {
	c, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return c, nil
}
