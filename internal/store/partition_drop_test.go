package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// A statement that holds a record table's lock and then locks a week's
// partition, while the pruner drops that week, is not aborted: the drop
// locks the parent before the week, so it waits for the statement (which
// waits on nothing) and then drops the week. Before, the drop held the week
// and waited for the parent: a deadlock, in which Postgres aborted the
// statement.
func TestADropWaitsForAStatementOnTheWeek(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	old := testdate.Now().AddDate(0, 0, -70)
	m := s.Maint()
	if _, err := m.EnsureWeeks(ctx, old, 1); err != nil {
		t.Fatal(err)
	}
	rec := newRecord(1, "orders")
	rec.ID = idAt(t, old)
	if _, err := s.InsertRecords(ctx, []dlq.Record{rec}); err != nil {
		t.Fatal(err)
	}
	week := "w" + weekOf(old).Format("20060102")
	parts, err := m.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var part *store.Partition
	for i := range parts {
		if parts[i].Name == week {
			part = &parts[i]
		}
	}
	if part == nil {
		t.Fatalf("no partition %s in %+v", week, parts)
	}

	// The other statement holds the parent's lock.
	other, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx) //nolint:errcheck // committed below
	if _, err := other.Exec(ctx, "LOCK TABLE ONLY redrive_lifecycle IN ROW EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	dropped := make(chan error, 1)
	go func() {
		_, err := m.DropPartition(ctx, part, func([]store.PartitionGroup) string { return "" })
		dropped <- err
	}()
	// Once the drop waits, the other statement locks the week, inside
	// Postgres, without a round trip to the test between the two.
	_, err = other.Exec(ctx, `DO $$
		BEGIN
			WHILE NOT EXISTS (SELECT FROM pg_locks l JOIN pg_database d ON d.oid = l.database
				WHERE NOT l.granted AND d.datname = current_database()) LOOP
				PERFORM pg_sleep(0.005);
			END LOOP;
			LOCK TABLE redrive_lifecycle_`+week+` IN ROW EXCLUSIVE MODE;
		END $$`)
	if err != nil {
		t.Fatalf("the other statement was aborted, not the drop: %v", err)
	}
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-dropped; err != nil {
		t.Fatalf("the drop, once the statement was done: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relname = $1", "redrive_lifecycle_"+week).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the week's partition is still there (%d, %v)", n, err)
	}
}

// Weeks are dropped while the scheduler, the archiver and imports run
// back to back on the record tables (as at each week's turn, when the
// pruner drops the week that ended): no statement is aborted, whatever
// order its plan locks the two tables in, and every week goes.
func TestWeeksAreDroppedWhileStatementsRun(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var recs []dlq.Record
	for i := range 20 {
		recs = append(recs, newRecord(int64(i), "orders"))
	}
	if _, err := s.InsertRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	m := s.Maint()
	old := testdate.Now().AddDate(0, 0, -7*30)
	if _, err := m.EnsureWeeks(ctx, old, 6); err != nil {
		t.Fatal(err)
	}
	var (
		wg     sync.WaitGroup
		failed = make(chan error, 3)
		offset atomic.Int64
	)
	loop := func(what string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := f(); err != nil && ctx.Err() == nil {
					failed <- fmt.Errorf("%s: %w", what, err)
					return
				}
			}
		}()
	}
	loop("claim", func() error {
		_, err := s.ClaimDue(ctx, &store.ClaimParams{Queue: "orders", Now: testdate.Now(), Limit: 10, Lease: time.Second})
		return err
	})
	loop("archive claim", func() error {
		_, err := s.ClaimArchive(ctx, testdate.Now(), 10, time.Second)
		return err
	})
	loop("import", func() error {
		batch := []dlq.Record{newRecord(1000+offset.Add(1), "orders")}
		_, err := s.ImportRecords(ctx, func() ([]dlq.Record, error) {
			b := batch
			batch = nil
			return b, nil
		})
		return err
	})
	parts, err := m.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dropped := 0
	for i := range parts {
		if p := &parts[i]; p.HiAt.Before(old.AddDate(0, 0, 7*6)) && p.Lo.Valid {
			if _, err := m.DropPartition(ctx, p, func([]store.PartitionGroup) string { return "" }); err != nil {
				t.Errorf("drop %s: %v", p.Name, err)
			}
			dropped++
		}
	}
	cancel()
	wg.Wait()
	close(failed)
	for err := range failed {
		t.Errorf("a statement failed while weeks were dropped: %v", err)
	}
	if dropped < 5 {
		t.Errorf("%d weeks dropped, want at least 5", dropped)
	}
	var left int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_inherits
		WHERE inhparent IN ('redrive_lifecycle'::regclass, 'redrive_record_data'::regclass)
		AND inhrelid::regclass::text ~ ('_w' || to_char($1::timestamptz, 'YYYYMMDD') || '$')`, weekOf(old)).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d partitions of the first dropped week left, %v; want 0", left, err)
	}
}

// A drop stopped between its two transactions (the wide rows' partition
// dropped, the lifecycle's not yet: a crash) leaves records out of the view
// and is finished by the next drop, which subtracts the week's counts once.
func TestADropStoppedHalfwayIsFinishedByTheNext(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	m := s.Maint()
	old := weekOf(testdate.Now().AddDate(0, 0, -70)).AddDate(0, 0, 1)
	if _, err := m.EnsureWeeks(ctx, old, 1); err != nil {
		t.Fatal(err)
	}
	var recs []dlq.Record
	for i := range 3 {
		r := newRecord(int64(i), "orders")
		r.ID = idAt(t, old.Add(time.Duration(i)*time.Minute))
		recs = append(recs, r)
	}
	keep := newRecord(9, "orders")
	if _, err := s.InsertRecords(ctx, append(recs, keep)); err != nil {
		t.Fatal(err)
	}
	week := "w" + weekOf(old).Format("20060102")
	if _, err := pool.Exec(ctx, "SELECT redrive_drop_partition_data($1)", week); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, recs[0].ID); err == nil {
		t.Errorf("a record whose wide row is dropped is still read")
	}
	parts, err := m.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(parts, func(p store.Partition) bool { return p.Name == week })
	if i < 0 || parts[i].Dropped {
		t.Fatalf("partition %s not listed as live: %+v", week, parts)
	}
	groups, err := m.DropPartition(ctx, &parts[i], func([]store.PartitionGroup) string { return "" })
	if err != nil {
		t.Fatalf("the next drop: %v", err)
	}
	var n int64
	for _, g := range groups {
		n += g.N
	}
	if n != 3 {
		t.Errorf("the drop counted %d records, want 3", n)
	}
	var counted int64
	if err := pool.QueryRow(ctx, "SELECT coalesce(sum(n), 0) FROM redrive_record_count WHERE queue = 'orders'").Scan(&counted); err != nil || counted != 1 {
		t.Errorf("statistics count %d records of orders, %v; want 1 (the one in this week)", counted, err)
	}
	var left int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relname IN ($1, $2)",
		"redrive_lifecycle_"+week, "redrive_record_data_"+week).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d of the week's partitions left, %v; want 0", left, err)
	}
}
