package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/eventually"
)

type bulkAnswer struct {
	DryRun      bool     `json:"dry_run"`
	WouldAffect int64    `json:"would_affect"`
	Task        taskJSON `json:"task"`
}

// retryAll retries every dead letter in bulk: a dry run, which must count
// retry records to retry and skipped to leave alone (their topic is not one
// to go back to), then the task, until it completes.
func (b *bundle) retryAll(t *testing.T, retry, skipped int64) {
	t.Helper()
	var a struct {
		bulkAnswer
		Skipped int64 `json:"skipped"`
	}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry", map[string]any{"filter": map[string]any{}}, &a), http.StatusOK)
	if a.WouldAffect != retry || a.Skipped != skipped {
		t.Fatalf("dry run = %+v, want %d to retry and %d skipped", a, retry, skipped)
	}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry", map[string]any{"filter": map[string]any{}, "confirm": true}, &a), http.StatusAccepted)
	b.waitTask(t, a.Task.ID, "completed", 30*time.Second)
}

func TestBulkRetryAndPurgeDryRunThenConfirm(t *testing.T) {
	b := setup(t)
	// Paused topics keep the retried records available for inspection.
	for _, q := range []string{"orders", "billing"} {
		wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues/"+q+"/pause", nil, nil), http.StatusOK)
	}
	var rs []rec
	for range 30 {
		rs = append(rs, rec{queue: "orders", errType: "db.timeout"})
	}
	for range 5 {
		rs = append(rs, rec{queue: "orders", errType: "validation.bad"})
	}
	rs = append(rs, rec{queue: "orders", errType: "db.timeout", state: dlq.StateCompleted},
		rec{queue: "billing", errType: "db.timeout"})
	b.seed(t, rs...)

	filter := map[string]any{"queue": "orders", "error_type": "db.timeout"}
	var a bulkAnswer
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry", map[string]any{"filter": filter}, &a), http.StatusOK)
	if !a.DryRun || a.WouldAffect != 30 { // the completed one is not retryable
		t.Fatalf("dry run = %+v", a)
	}
	if n := b.count(t, "state = 'available'"); n != 0 {
		t.Fatalf("a dry run changed %d records", n)
	}
	r := b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry", map[string]any{"filter": filter, "confirm": true}, &a)
	wantStatus(t, r, http.StatusAccepted)
	if a.DryRun || a.WouldAffect != 30 || a.Task.ID == "" || r.header.Get("Location") != "/ojs/v1/tasks/"+a.Task.ID ||
		a.Task.Kind != "retry" || a.Task.CreatedBy != "ops-write" {
		t.Fatalf("confirmed = %+v (Location %q)", a, r.header.Get("Location"))
	}
	done := b.waitTask(t, a.Task.ID, "completed", 30*time.Second)
	if done.Processed != 30 || done.Total != 30 || done.Progress != 1 {
		t.Errorf("task = %+v", done)
	}
	if n := b.count(t, "state = 'available' AND attempt = 0 AND enqueued_at IS NOT NULL AND queue = 'orders' AND error_type = 'db.timeout'"); n != 30 {
		t.Errorf("%d records retried, want 30", n)
	}

	// Purge: dry run, then confirmed.
	pf := map[string]any{"filter": map[string]any{"queue": "orders", "error_type": "validation.bad"}}
	wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/dead-letter", pf, &a), http.StatusOK)
	if !a.DryRun || a.WouldAffect != 5 || b.count(t, "error_type = 'validation.bad'") != 5 {
		t.Fatalf("purge dry run = %+v", a)
	}
	pf["confirm"] = true
	wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/dead-letter", pf, &a), http.StatusAccepted)
	b.waitTask(t, a.Task.ID, "completed", 30*time.Second)
	if n := b.count(t, "error_type = 'validation.bad'"); n != 0 {
		t.Errorf("%d records left after purge", n)
	}
	if n := b.count(t, "queue = 'billing'"); n != 1 {
		t.Errorf("purge touched another queue: billing has %d", n)
	}

	var list struct {
		Items []taskJSON `json:"items"`
	}
	wantStatus(t, b.get(t, "/ojs/v1/tasks", &list), http.StatusOK)
	if len(list.Items) != 2 || list.Items[0].Kind != "purge" {
		t.Errorf("tasks = %+v", list.Items)
	}
	wantStatus(t, b.get(t, "/ojs/v1/tasks?state=completed&limit=1", &list), http.StatusOK)
	wantError(t, "cancel finished", b.send(t, http.MethodPost, "/ojs/v1/tasks/"+a.Task.ID+"/cancel", nil, nil), 409, "conflict", "")
	wantError(t, "unknown task", b.get(t, "/ojs/v1/tasks/01a20107-bc72-7d07-a136-944382c24f6e", nil), 404, "not_found", "")
	wantError(t, "bad task id", b.get(t, "/ojs/v1/tasks/nope", nil), 400, "invalid_request", "id")
	wantError(t, "bad task state", b.get(t, "/ojs/v1/tasks?state=done", nil), 400, "invalid_request", "state")
}

// A bulk retry of 10,000 records under a rate limit: its progress is seen to
// move, it is cancelled part-way, and a second task finishes the rest.
func TestBulkRetryOfTenThousandIsRateLimitedObservableAndCancellable(t *testing.T) {
	b := setup(t)
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues/billing/pause", nil, nil), http.StatusOK)
	rs := make([]rec, 10_000)
	for i := range rs {
		rs[i] = rec{queue: "billing", errType: "db.timeout"}
	}
	b.seed(t, rs...)

	body := map[string]any{"filter": map[string]any{"queue": "billing"}, "confirm": true, "rate_limit": 2000}
	var a bulkAnswer
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry", body, &a), http.StatusAccepted)
	if a.WouldAffect != 10_000 {
		t.Fatalf("would affect %d", a.WouldAffect)
	}
	var seen []int64
	eventually.True(t, "progress to be observed twice", func() bool {
		tj := b.task(t, a.Task.ID)
		if tj.Processed > 0 && (len(seen) == 0 || tj.Processed > seen[len(seen)-1]) {
			seen = append(seen, tj.Processed)
		}
		return len(seen) >= 2
	}, eventually.Within(20*time.Second))
	// Progress shows while it runs; its pacing is internal/task's test
	// (TestRateLimitPacesBatches, on an injected clock).
	if last := seen[len(seen)-1]; last >= 10_000 {
		t.Fatalf("processed %v: finished before it could be cancelled", seen)
	}
	var cancelled taskJSON
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/tasks/"+a.Task.ID+"/cancel", nil, &cancelled), http.StatusAccepted)
	if !cancelled.CancelRequested {
		t.Errorf("cancel answer = %+v", cancelled)
	}
	final := b.waitTask(t, a.Task.ID, "cancelled", 10*time.Second)
	if final.Processed <= 0 || final.Processed >= 10_000 {
		t.Fatalf("cancelled task processed %d", final.Processed)
	}
	if n := b.count(t, "state = 'available'"); int64(n) != final.Processed {
		t.Errorf("%d records available, task says %d processed", n, final.Processed)
	}

	// The rest, unlimited this time. The records the first task queued are
	// neither in flight (the topic is paused) nor completed: they are
	// retried again, which changes nothing for them.
	body["rate_limit"] = 0
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry", body, &a), http.StatusAccepted)
	if a.WouldAffect != 10_000 {
		t.Errorf("second task would affect %d, want 10000", a.WouldAffect)
	}
	rest := b.waitTask(t, a.Task.ID, "completed", 60*time.Second)
	if rest.Processed != a.WouldAffect || b.count(t, "state = 'available'") != 10_000 {
		t.Errorf("second task = %+v, available = %d", rest, b.count(t, "state = 'available'"))
	}
}

// A task interrupted by a restart is resumed by the next server on the same
// database and finishes without retrying anything twice.
func TestBulkTaskSurvivesARestart(t *testing.T) {
	t.Parallel()
	b := start(t, options{})
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues/billing/pause", nil, nil), http.StatusOK)
	rs := make([]rec, 3000)
	for i := range rs {
		rs[i] = rec{queue: "billing"}
	}
	b.seed(t, rs...)
	body := map[string]any{"filter": map[string]any{"queue": "billing"}, "confirm": true, "rate_limit": 1000}
	var a bulkAnswer
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry", body, &a), http.StatusAccepted)
	eventually.True(t, "some progress", func() bool { return b.task(t, a.Task.ID).Processed > 0 }, eventually.Within(20*time.Second))
	b.stop()
	var processed int64
	if err := b.pool.QueryRow(t.Context(), "SELECT processed FROM redrive_task WHERE id = $1", a.Task.ID).Scan(&processed); err != nil {
		t.Fatal(err)
	}
	if processed >= 3000 {
		t.Fatalf("the task finished before the restart (%d)", processed)
	}
	// Records retried before the restart must not be retried again: mark them.
	if _, err := b.pool.Exec(t.Context(), "UPDATE redrive_record_data d SET meta = '{\"before_restart\":true}' FROM redrive_lifecycle l WHERE l.id = d.id AND l.state = 'available'"); err != nil {
		t.Fatal(err)
	}

	b2 := start(t, options{dbURL: b.dbURL, brokers: b.brokers})
	done := b2.waitTask(t, a.Task.ID, "completed", 60*time.Second)
	if done.Processed != 3000 || b2.count(t, "state = 'available'") != 3000 {
		t.Errorf("after restart: task %+v, %d available", done, b2.count(t, "state = 'available'"))
	}
	if n := b2.count(t, "meta ? 'before_restart'"); int64(n) != processed {
		t.Errorf("%d records marked before the restart, %d processed then", n, processed)
	}
}

func TestBulkValidation(t *testing.T) {
	b := setup(t)
	cases := []struct {
		body   string
		status int
		field  string
	}{
		{`{"filter":{"state":"dead"}}`, 400, "filter.state"},
		{`{"filter":{"since":"yesterday"}}`, 400, "filter.since"},
		{`{"filter":{"since":"2026-02-13T10:00:00Z","until":"2026-02-12T10:00:00Z"}}`, 400, "filter.until"},
		{`{"filter":{"path":"a.b"}}`, 400, "filter.value"},
		{`{"filter":{"path":"a..b","value":1}}`, 400, "filter.path"},
		{`{"filter":{"path":"a","value":{"x":1}}}`, 400, "filter.value"},
		{`{"filter":{"header":[":v"]}}`, 400, "filter.header"},
		{`{"filter":{"colour":"red"}}`, 400, "filter.colour"},
		{`{"filter":{"queue":17}}`, 400, "filter.queue"},
		{`{"confirm":"yes"}`, 400, "confirm"},
		{`{"rate_limit":-1}`, 400, "rate_limit"},
		{`{"rate_limit":1e9}`, 400, "rate_limit"},
		{`{"rate_limit":1e-9}`, 400, "rate_limit"},
		{`{}{}`, 400, "body"},
		{`[]`, 400, "body"},
		{``, 400, "body"},
	}
	for _, c := range cases {
		r := b.do(t, req{method: http.MethodPost, path: "/ojs/v1/dead-letter/retry", key: writeKey, body: c.body})
		wantError(t, c.body, r, c.status, "invalid_request", c.field)
	}
	wantError(t, "query on bulk", b.do(t, req{method: http.MethodPost, path: "/ojs/v1/dead-letter/retry?confirm=true", key: writeKey, body: `{}`}),
		400, "invalid_request", "confirm")
}
