package task_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/records"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/task"
)

// A bulk retry of everything leaves the records of Redrive's own topics and
// of Kafka's internal topics ("__…") alone: they have no topic to go back to.
func TestRetryTaskLeavesOwnAndInternalTopicsAlone(t *testing.T) {
	t.Parallel()
	st := store.New(pgtest.New(t))
	ctx := context.Background()
	seed(t, st, "orders", 3)
	seed(t, st, "dlq", 2)
	seed(t, st, "__consumer_offsets", 2)
	seed(t, st, "_orders", 1) // one underscore is an ordinary topic
	created := createTask(t, st, store.CreateTaskParams{Kind: store.TaskRetry, Filter: json.RawMessage(`{}`),
		BatchSize: 500, Total: 4})
	scope := records.RetryScope(dlq.NewReservedTopics("dlq"))
	r, err := task.New(task.Config{Poll: 20 * time.Millisecond, RetryScope: &scope}, st)
	if err != nil {
		t.Fatal(err)
	}
	start(t, r)
	waitFinished(t, st, created.ID)
	for q, want := range map[string]int64{"orders": 0, "_orders": 0, "dlq": 2, "__consumer_offsets": 2} {
		n, err := st.Count(ctx, &filter.Filter{Queue: q, State: dlq.StateDiscarded})
		if err != nil || n != want {
			t.Errorf("%s: %d dead letters left (%v), want %d", q, n, err, want)
		}
	}
}

// A task whose stored filter the filter package refuses (one stored before a
// bound existed) fails, saying which field, and touches nothing.
func TestATaskWithAnUnreadableFilterFails(t *testing.T) {
	t.Parallel()
	st := store.New(pgtest.New(t))
	ctx := context.Background()
	seed(t, st, "orders", 3)
	deep, _ := json.Marshal(map[string]any{"path": strings.Repeat("a.", 40) + "a", "value": 1})
	created := createTask(t, st, store.CreateTaskParams{Kind: store.TaskPurge, Filter: deep, BatchSize: 500, Total: 3})
	r, err := task.New(task.Config{Poll: 20 * time.Millisecond}, st)
	if err != nil {
		t.Fatal(err)
	}
	start(t, r)
	got := waitFinished(t, st, created.ID)
	if got.State != store.TaskFailed {
		t.Fatalf("task is %s, want failed: %+v", got.State, got)
	}
	if len(got.Errors) != 1 || !strings.HasPrefix(got.Errors[0].Message, "invalid stored filter: filter.path: must have at most 32 dot-separated keys") {
		t.Errorf("errors = %+v", got.Errors)
	}
	if n, err := st.Count(ctx, &filter.Filter{Queue: "orders"}); err != nil || n != 3 {
		t.Errorf("%d records left (%v), want 3", n, err)
	}
}
