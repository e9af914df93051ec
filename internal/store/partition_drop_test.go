package store_test

import (
	"context"
	"testing"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// A statement that holds the record tables' lock and then locks a week's
// partition, while the pruner drops that week, deadlocks with the drop:
// Postgres aborts the drop, which is tried again and succeeds once the
// statement is done.
func TestADropAbortedToBreakADeadlockIsTriedAgain(t *testing.T) {
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
	// The drop holds the week's partition and waits for the parent. Then
	// the other statement locks the week: a deadlock, which Postgres breaks
	// by aborting the waiter whose deadlock check runs first, the drop's,
	// deadlock_timeout (a second) after it began to wait. Had the cycle
	// formed after that check, the other statement's own check would find
	// it and abort that statement instead: so the other statement waits
	// for the drop inside Postgres and locks the week at once, without a
	// round trip to the test between the two.
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
		t.Fatalf("the drop aborted by the deadlock was not tried again: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relname = $1", "redrive_lifecycle_"+week).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the week's partition is still there (%d, %v)", n, err)
	}
}
