package task_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/task"
	"github.com/redrive/redrive/internal/testdate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var offsets atomic.Int64

func seed(t *testing.T, st *store.Store, queue string, n int) {
	t.Helper()
	now := testdate.Now().UTC()
	recs := make([]dlq.Record, n)
	for i := range recs {
		id := uuid.MustParse(dlq.NewID(testdate.Now()))
		recs[i] = dlq.Record{ID: id.String(), Queue: queue, State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDeadLetter,
			Attempt: 1, MaxAttempts: 1, Format: dlq.FormatRedrive, DLQ: dlq.Coord{Topic: "dlq", Offset: offsets.Add(1)},
			Value: fmt.Appendf(nil, "%d", i), Retry: json.RawMessage(`{}`), Meta: json.RawMessage(`{}`),
			Errors: []dlq.ErrorEntry{{Attempt: 1, Type: "x", Code: dlq.CodeRetry, OccurredAt: now}}, CreatedAt: now, UpdatedAt: now,
			DiscardedAt: &now}
	}
	if _, err := st.InsertRecords(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
}

// A replica that dies holding a task (no release) loses it when its lease
// runs out; another replica resumes and finishes it.
func TestAnExpiredLeaseIsTakenOver(t *testing.T) {
	t.Parallel()
	st := store.New(pgtest.New(t))
	ctx := context.Background()
	seed(t, st, "orders", 1200)
	seed(t, st, "other", 10)
	created := createTask(t, st, store.CreateTaskParams{Kind: store.TaskRetry, Filter: json.RawMessage(`{"queue":"orders"}`),
		BatchSize: 500, Total: 1200})
	// The dead replica: claims, does one batch, renews its lease once more,
	// for a millisecond, and never comes back. (Leases run on Postgres's
	// clock: a lease short enough to lapse in the test could lapse, on a
	// busy machine, before the check that it holds.)
	dead, err := st.ClaimTask(ctx, "dead", time.Minute)
	if err != nil || dead.ID != created.ID {
		t.Fatalf("claim = %+v, %v", dead, err)
	}
	if _, _, err := st.TaskBatch(ctx, dead, time.Minute, func(tx *store.Tx) (store.BatchResult, error) {
		return st.RetryBatch(ctx, tx, &store.BatchParams{Filter: filter.Filter{Queue: "orders"}, Limit: 500})
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClaimTask(ctx, "early", time.Minute); err == nil {
		t.Fatal("a live lease was taken over")
	}
	if _, _, err := st.TaskBatch(ctx, dead, time.Millisecond, func(*store.Tx) (store.BatchResult, error) {
		return store.BatchResult{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	var batches atomic.Int64
	r, err := task.New(task.Config{Poll: 20 * time.Millisecond, Owner: "alive",
		OnBatch: func(*store.Task, []store.BatchRow) { batches.Add(1) }}, st)
	if err != nil {
		t.Fatal(err)
	}
	start(t, r)
	if got := waitFinished(t, st, created.ID); got.State != store.TaskCompleted || got.Processed != 1200 {
		t.Errorf("task %s with %d processed, want completed with 1200", got.State, got.Processed)
	}
	if batches.Load() != 2 { // 700 left: 500 + 200
		t.Errorf("%d batches after the takeover, want 2", batches.Load())
	}
	n, err := st.Count(ctx, &filter.Filter{Queue: "other", State: dlq.StateDiscarded})
	if err != nil || n != 10 {
		t.Errorf("another queue's records were touched: %d left, %v", n, err)
	}
}

// A Postgres outage in the middle of a bulk retry pauses the task, which
// resumes as soon as the server is back. Counting the outage's batches as
// errors (MaxBatchErrors is 2 here) would try to fail the task, leaving it
// stuck until its hour-long lease ran out. The outage lasts five of the
// task's waits for Postgres, on the test's clock: nothing sleeps.
func TestAPostgresOutagePausesATask(t *testing.T) {
	t.Parallel()
	cluster, url := pgtest.NewCluster(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st := store.New(pool)
	seed(t, st, "orders", 600)
	created := createTask(t, st, store.CreateTaskParams{Kind: store.TaskRetry, Filter: json.RawMessage(`{"queue":"orders"}`),
		BatchSize: 100, RateLimit: 200, Total: 600})
	var batches atomic.Int64
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	r, err := task.New(task.Config{Poll: 20 * time.Millisecond, MaxBatchErrors: 2, Lease: time.Hour, Clock: clk,
		OnBatch: func(*store.Task, []store.BatchRow) { batches.Add(1) }}, st)
	if err != nil {
		t.Fatal(err)
	}
	start(t, r)
	// The first batch is done; the task waits on its rate limit (200/s:
	// half a second a batch of 100).
	mustWait(t, clk)
	if n := batches.Load(); n != 1 {
		t.Fatalf("%d batches before the outage, want 1", n)
	}
	if err := cluster.Pause(); err != nil {
		t.Fatal(err)
	}
	// Each wait ends into a batch that cannot reach Postgres, and the task
	// waits for it again: more failed batches than MaxBatchErrors.
	for range 5 {
		advance(t, clk)
		mustWait(t, clk)
	}
	if n := batches.Load(); n != 1 {
		t.Fatalf("%d batches during the outage, want none but the first", n)
	}
	if err := cluster.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	dctx, stopDriving := context.WithCancel(ctx)
	defer stopDriving()
	go drive(dctx, clk)
	if got := waitFinished(t, st, created.ID); got.State != store.TaskCompleted || got.Processed != 600 {
		t.Fatalf("after the outage the task is %s with %d processed, want completed with 600", got.State, got.Processed)
	}
	n, err := st.Count(ctx, &filter.Filter{Queue: "orders", State: dlq.StateDiscarded})
	if err != nil || n != 0 {
		t.Errorf("%d records of the task still discarded, %v", n, err)
	}
}

// A rate-limited task asks to wait exactly what its rate requires: 1,200
// records at 100/s go in batches of 100, the first at once and each paid
// for with a second's wait, so the task takes 12 s on the test's clock,
// 100 records/s; 20 records at 4/s take 5 s, 4/s (they took 4 s, 5/s,
// when the first second's records went free). The clock is the test's;
// Sleep advances it.
func TestRateLimitPacesBatches(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		records int
		rate    float64
		sleeps  int
	}{{1200, 100, 12}, {20, 4, 5}, {3, 0.5, 3}} {
		t.Run(fmt.Sprintf("%d at %v per second", c.records, c.rate), func(t *testing.T) {
			t.Parallel()
			elapsed, slept := runPaced(t, c.records, c.rate)
			want := time.Duration(float64(c.records) / c.rate * float64(time.Second))
			if len(slept) != c.sleeps || elapsed < want-want/100 || elapsed > want+want/100 {
				t.Fatalf("waited %v in %d sleeps (%v), want %v in %d", elapsed, len(slept), slept, want, c.sleeps)
			}
			if got := float64(c.records) / elapsed.Seconds(); got < c.rate*0.9 || got > c.rate*1.1 {
				t.Fatalf("%d records in %v: %.2f records/s, asked %v", c.records, elapsed, got, c.rate)
			}
		})
	}
}

// runPaced runs a retry task of n records at rate on a clock that only
// Sleep advances, and says how long it took on that clock and each wait.
func runPaced(t *testing.T, n int, perSecond float64) (time.Duration, []time.Duration) {
	st := store.New(pgtest.New(t))
	ctx := context.Background()
	seed(t, st, "orders", n)
	created := createTask(t, st, store.CreateTaskParams{Kind: store.TaskRetry, Filter: json.RawMessage(`{"queue":"orders"}`),
		BatchSize: 500, RateLimit: perSecond, Total: int64(n)})
	begin := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(begin)
	r, err := task.New(task.Config{Poll: 20 * time.Millisecond, Clock: clk}, st)
	if err != nil {
		t.Fatal(err)
	}
	start(t, r)
	// The runner waits on the clock only for its rate limit while the task
	// runs, and for its next poll once it is finished.
	var slept []time.Duration
	for {
		mustWait(t, clk)
		got, err := st.GetTask(ctx, created.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == store.TaskCompleted {
			if got.Processed != int64(n) {
				t.Fatalf("task completed with %d of %d records", got.Processed, n)
			}
			break
		}
		slept = append(slept, advance(t, clk))
	}
	return clk.Now().Sub(begin), slept
}

// start starts r until the test ends.
// createTask creates the task p describes, created by "test".
func createTask(t *testing.T, st *store.Store, p store.CreateTaskParams) *store.Task {
	t.Helper()
	p.CreatedBy = "test"
	created, err := st.CreateTask(context.Background(), &p)
	if err != nil {
		t.Fatal(err)
	}
	return created
}

func start(t *testing.T, r *task.Runner) {
	t.Helper()
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Errorf("stop the runner: %v", err)
		}
	})
}

// waitFinished waits until the task is neither pending nor running.
func waitFinished(t *testing.T, st *store.Store, id string) *store.Task {
	t.Helper()
	var got *store.Task
	eventually.Nil(t, "task "+id+" to finish", func() error {
		var err error
		if got, err = st.GetTask(context.Background(), id); err != nil {
			return err
		}
		if got.State == store.TaskRunning || got.State == store.TaskPending {
			return fmt.Errorf("it is %s with %d processed", got.State, got.Processed)
		}
		return nil
	})
	return got
}

// mustWait waits until the runner waits on clk.
func mustWait(t *testing.T, clk *clock.Fake) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventually.Timeout)
	defer cancel()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatalf("the runner does not wait on the clock: %v", err)
	}
}

// advance moves clk to the end of the wait and returns how long it was.
func advance(t *testing.T, clk *clock.Fake) time.Duration {
	t.Helper()
	d, ok := clk.UntilNext()
	if !ok {
		t.Fatal("nothing waits on the clock")
	}
	clk.Advance(d)
	return d
}

// drive ends every wait on clk as soon as it begins, until ctx ends.
func drive(ctx context.Context, clk *clock.Fake) {
	for clk.BlockUntil(ctx, 1) == nil {
		if d, ok := clk.UntilNext(); ok {
			clk.Advance(d)
		}
	}
}
