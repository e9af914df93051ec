package task_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/pgtest"
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
	created, err := st.CreateTask(ctx, &store.CreateTaskParams{Kind: store.TaskRetry, Filter: json.RawMessage(`{}`),
		BatchSize: 500, Total: 4, CreatedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := task.New(task.Config{Decode: decode, Poll: 20 * time.Millisecond, OwnTopics: []string{"dlq"}}, st)
	if err != nil {
		t.Fatal(err)
	}
	start(t, r)
	waitFinished(t, st, created.ID)
	for q, want := range map[string]int64{"orders": 0, "_orders": 0, "dlq": 2, "__consumer_offsets": 2} {
		n, err := st.Count(ctx, &store.Filter{Queue: q, State: dlq.StateDiscarded})
		if err != nil || n != want {
			t.Errorf("%s: %d dead letters left (%v), want %d", q, n, err, want)
		}
	}
}
