package task_test

import (
	"context"
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/task"
	"github.com/redrive/redrive/internal/testdate"
)

// Records leave a bulk retry's filter between its creation, which counted
// them, and the batches that get to them: deleted, completed elsewhere, or
// being redelivered by a scheduler right then — two of those in the middle
// of a batch's range, one after the last record the task takes. The task
// completes with processed + skipped = total, every skipped record under
// its reason, nothing remaining. A cancelled task's records it never got to
// remain.
func TestAProgressAddsUpWhenRecordsLeaveTheFilter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.New(t)
	st := store.New(pool)
	seed(t, st, "orders", 40)
	ids := orderIDs(t, pool, "orders")
	// Three records were retried by an operator: due, not yet redelivered.
	for _, i := range []int{15, 16, 39} {
		if _, err := st.RetryRecord(ctx, &store.RetryParams{ID: ids[i]}); err != nil {
			t.Fatal(err)
		}
	}
	f := filter.Filter{Queue: "orders"}
	n, err := st.CountRetryable(ctx, &f, filter.Scope{})
	if err != nil || n != 40 {
		t.Fatalf("count = %d, %v; want 40", n, err)
	}
	created := createTask(t, st, store.CreateTaskParams{Kind: store.TaskRetry, Filter: json.RawMessage(`{"queue":"orders"}`),
		BatchSize: 10, Total: n})

	// Then, before any batch: three are deleted, four acknowledged by a
	// consumer (completed), and the scheduler claims the three retried ones.
	for _, i := range []int{5, 6, 25} {
		if _, err := st.DeleteRecord(ctx, ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `UPDATE redrive_lifecycle SET state = 'completed', completed_by = 'ack', completed_at = now(),
		exhaustion = NULL, discarded_at = NULL WHERE id = ANY($1::uuid[])`, []string{ids[30], ids[31], ids[32], ids[33]}); err != nil {
		t.Fatal(err)
	}
	claim, err := st.ClaimDue(ctx, &store.ClaimParams{Queue: "orders", Now: testdate.Now().Add(time.Minute), Limit: 10,
		Owner: "scheduler", Lease: time.Hour})
	if err != nil || len(claim.Records) != 3 {
		t.Fatalf("claim = %+v, %v; want the 3 retried records", claim, err)
	}

	// A task cancelled before it starts leaves every record remaining:
	// cancelled before the runner starts, so that it cannot start it first.
	seed(t, st, "billing", 5)
	cancelled := createTask(t, st, store.CreateTaskParams{Kind: store.TaskPurge, Filter: json.RawMessage(`{"queue":"billing"}`),
		BatchSize: 10, Total: 5})
	if _, err := st.CancelTask(ctx, cancelled.ID); err != nil {
		t.Fatal(err)
	}

	r, err := task.New(task.Config{Poll: 20 * time.Millisecond}, st)
	if err != nil {
		t.Fatal(err)
	}
	start(t, r)
	got := waitFinished(t, st, created.ID)
	want := map[string]int64{store.SkipInFlight: 3, store.SkipNoLongerMatches: 7}
	if got.State != store.TaskCompleted || got.Total != 40 || got.Processed != 30 || got.Skipped != 10 ||
		!maps.Equal(got.SkippedReasons, want) || got.Remaining() != 0 {
		t.Fatalf("task %s: total %d, processed %d, skipped %d %v, remaining %d; want completed, 40 = 30 processed + 10 skipped %v",
			got.State, got.Total, got.Processed, got.Skipped, got.SkippedReasons, got.Remaining(), want)
	}
	if sum := got.Processed + got.Skipped + got.Remaining(); sum != got.Total {
		t.Fatalf("processed + skipped + remaining = %d, total %d", sum, got.Total)
	}

	if c := waitFinished(t, st, cancelled.ID); c.State != store.TaskCancelled || c.Processed+c.Skipped != 0 || c.Remaining() != 5 {
		t.Fatalf("cancelled task %s: processed %d, skipped %d, remaining %d; want 5 remaining", c.State, c.Processed, c.Skipped, c.Remaining())
	}
}

// orderIDs are the ids of queue's records, in id order (a task's).
func orderIDs(t *testing.T, pool *pgxpool.Pool, queue string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT id::text FROM redrive_record WHERE queue = $1 ORDER BY id", queue)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}
