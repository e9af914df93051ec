package task_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/task"
	"github.com/redrive/redrive/internal/testdate"
)

// A canary whose sample is never redelivered (the scheduler is behind, the
// topic paused or missing) is watched to its end with every outcome still
// pending: the verdict is inconclusive, never passed. The task stops there,
// the rest of its records left alone, unless its canary says
// on_inconclusive: continue.
func TestACanaryNeverPassesOnPendingOutcomes(t *testing.T) {
	for _, c := range []struct {
		on        string
		state     store.TaskState
		processed int64
	}{
		{"", store.TaskAborted, 10},
		{store.CanaryStop, store.TaskAborted, 10},
		{store.CanaryContinue, store.TaskCompleted, 50},
	} {
		t.Run("on_inconclusive="+c.on, func(t *testing.T) {
			t.Parallel()
			st := store.New(pgtest.New(t))
			ctx := context.Background()
			seed(t, st, "orders", 50)
			created := createTask(t, st, store.CreateTaskParams{Kind: store.TaskRetry, Filter: json.RawMessage(`{"queue":"orders"}`),
				BatchSize: 4, Total: 50, Canary: &store.CanarySpec{Sample: json.RawMessage(`10`), SampleSize: 10, Watch: "PT1M",
					WatchMs: 60_000, AbortIfRefail: 0.5, OnInconclusive: c.on}})
			clk := clock.NewPinned(testdate.Now().UTC())
			r, err := task.New(task.Config{Owner: "a", Poll: 20 * time.Millisecond, Clock: clk}, st)
			if err != nil {
				t.Fatal(err)
			}
			start(t, r)
			phase := func(want string) {
				t.Helper()
				eventually.Nil(t, "canary phase "+want, func() error {
					got, err := st.GetTask(ctx, created.ID)
					if err != nil {
						return err
					}
					if got.CanaryState.Phase != want || want == store.CanarySample && got.CanaryState.SampledAt == nil {
						return fmt.Errorf("phase %s, sampled at %v", got.CanaryState.Phase, got.CanaryState.SampledAt)
					}
					return nil
				})
			}
			phase(store.CanarySample)
			// Nobody redelivers the sample: after one watch the watch
			// begins anyway, and ends with all ten pending.
			clk.Advance(time.Minute)
			phase(store.CanaryWatch)
			clk.Advance(time.Minute)
			done := waitFinished(t, st, created.ID)
			rep := done.CanaryState.Report
			if done.State != c.state || done.CanaryState.Phase != store.CanaryInconclusive || done.Processed != c.processed ||
				rep == nil || rep.Pending != 10 || rep.Completed != 0 {
				t.Fatalf("finished %s (want %s), phase %s, processed %d (want %d), report %+v",
					done.State, c.state, done.CanaryState.Phase, done.Processed, c.processed, rep)
			}
		})
	}
}
