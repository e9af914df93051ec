package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
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
	old := time.Now().AddDate(0, 0, -70)
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
	// The drop holds the week's partition and waits for the parent.
	eventually.True(t, "the drop waits for the parent's lock", func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%redrive_drop_partition%'`).Scan(&n)
		return err == nil && n == 1
	}, eventually.Within(10*time.Second))
	// Then the other statement locks the week: a deadlock, which Postgres
	// breaks after deadlock_timeout by aborting the drop, the longest waiter.
	if _, err := other.Exec(ctx, "LOCK TABLE redrive_lifecycle_"+week+" IN ROW EXCLUSIVE MODE"); err != nil {
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
