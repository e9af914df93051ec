package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
)

// statsQueues is how many source topics the statistics tests spread records
// over: each batch appends a delta row per queue.
const statsQueues = 40

// insertBatches stores batches of one record per queue, each batch its own
// statement (as ingest writes), so that each appends statsQueues deltas.
func insertBatches(s *store.Store, from, batches int) error {
	for b := range batches {
		recs := make([]dlq.Record, statsQueues)
		for q := range recs {
			recs[q] = newRecord(int64((from+b)*statsQueues+q), fmt.Sprintf("q%d", q))
		}
		if _, err := s.InsertRecords(context.Background(), recs); err != nil {
			return err
		}
	}
	return nil
}

// checkCounts compares Stats with the records themselves.
func checkCounts(t *testing.T, pool *pgxpool.Pool, s *store.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := s.Stats(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT queue, state, count(*) FROM redrive_record GROUP BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]int64{}
	var total int64
	for rows.Next() {
		var q, state string
		var n int64
		if err := rows.Scan(&q, &state, &n); err != nil {
			t.Fatal(err)
		}
		if want[q] == nil {
			want[q] = map[string]int64{}
		}
		want[q][state] = n
		total += n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if st.Total != total {
		t.Errorf("stats total %d, records %d", st.Total, total)
	}
	for q, states := range want {
		for state, n := range states {
			if got := st.ByQueueState[q][state]; got != n {
				t.Errorf("stats %s/%s: %d, records %d", q, state, got, n)
			}
		}
	}
	for q, states := range st.ByQueueState {
		for state, n := range states {
			if state == string(dlq.ExhaustionDeadLetter) || state == string(dlq.ExhaustionDiscard) {
				continue
			}
			if want[q][state] != n {
				t.Errorf("stats %s/%s: %d, records %d", q, state, n, want[q][state])
			}
		}
	}
}

// pagesRead is how many buffers reading every statistics row touches.
func pagesRead(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) SELECT sum(n) FROM redrive_record_count`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	pages := 0
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		// The top node's line counts its children's buffers.
		if i := strings.Index(line, "Buffers: shared"); i >= 0 && pages == 0 {
			for _, f := range strings.Fields(line[i+len("Buffers: shared"):]) {
				var n int
				if _, err := fmt.Sscanf(f[strings.Index(f, "=")+1:], "%d", &n); err == nil {
					pages += n
				}
			}
		}
	}
	return pages
}

// The statistics cost what their dimensions cost, not what the history of
// writes cost: after a burst of statements (each appending a delta row per
// queue) and a compaction, reading every statistic touches a few pages —
// the totals, one row per queue and state — not the thousands of deltas the
// burst appended. Counts stay exact through inserts, updates and deletes,
// and a tuple whose records are all gone leaves no row behind.
func TestStatisticsStayFlatAfterABurst(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	// 60 statements × 40 queues: 2,400 deltas, thirty-odd pages of them.
	if err := insertBatches(s, 0, 60); err != nil {
		t.Fatal(err)
	}
	if err := s.CompactCounts(ctx); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, pool, s)
	if got := pagesRead(t, pool); got > 8 {
		t.Errorf("reading the statistics after a compaction touches %d pages, want a few (one row per queue and state)", got)
	}
	var totals int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM redrive_record_count`).Scan(&totals); err != nil {
		t.Fatal(err)
	}
	if totals != statsQueues {
		t.Errorf("%d statistics rows after compaction, want one per dimension tuple (%d)", totals, statsQueues)
	}

	// Updates and deletes, then compacting twice more: exact, and the
	// queue whose records are all deleted has no row left.
	if _, err := pool.Exec(ctx, `UPDATE redrive_lifecycle l SET state = 'discarded', exhaustion = 'dead_letter', discarded_at = now(), next_retry_at = NULL
		FROM redrive_record_data d WHERE d.id = l.id AND l.queue IN ('q1', 'q2') AND d.source_offset % 2 = 0`); err != nil {
		t.Fatal(err)
	}
	if err := insertBatches(s, 60, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, deleteQueue, "q3"); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, pool, s) // before compacting: totals + pending deltas
	for range 2 {
		if err := s.CompactCounts(ctx); err != nil {
			t.Fatal(err)
		}
		checkCounts(t, pool, s)
	}
	var q3 int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM redrive_record_count WHERE queue = 'q3'`).Scan(&q3); err != nil {
		t.Fatal(err)
	}
	if q3 != 0 {
		t.Errorf("a queue whose records are all deleted keeps %d statistics rows, want none", q3)
	}
}

// Compactions on several replicas at once, while writers append: the counts
// stay exact (each delta is folded once), and none fails.
func TestConcurrentCompactionsKeepCountsExact(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	stop := make(chan struct{})
	for w := range 3 {
		wg.Go(func() {
			for i := range 10 {
				if err := insertBatches(s, 1000*w+i*3, 3); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var compactors sync.WaitGroup
	for range 3 {
		compactors.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := s.CompactCounts(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	compactors.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := s.CompactCounts(ctx); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, pool, s)
}

// Upgrading a populated database (migration 00170): the statistics table's
// folded and pending rows become the totals, exact, and stay exact through
// a downgrade and an upgrade again — and through the split of 00180, which
// moves the statistics triggers to the lifecycle rows it makes.
func TestMigrationKeepsTheStatistics(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	m, err := store.NewMigrator(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	down := func(below int64) {
		t.Helper()
		for {
			st, err := m.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			applied := false
			for _, s := range st {
				applied = applied || s.Version >= below && s.Applied
			}
			if !applied {
				return
			}
			if err := m.Down(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	down(170)
	if err := insertOldBatches(pool, 0, 10); err != nil {
		t.Fatal(err)
	}
	// Folded the way the statistics table was folded before 00170, then
	// more rows pending.
	if _, err := pool.Exec(ctx, `WITH d AS (DELETE FROM redrive_record_count RETURNING *)
		INSERT INTO redrive_record_count (queue, type, error_type, state, exhaustion, fingerprint, n)
		SELECT queue, type, error_type, state, exhaustion, fingerprint, sum(n) FROM d GROUP BY 1, 2, 3, 4, 5, 6`); err != nil {
		t.Fatal(err)
	}
	if err := insertOldBatches(pool, 10, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM redrive_record WHERE queue = 'q5'`); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, pool, s)
	if err := insertBatches(s, 13, 2); err != nil {
		t.Fatal(err)
	}
	down(170)
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, pool, s)
	if err := s.CompactCounts(ctx); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, pool, s)
}

// deleteQueue deletes every record of queue $1, both rows of each.
const deleteQueue = `WITH l AS (DELETE FROM redrive_lifecycle WHERE queue = $1 RETURNING id)
	DELETE FROM redrive_record_data d USING l WHERE d.id = l.id`

// insertOldBatches is insertBatches for a database migrated below 00180,
// where a record is one row of the table redrive_record (the store writes
// the tables of 00180).
func insertOldBatches(pool *pgxpool.Pool, from, batches int) error {
	for b := range batches {
		_, err := pool.Exec(context.Background(), `
			INSERT INTO redrive_record (id, queue, type, state, attempt, max_attempts, source_partition, source_offset,
				source_group, dlq_topic, dlq_partition, dlq_offset, format, key, value, error_type, errors, retry,
				created_at, updated_at, next_retry_at)
			SELECT gen_random_uuid(), 'q' || q, 'order.created', 'retryable', 1, 3, 2, 40 + o, 'billing',
				'dead_letter_queue', 0, o, 'redrive', ('k' || o)::bytea, '{"id":1}'::bytea, 'db.down', '[]', '{}',
				now(), now(), now() + interval '1 second'
			FROM generate_series(0, $1 - 1) AS q, LATERAL (SELECT $2::bigint * $1 + q AS o) x`, statsQueues, from+b)
		if err != nil {
			return err
		}
	}
	return nil
}
