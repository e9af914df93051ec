package task_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/task"
	"github.com/redrive/redrive/internal/testdate"
)

// A replica dies in the middle of a canary's watch (its Postgres
// connections gone: it neither releases the task nor renews its lease).
// Another takes the task over once the lease ran out and resumes the watch
// where it was: the same sample (not retried again), the same end of the
// watch; it counts each record's outcome — failed the same way, another
// way, acknowledged, completed by its redelivery, deleted — and, the share
// failing the same way below abort_if_refail, lets the rest go when the
// watch ends.
func TestACanaryResumesOnAnotherReplicaAfterADeath(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st := store.New(pool)
	seed(t, st, "orders", 50)
	created := createTask(t, st, store.CreateTaskParams{Kind: store.TaskRetry, Filter: json.RawMessage(`{"queue":"orders"}`),
		BatchSize: 4, Total: 50, Canary: &store.CanarySpec{Sample: json.RawMessage(`10`), SampleSize: 10, Watch: "PT1M",
			WatchMs: 60_000, AbortIfRefail: 0.5}})
	clk := clock.NewPinned(testdate.Now().UTC())
	get := func() *store.Task {
		t.Helper()
		got, err := st.GetTask(ctx, created.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	waitFor := func(what string, cond func(*store.Task) bool) *store.Task {
		t.Helper()
		var got *store.Task
		eventually.Nil(t, what, func() error {
			if got = get(); !cond(got) {
				return fmt.Errorf("task %s, canary %+v", got.State, got.CanaryState)
			}
			return nil
		})
		return got
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, created.ID); err != nil {
			t.Fatal(err)
		}
	}
	const sample = "SELECT record_id FROM redrive_task_sample WHERE task_id = $1"

	poolA, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	a, err := task.New(task.Config{Owner: "a", Lease: 500 * time.Millisecond, Poll: 20 * time.Millisecond, Clock: clk}, store.New(poolA))
	if err != nil {
		t.Fatal(err)
	}
	start(t, a)
	// The sample is retried in batches of 4 (4, 4, 2), then waits for its
	// redelivery: the scheduler's claim, which this test makes.
	waitFor("the sample retried", func(t *store.Task) bool { return t.CanaryState.SampledAt != nil })
	exec(`UPDATE redrive_lifecycle SET attempt = 1, next_retry_at = NULL, state = 'completed', completed_by = 'redelivered',
		completed_at = now(), redelivered_at = now() WHERE id IN (` + sample + `)`)
	watching := waitFor("the watch", func(t *store.Task) bool { return t.CanaryState.Phase == store.CanaryWatch })
	if watching.CanaryState.Sampled != 10 || watching.Processed != 10 || !watching.CanaryState.WatchUntil.Equal(clk.Now().Add(time.Minute).Truncate(time.Microsecond)) {
		t.Fatalf("watching: processed %d, canary %+v", watching.Processed, watching.CanaryState)
	}
	// The replica dies.
	poolA.Close()

	// Meanwhile the redeliveries' outcomes come in: three fail as before,
	// two another way, one is acknowledged, one deleted; three stay
	// completed by their redelivery.
	again := func(errType string) string {
		return `, l AS (UPDATE redrive_lifecycle SET state = 'discarded', exhaustion = 'dead_letter', completed_at = NULL, completed_by = NULL
			WHERE id IN (SELECT id FROM picked))
			UPDATE redrive_record_data SET errors = errors || jsonb_build_array(jsonb_build_object('attempt', 1, 'type', '` + errType + `', 'message', '',
			'code', 'RETRY', 'occurred_at', now())) WHERE id IN (SELECT id FROM picked)`
	}
	exec(`WITH picked(id) AS (` + sample + ` ORDER BY record_id LIMIT 3) ` + again("x"))
	exec(`WITH picked(id) AS (` + sample + ` ORDER BY record_id OFFSET 3 LIMIT 2) ` + again("y"))
	exec(`UPDATE redrive_lifecycle SET completed_by = 'ack' WHERE id IN (` + sample + ` ORDER BY record_id OFFSET 5 LIMIT 1)`)
	exec(`WITH l AS (DELETE FROM redrive_lifecycle WHERE id IN (` + sample + ` ORDER BY record_id OFFSET 6 LIMIT 1) RETURNING id)
		DELETE FROM redrive_record_data WHERE id IN (SELECT id FROM l)`)

	b, err := task.New(task.Config{Owner: "b", Poll: 20 * time.Millisecond, Clock: clk}, st)
	if err != nil {
		t.Fatal(err)
	}
	start(t, b)
	want := store.CanaryReport{Sample: 10, Delivered: 9, Completed: 4, FailedSame: 3, FailedDifferent: 2, Deleted: 1}
	taken := waitFor("the takeover", func(t *store.Task) bool {
		return t.LeaseOwner != nil && *t.LeaseOwner == "b" && t.CanaryState.Report != nil && *t.CanaryState.Report == want
	})
	if taken.CanaryState.Phase != store.CanaryWatch || !taken.CanaryState.WatchUntil.Equal(*watching.CanaryState.WatchUntil) ||
		taken.Processed != 10 || taken.CanaryState.Sampled != 10 {
		t.Fatalf("taken over: processed %d, canary %+v", taken.Processed, taken.CanaryState)
	}
	clk.Advance(time.Minute)
	done := waitFinished(t, st, created.ID)
	if done.State != store.TaskCompleted || done.CanaryState.Phase != store.CanaryPassed || done.Processed != 50 ||
		*done.CanaryState.Report != want {
		t.Fatalf("finished: %s, processed %d, canary %+v, report %+v", done.State, done.Processed, done.CanaryState, *done.CanaryState.Report)
	}
	var rows int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM redrive_task_sample WHERE task_id = $1", created.ID).Scan(&rows); err != nil || rows != 10 {
		t.Fatalf("%d sample rows (%v), want 10: the sample was retried once", rows, err)
	}
}
