package console_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
)

// A task whose records all left its filter before it got to them (counted
// at its creation, gone since) adds up all the same, and says why: none
// processed, every one skipped because it no longer matched.
func TestATaskPageSaysWhyItSkippedRecords(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	st := store.New(pgtest.Pool(t, s.dbURL))
	task, err := st.CreateTask(context.Background(), &store.CreateTaskParams{Kind: store.TaskRetry,
		Filter: json.RawMessage(`{"queue":"orders"}`), BatchSize: 10, Total: 10, CreatedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	b.load(t, s.base+"/ui/tasks/"+task.ID)
	b.run(t, "the task's progress and why it skipped records", waitText("#task-state", "completed"),
		waitText("#task-progress", "0 of 10 records, 10 skipped (100%)"),
		waitText("#task-skipped", "10 records skipped"),
		waitText("#task-skipped-reasons", "10 no longer matched the filter when the task got to them"))
	b.screenshots(t, "task-skipped-reasons")
}
