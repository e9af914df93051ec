// Package rawbench is the Postgres side of `redrive bench`: a scratch
// database, the few raw statements the benchmarks run around the store
// (emptying, vacuuming, counting), and the raw baselines the store is
// measured against — a bare binary COPY and a bare claim loop — which are
// deliberately pgx code with no store in between. It lives in the store's
// tree so that pgx stays there.
package rawbench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/pgcluster"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/store/pgcopy"
)

// DB is a scratch database for a benchmark.
type DB struct {
	pool *pgxpool.Pool
	// siblings counts the databases Sibling created, to name the next one.
	siblings int
}

// Scratch creates a fresh, migrated database (on a throwaway cluster when
// serverURL is empty) and returns it, its connection string for a child
// process and a cleanup function.
func Scratch(ctx context.Context, serverURL string) (*DB, string, func(), error) {
	var cleanups []func()
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	if serverURL == "" {
		c, err := pgcluster.Start(ctx, pgcluster.Options{})
		if err != nil {
			return nil, "", nil, fmt.Errorf("start throwaway postgres: %w", err)
		}
		cleanups = append(cleanups, c.Stop)
		serverURL = c.URL("postgres")
	}
	admin, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		cleanup()
		return nil, "", nil, fmt.Errorf("connect: %w", err)
	}
	name := "redrive_bench_" + strconv.Itoa(os.Getpid())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close(ctx)
		cleanup()
		return nil, "", nil, fmt.Errorf("create scratch database: %w", err)
	}
	cleanups = append(cleanups, func() {
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		admin.Close(context.Background())
	})
	cfg, err := pgxpool.ParseConfig(serverURL)
	if err != nil {
		cleanup()
		return nil, "", nil, err
	}
	cfg.ConnConfig.Database = name
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		cleanup()
		return nil, "", nil, err
	}
	cleanups = append(cleanups, pool.Close)
	m, err := store.NewMigrator(pool, nil)
	if err != nil {
		cleanup()
		return nil, "", nil, err
	}
	defer m.Close()
	if _, err := m.Up(ctx); err != nil {
		cleanup()
		return nil, "", nil, err
	}
	return &DB{pool: pool}, dsn(cfg.ConnConfig.Config), cleanup, nil
}

// dsn is a keyword/value connection string for a child process.
func dsn(c pgconn.Config) string {
	quote := func(v string) string { return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'" }
	s := "host=" + quote(c.Host) + " port=" + strconv.Itoa(int(c.Port)) + " user=" + quote(c.User) + " dbname=" + quote(c.Database)
	if c.Password != "" {
		s += " password=" + quote(c.Password)
	}
	return s
}

// Sibling creates an empty database on the same server, for a peer measured
// in the same run (River's benchmark), and returns its connection string and
// a function that drops it.
func (d *DB) Sibling(ctx context.Context) (string, func(), error) {
	d.siblings++
	cfg := d.pool.Config().ConnConfig.Config
	cfg.Database = cfg.Database + "_peer" + strconv.Itoa(d.siblings)
	// CREATE DATABASE takes no parameters; the name is built from our own.
	if _, err := d.pool.Exec(ctx, "CREATE DATABASE "+cfg.Database); err != nil {
		return "", nil, fmt.Errorf("create peer database: %w", err)
	}
	drop := func() {
		_, _ = d.pool.Exec(context.Background(), "DROP DATABASE IF EXISTS "+cfg.Database+" WITH (FORCE)")
	}
	return dsn(cfg), drop, nil
}

// Store is a Store on the database (the database keeps the pool).
func (d *DB) Store() *store.Store { return store.New(d.pool) }

// Exec runs a statement of the benchmark's own (TRUNCATE, VACUUM, a reset)
// and says how many rows it touched.
func (d *DB) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := d.pool.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

// QueryRow runs a query of the benchmark's own (a count) for one row.
func (d *DB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return d.pool.QueryRow(ctx, sql, args...)
}

// Quiesce flushes the dirty pages earlier suites left behind (CHECKPOINT),
// so that their write-back does not land in the next timed run. It needs a
// superuser (the throwaway cluster's role is one); without it, runs go on.
func (d *DB) Quiesce(ctx context.Context) {
	_, _ = d.pool.Exec(ctx, "CHECKPOINT")
}

// TimeRawCopy copies the stored rows out, truncates the tables, and times
// binary COPYs of exactly those rows back in, in batches of the ingest's batch
// size (a single COPY of every row would pay the statistics triggers' transition
// tables differently): the database's ceiling for ingest. A record is three
// rows (migrations 00180, 00211): each batch COPYs the DLQ coordinates, the
// lifecycles, then the wide rows in one transaction, as ingest must, and
// sent as ingest sends them, in one query (pgcopy), so that the baseline
// pays no round trips ingest does not.
func (d *DB) TimeRawCopy(ctx context.Context, batch int) (time.Duration, error) {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	pg := conn.Conn().PgConn()
	type chunk struct{ coord, data, lifecycle bytes.Buffer }
	var chunks []*chunk
	last := "00000000-0000-0000-0000-000000000000"
	for {
		var c chunk
		// COPY takes no parameters; last is a uuid read from the table.
		tag, err := pg.CopyTo(ctx, &c.data, "COPY (SELECT * FROM redrive_record_data WHERE id > '"+last+"' ORDER BY id LIMIT "+
			strconv.Itoa(batch)+") TO STDOUT (FORMAT binary)")
		if err != nil {
			return 0, fmt.Errorf("copy rows out: %w", err)
		}
		if tag.RowsAffected() == 0 {
			break
		}
		if _, err := pg.CopyTo(ctx, &c.lifecycle, "COPY (SELECT * FROM redrive_lifecycle WHERE id > '"+last+"' ORDER BY id LIMIT "+
			strconv.Itoa(batch)+") TO STDOUT (FORMAT binary)"); err != nil {
			return 0, fmt.Errorf("copy rows out: %w", err)
		}
		if _, err := pg.CopyTo(ctx, &c.coord, "COPY (SELECT * FROM redrive_record_coord WHERE id > '"+last+"' ORDER BY id LIMIT "+
			strconv.Itoa(batch)+") TO STDOUT (FORMAT binary)"); err != nil {
			return 0, fmt.Errorf("copy rows out: %w", err)
		}
		chunks = append(chunks, &c)
		if err := conn.QueryRow(ctx, "SELECT id::text FROM (SELECT id FROM redrive_record_data WHERE id > $1 ORDER BY id LIMIT $2) c ORDER BY id DESC LIMIT 1",
			last, batch).Scan(&last); err != nil {
			return 0, err
		}
	}
	// Emptied as the bench empties the tables before each timed ingest.
	if _, err := conn.Exec(ctx, "TRUNCATE redrive_record_coord, redrive_record_data, redrive_lifecycle"); err != nil {
		return 0, err
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE redrive_record_coord, redrive_record_data, redrive_lifecycle"); err != nil {
		return 0, err
	}
	d.Quiesce(ctx)
	start := time.Now()
	for _, c := range chunks {
		_, err := pgcopy.InOneQuery(ctx, pg,
			pgcopy.Stream{SQL: "COPY redrive_record_coord FROM STDIN (FORMAT binary)", Rows: &c.coord},
			pgcopy.Stream{SQL: "COPY redrive_lifecycle FROM STDIN (FORMAT binary)", Rows: &c.lifecycle},
			pgcopy.Stream{SQL: "COPY redrive_record_data FROM STDIN (FORMAT binary)", Rows: &c.data})
		if err != nil {
			return 0, fmt.Errorf("raw copy: %w", err)
		}
	}
	return time.Since(start), nil
}

// TimeRawClaimLoop is the redelivery baseline: workers that claim due rows of
// queue with SKIP LOCKED, update them and read them back, in batches of
// batch — the scheduler's claim statement, done bare: no decoding, no
// Kafka, no bookkeeping. Like the scheduler it claims the lifecycle rows and
// writes each as its redelivery completes it (state, completion, attempt:
// the same row version and index entries the scheduler's claim writes),
// reads the wide rows (key, value, headers) without writing them, and
// each claim starts after the last row claimed (the scheduler's place in
// due order), from the start again once one comes up empty.
func (d *DB) TimeRawClaimLoop(ctx context.Context, queue string, workers, batch int) (time.Duration, error) {
	start := time.Now()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		place *store.DueKey // the last row claimed; nil: from the start
	)
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				after := place
				mu.Unlock()
				n, last, err := d.rawClaim(ctx, queue, after, batch)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				switch {
				case n == 0 && after == nil:
					mu.Unlock()
					return
				case n == 0:
					place = nil
				case place == nil || last.After(*place):
					place = &last
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	return time.Since(start), <-errs
}

// rawClaim claims up to batch due rows of queue after a place (nil: from the
// start) and returns how many it claimed and the last one.
func (d *DB) rawClaim(ctx context.Context, queue string, after *store.DueKey, batch int) (int, store.DueKey, error) {
	from, fromID := time.Time{}, "00000000-0000-0000-0000-000000000000"
	if after != nil {
		from, fromID = after.At, after.ID
	}
	// A prepared statement whose plan no value changes, as the scheduler's
	// claim is (store.claimSQL): the limit and the place are read from
	// subqueries, and the ids reach the update as an unnested array, which
	// looks each row up by primary key at any size. Postgres keeps its
	// generic plan after five calls instead of planning every claim.
	rows, err := d.pool.Query(ctx, `
		WITH due AS (
			SELECT id, next_retry_at FROM redrive_lifecycle WHERE queue = $1 AND next_retry_at <= now()
			    AND (next_retry_at, id) > ROW((SELECT $2::timestamptz), (SELECT $3::uuid))
			ORDER BY next_retry_at, id LIMIT (SELECT $4::int) FOR UPDATE SKIP LOCKED),
		claimed AS (
			UPDATE redrive_lifecycle r
			SET state = 'completed', completed_at = now(), completed_by = 'redelivered', attempt = r.attempt + 1, next_retry_at = NULL,
			    redelivered_at = now(), updated_at = now()
			FROM unnest(ARRAY(SELECT id FROM due)) AS taken(id) WHERE r.id = taken.id
			RETURNING r.id)
		SELECT d.id, due.next_retry_at, d.key, d.value, d.headers FROM claimed JOIN due ON due.id = claimed.id
		JOIN redrive_record_data d ON d.id = claimed.id`,
		queue, from, fromID, int32(batch))
	if err != nil {
		return 0, store.DueKey{}, err
	}
	defer rows.Close()
	n, last := 0, store.DueKey{}
	for rows.Next() {
		var k store.DueKey
		if err := rows.Scan(&k.ID, &k.At, nil, nil, nil); err != nil {
			return 0, store.DueKey{}, err
		}
		if n == 0 || k.After(last) {
			last = k
		}
		n++
	}
	return n, last, rows.Err()
}
