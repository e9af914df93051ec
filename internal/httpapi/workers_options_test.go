package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/eventually"
)

// The enqueue options a worker sees the effect of (OJS HTTP binding §9.1,
// core §5, worker protocol §5, §6), written from the specs. Time is the
// app's pinned clock.

// How the routes of this file narrow for a caller limited to other queues
// (narrow_test.go): writes of the worker API need write on every queue.
func init() {
	moreNarrowCases = append(moreNarrowCases, func(f *narrowFixture) map[string][]req {
		return map[string][]req{
			"POST /ojs/v1/jobs/batch": {{method: http.MethodPost, path: "/ojs/v1/jobs/batch",
				body: map[string]any{"jobs": []any{map[string]any{"type": "email.send", "args": []any{}, "queue": hiddenQueue}}}}},
			"DELETE /ojs/v1/jobs/:id": {{method: http.MethodDelete, path: "/ojs/v1/jobs/" + f.hiddenID},
				{method: http.MethodDelete, path: "/ojs/v1/jobs/" + f.shownID}},
		}
	})
}

// optionView is the part of a job these tests read beyond jobView.
type optionView struct {
	ID            string  `json:"id"`
	State         string  `json:"state"`
	Priority      int     `json:"priority"`
	Attempt       int     `json:"attempt"`
	ScheduledAt   *string `json:"scheduled_at"`
	CancelledAt   *string `json:"cancelled_at"`
	PreviousState string  `json:"previous_state"`
	Lease         *struct {
		ExpiresAt string `json:"expires_at"`
	} `json:"lease"`
	Errors []map[string]any `json:"errors"`
}

func (w *workerBundle) jobOptions(t *testing.T, id string) optionView {
	t.Helper()
	var out struct{ Job optionView }
	wantStatus(t, w.get(t, "/ojs/v1/jobs/"+id, &out), http.StatusOK)
	return out.Job
}

// fetchAll fetches queues (in that order of preference) until it gets want
// jobs: a fetch skips rows another statement holds for a moment.
func (w *workerBundle) fetchAll(t *testing.T, want int, queues ...string) []optionView {
	t.Helper()
	var got []optionView
	eventually.True(t, "the jobs are fetched", func() bool {
		var out struct{ Jobs []optionView }
		wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/fetch",
			map[string]any{"queues": queues, "worker_id": "w-1", "count": 10}, &out), http.StatusOK)
		got = append(got, out.Jobs...)
		return len(got) >= want
	})
	return got
}

// Core §5.2: "Within a queue, jobs with higher priority values MUST be
// fetched before jobs with lower priority values. Jobs with equal priority
// MUST be fetched in FIFO order." Worker protocol §6.3: the first queue of a
// fetch has the highest priority.
func TestFetchOrderIsQueueThenPriorityThenFIFO(t *testing.T) {
	w := setupWorkers(t)
	pub := func(queue string, priority int) string {
		w.clk.Advance(time.Millisecond)
		j := w.publish(t, map[string]any{"type": "t", "args": []any{}, "options": map[string]any{"queue": queue, "priority": priority}})
		return j.ID
	}
	lowFirst := pub("low", 100)
	a := pub("high", 0)
	b := pub("high", 10)
	c := pub("high", 0)
	d := pub("high", -100)
	if got := w.jobOptions(t, b).Priority; got != 10 {
		t.Fatalf("priority %d, want 10", got)
	}
	jobs := w.fetchAll(t, 5, "high", "low")
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	want := []string{b, a, c, d, lowFirst}
	if len(ids) != len(want) {
		t.Fatalf("fetched %v, want %v", ids, want)
	}
	for i := range want {
		if ids[i] != want[i] {
			t.Fatalf("fetched %v, want %v (queue order, then priority, then FIFO)", ids, want)
		}
	}
	for _, bad := range []any{101, -101, 999999, 1.5, "high"} {
		r := w.send(t, http.MethodPost, "/ojs/v1/jobs", map[string]any{"type": "t", "args": []any{}, "options": map[string]any{"priority": bad}}, nil)
		wantError(t, "priority", r, http.StatusBadRequest, "invalid_request", "options.priority")
	}
}

// Core §5.2 scheduled_at: "If set to a future time, the job MUST enter the
// scheduled state instead of available. The implementation MUST transition
// the job to available when the scheduled time arrives."
func TestDelayedJobIsScheduledUntilDue(t *testing.T) {
	w := setupWorkers(t)
	due := w.clk.Now().Add(time.Minute)
	var out struct{ Job optionView }
	r := w.send(t, http.MethodPost, "/ojs/v1/jobs", map[string]any{"type": "t", "args": []any{},
		"options": map[string]any{"queue": "later", "delay_until": due.Format(time.RFC3339Nano)}}, &out)
	wantStatus(t, r, http.StatusCreated)
	if out.Job.State != "scheduled" || out.Job.ScheduledAt == nil {
		t.Fatalf("published: %+v, want scheduled", out.Job)
	}
	if jobs := w.fetch(t, "later"); len(jobs) != 0 {
		t.Fatalf("a scheduled job was fetched: %+v", jobs)
	}
	// A past delay_until is available at once.
	past := w.publish(t, map[string]any{"type": "t", "args": []any{}, "scheduled_at": "2020-01-01T00:00:00Z", "queue": "now"})
	if past.State != "available" {
		t.Fatalf("past scheduled_at: %+v, want available", past)
	}
	w.clk.Advance(time.Minute)
	if got := w.jobOptions(t, out.Job.ID); got.State != "available" {
		t.Fatalf("at its time: %+v, want available", got)
	}
	if jobs := w.fetchAll(t, 1, "later"); jobs[0].ID != out.Job.ID {
		t.Fatalf("fetched %+v", jobs)
	}
	for _, bad := range []any{"tomorrow", "2026-03-15T09:30:00", 12} {
		r := w.send(t, http.MethodPost, "/ojs/v1/jobs", map[string]any{"type": "t", "args": []any{}, "options": map[string]any{"delay_until": bad}}, nil)
		wantError(t, "delay_until", r, http.StatusBadRequest, "invalid_request", "options.delay_until")
	}
	r = w.send(t, http.MethodPost, "/ojs/v1/jobs", map[string]any{"type": "t", "args": []any{},
		"scheduled_at": "2030-01-01T00:00:00Z", "options": map[string]any{"delay_until": "2031-01-01T00:00:00Z"}}, nil)
	wantError(t, "two times", r, http.StatusBadRequest, "invalid_request", "options.delay_until")
}

// Core §5.1 id: "MUST be a UUIDv7 formatted as a lowercase hexadecimal
// string with hyphens"; a taken id is a duplicate (409, code duplicate).
func TestClientChosenJobIDs(t *testing.T) {
	w := setupWorkers(t)
	const id = "019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f"
	var out struct{ Job optionView }
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/jobs", map[string]any{"type": "t", "args": []any{}, "id": id}, &out), http.StatusCreated)
	if out.Job.ID != id {
		t.Fatalf("id %s, want %s", out.Job.ID, id)
	}
	r := w.send(t, http.MethodPost, "/ojs/v1/jobs", map[string]any{"type": "t", "args": []any{2}, "id": id}, nil)
	wantError(t, "taken id", r, http.StatusConflict, "duplicate", "id")
	for _, bad := range []string{"550e8400-e29b-41d4-a716-446655440000", "not-a-uuid", "019461A8-1A2B-7C3D-8E4F-5A6B7C8D9E0F", "", "{019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f}"} {
		r := w.send(t, http.MethodPost, "/ojs/v1/jobs", map[string]any{"type": "t", "args": []any{}, "id": bad}, nil)
		wantError(t, "id "+bad, r, http.StatusBadRequest, "invalid_request", "id")
	}
}

// Worker protocol §5.3: a job's own visibility timeout is its lease when
// the fetch names none; §5.5: an expired lease makes the job available
// again at once, the attempt counted.
func TestJobVisibilityTimeoutAndItsExpiry(t *testing.T) {
	w := setupWorkers(t)
	j := w.publish(t, map[string]any{"type": "t", "args": []any{}, "queue": "vis",
		"options": map[string]any{"visibility_timeout_ms": 3000}, "retry": map[string]any{"max_attempts": 2, "on_exhaustion": "discard"}})
	fetchedAt := w.clk.Now()
	got := w.fetchAll(t, 1, "vis")[0]
	if got.Lease == nil || got.Lease.ExpiresAt == "" {
		t.Fatalf("fetched: %+v, want a lease", got)
	}
	if exp, _ := time.Parse(time.RFC3339Nano, got.Lease.ExpiresAt); !exp.Equal(fetchedAt.Add(3 * time.Second)) {
		t.Fatalf("lease expires at %s, want the job's 3 s after the fetch (%s)", got.Lease.ExpiresAt, fetchedAt.Add(3*time.Second))
	}
	w.clk.Advance(3*time.Second + time.Millisecond)
	if v := w.jobOptions(t, j.ID); v.State != "available" || v.Attempt != 1 || len(v.Errors) != 1 || v.Errors[0]["type"] != "visibility_timeout" {
		t.Fatalf("after its lease expired: %+v, want available, attempt 1, a visibility_timeout error", v)
	}
	w.fetchAll(t, 1, "vis")
	// The retry policy still decides: the second expiry exhausts it.
	w.clk.Advance(3*time.Second + time.Millisecond)
	if v := w.jobOptions(t, j.ID); v.State != "discarded" || v.Attempt != 2 {
		t.Fatalf("after the last lease expired: %+v, want discarded at attempt 2", v)
	}
	r := w.send(t, http.MethodPost, "/ojs/v1/jobs", map[string]any{"type": "t", "args": []any{}, "options": map[string]any{"visibility_timeout_ms": 0}}, nil)
	wantError(t, "zero visibility", r, http.StatusBadRequest, "invalid_request", "options.visibility_timeout_ms")
}

// Core §5.2 timeout: "If a job's execution exceeds this duration, the
// implementation MUST treat it as a failure with error type "timeout"";
// the lease never outlasts it.
func TestExecutionTimeoutFailsTheAttempt(t *testing.T) {
	w := setupWorkers(t)
	j := w.publish(t, map[string]any{"type": "t", "args": []any{}, "queue": "slow-job",
		"options": map[string]any{"timeout_ms": 2000, "retry": map[string]any{"max_attempts": 2, "initial_interval": "PT1S", "jitter": false}}})
	fetchedAt := w.clk.Now()
	var out struct{ Jobs []optionView }
	eventually.True(t, "fetched", func() bool {
		wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/fetch",
			map[string]any{"queues": []string{"slow-job"}, "worker_id": "w-1", "visibility_timeout_ms": 60000}, &out), http.StatusOK)
		return len(out.Jobs) == 1
	})
	if exp, _ := time.Parse(time.RFC3339Nano, out.Jobs[0].Lease.ExpiresAt); !exp.Equal(fetchedAt.Add(2 * time.Second)) {
		t.Fatalf("lease expires at %s, want the execution deadline %s", out.Jobs[0].Lease.ExpiresAt, fetchedAt.Add(2*time.Second))
	}
	w.clk.Advance(2*time.Second + time.Millisecond)
	v := w.jobOptions(t, j.ID)
	if v.State != "retryable" || len(v.Errors) != 1 || v.Errors[0]["type"] != "timeout" {
		t.Fatalf("after its timeout: %+v, want retryable with a timeout error", v)
	}
	// Core §5.2: "A value of 0 means no timeout".
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/jobs", map[string]any{"type": "t", "args": []any{}, "timeout": 0}, nil), http.StatusCreated)
	r := w.send(t, http.MethodPost, "/ojs/v1/jobs", map[string]any{"type": "t", "args": []any{}, "options": map[string]any{"timeout_ms": -5}}, nil)
	wantError(t, "negative timeout", r, http.StatusBadRequest, "invalid_request", "options.timeout_ms")
}

// HTTP binding §9.4 CANCEL.
func TestCancelJob(t *testing.T) {
	w := setupWorkers(t)
	var out struct{ Job optionView }
	avail := w.publish(t, map[string]any{"type": "t", "args": []any{}, "queue": "cancel-a"})
	wantStatus(t, w.send(t, http.MethodDelete, "/ojs/v1/jobs/"+avail.ID, nil, &out), http.StatusOK)
	if out.Job.State != "cancelled" || out.Job.PreviousState != "available" || out.Job.CancelledAt == nil {
		t.Fatalf("cancel available: %+v", out.Job)
	}
	if jobs := w.fetch(t, "cancel-a"); len(jobs) != 0 {
		t.Fatalf("a cancelled job was fetched: %+v", jobs)
	}
	if got := w.jobOptions(t, avail.ID); got.State != "cancelled" {
		t.Fatalf("read after cancel: %+v", got)
	}
	// Cancelled is terminal: a second cancel is a conflict naming the state.
	r := w.send(t, http.MethodDelete, "/ojs/v1/jobs/"+avail.ID, nil, nil)
	wantError(t, "cancel twice", r, http.StatusConflict, "conflict", "")
	if d := r.err(t).Error.Details; d["current_state"] != "cancelled" {
		t.Fatalf("details %v, want current_state cancelled", d)
	}

	// An active job: its worker can no longer ack it.
	active := w.publish(t, map[string]any{"type": "t", "args": []any{}, "queue": "cancel-b"})
	w.fetchAll(t, 1, "cancel-b")
	wantStatus(t, w.send(t, http.MethodDelete, "/ojs/v1/jobs/"+active.ID, nil, &out), http.StatusOK)
	if out.Job.PreviousState != "active" || out.Job.Lease != nil {
		t.Fatalf("cancel active: %+v", out.Job)
	}
	wantError(t, "ack cancelled", w.send(t, http.MethodPost, "/ojs/v1/workers/ack", map[string]any{"job_id": active.ID}, nil),
		http.StatusConflict, "conflict", "")

	// A completed job cannot be cancelled; an unknown one is not found.
	done := w.publish(t, map[string]any{"type": "t", "args": []any{}, "queue": "cancel-c"})
	w.fetchAll(t, 1, "cancel-c")
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/ack", map[string]any{"job_id": done.ID}, nil), http.StatusOK)
	wantError(t, "cancel completed", w.send(t, http.MethodDelete, "/ojs/v1/jobs/"+done.ID, nil, nil), http.StatusConflict, "conflict", "")
	wantError(t, "cancel unknown", w.send(t, http.MethodDelete, "/ojs/v1/jobs/019539a4-0000-7000-8000-000000000000", nil, nil),
		http.StatusNotFound, "not_found", "")
}

// HTTP binding §9.2: "The server MUST process the batch atomically"; "If any
// job in the batch fails validation, the entire batch is rejected".
func TestBatchIsAllOrNothing(t *testing.T) {
	w := setupWorkers(t)
	var out struct {
		Jobs  []optionView
		Count int
	}
	job := func(args ...any) map[string]any {
		return map[string]any{"type": "t", "args": args, "options": map[string]any{"queue": "batch"}}
	}
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/jobs/batch", map[string]any{"jobs": []any{job(1), job(2), job(3)}}, &out), http.StatusCreated)
	if out.Count != 3 || len(out.Jobs) != 3 || out.Jobs[0].State != "available" {
		t.Fatalf("batch: %+v", out)
	}
	bad := map[string]any{"type": "Not.Valid", "args": []any{}}
	r := w.send(t, http.MethodPost, "/ojs/v1/jobs/batch", map[string]any{"jobs": []any{job(4), bad}}, nil)
	wantError(t, "invalid job", r, http.StatusBadRequest, "invalid_request", "jobs[1].type")
	if d := r.err(t).Error.Details; d["index"] != float64(1) {
		t.Fatalf("details %v, want index 1", d)
	}
	// A duplicate id in the second job stores neither.
	const id = "019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e01"
	one, two := job(5), job(6)
	one["id"], two["id"] = id, id
	wantError(t, "duplicate in batch", w.send(t, http.MethodPost, "/ojs/v1/jobs/batch", map[string]any{"jobs": []any{one, two}}, nil),
		http.StatusConflict, "duplicate", "jobs[1].id")
	if n := w.count(t, "queue = 'batch'"); n != 3 {
		t.Fatalf("%d jobs stored, want the first batch's 3 only", n)
	}
	wantError(t, "empty batch", w.send(t, http.MethodPost, "/ojs/v1/jobs/batch", map[string]any{"jobs": []any{}}, nil),
		http.StatusBadRequest, "invalid_request", "jobs")
}

// OJS unique jobs spec: reject (409 duplicate naming the existing job),
// ignore (200 with the existing job), released when the holder leaves the
// states, and by its period.
func TestUniqueJobs(t *testing.T) {
	w := setupWorkers(t)
	u := func(onConflict string, args ...any) map[string]any {
		return map[string]any{"type": "invoice.generate", "args": args, "options": map[string]any{"queue": "uniq",
			"unique": map[string]any{"keys": []string{"type", "args"}, "period": "PT1H", "on_conflict": onConflict}}}
	}
	// Past 2^53: a float64 would make the two numbers one.
	big, big1 := json.Number("12345678901234567890"), json.Number("12345678901234567891")
	first := w.publish(t, u("reject", map[string]any{"order": 1, "big": big}))
	// Keys are order-insensitive; a number keeps every digit.
	r := w.send(t, http.MethodPost, "/ojs/v1/jobs", u("reject", map[string]any{"big": big, "order": 1}), nil)
	wantError(t, "duplicate", r, http.StatusConflict, "duplicate", "unique")
	if d := r.err(t).Error.Details; d["existing_job_id"] != first.ID || d["existing_job_state"] != "available" {
		t.Fatalf("details %v, want the existing job %s", d, first.ID)
	}
	w.publish(t, u("reject", map[string]any{"order": 1, "big": big1})) // another number: another key
	var ignored struct {
		Job          optionView
		Deduplicated bool
	}
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/jobs", u("ignore", map[string]any{"order": 1, "big": big}), &ignored), http.StatusOK)
	if !ignored.Deduplicated || ignored.Job.ID != first.ID {
		t.Fatalf("ignore: %+v, want the existing job, deduplicated", ignored)
	}
	// Completed is not in the default states: the key is free again.
	w.fetchAll(t, 2, "uniq")
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/ack", map[string]any{"job_id": first.ID}, nil), http.StatusOK)
	again := w.publish(t, u("reject", map[string]any{"order": 1, "big": big}))
	// Past the period the holder no longer counts.
	w.clk.Advance(time.Hour + time.Second)
	if after := w.publish(t, u("reject", map[string]any{"order": 1, "big": big})); after.ID == again.ID {
		t.Fatal("the period did not release the key")
	}
	for name, bad := range map[string]map[string]any{
		"unique.keys":        {"keys": []string{"argz"}},
		"unique.meta_keys":   {"keys": []string{"meta"}},
		"unique.states":      {"states": []string{"done"}},
		"unique.period":      {"period": "1h"},
		"unique.on_conflict": {"on_conflict": "merge"},
	} {
		r := w.send(t, http.MethodPost, "/ojs/v1/jobs", map[string]any{"type": "t", "args": []any{}, "unique": bad}, nil)
		wantError(t, name, r, http.StatusBadRequest, "invalid_request", name)
	}
	r = w.send(t, http.MethodPost, "/ojs/v1/jobs", map[string]any{"type": "t", "args": []any{map[string]any{"a": 1}},
		"unique": map[string]any{"keys": []string{"args"}, "args_keys": []string{"b"}}}, nil)
	wantError(t, "args_keys of nothing", r, http.StatusBadRequest, "invalid_request", "unique.args_keys")
	r = w.send(t, http.MethodPost, "/ojs/v1/jobs", map[string]any{"type": "t", "args": []any{}, "unique": map[string]any{"on_conflict": "replace"}}, nil)
	wantError(t, "replace", r, http.StatusUnprocessableEntity, "unsupported", "unique.on_conflict")
}

// OJS events spec §4.1: the worker API emits a job's lifecycle as it
// happens — enqueued, started, failed and retrying, started, a heartbeat,
// completed —
// each with the job's type, queue and attempt; a cancel, job.cancelled.
func TestWorkerAPIEmitsJobEvents(t *testing.T) {
	w := setupWorkers(t)
	j := w.publish(t, map[string]any{"type": "test.echo", "args": []any{}, "queue": "evq",
		"meta":  map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"retry": map[string]any{"max_attempts": 3, "initial_interval": "PT1S", "jitter": false}})
	w.fetchAll(t, 1, "evq")
	w.nack(t, j.ID, map[string]any{"code": "Flaky", "message": "try again"})
	w.clk.Advance(time.Second)
	w.fetchAll(t, 1, "evq")
	w.clk.Advance(100 * time.Millisecond)
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/heartbeat",
		map[string]any{"worker_id": "w-1", "active_jobs": []string{j.ID}}, nil), http.StatusOK)
	w.clk.Advance(150 * time.Millisecond)
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/ack", map[string]any{"job_id": j.ID, "worker_id": "w-1"}, nil), http.StatusOK)
	gone := w.publish(t, map[string]any{"type": "test.echo", "args": []any{}, "queue": "evq"})
	wantStatus(t, w.send(t, http.MethodDelete, "/ojs/v1/jobs/"+gone.ID, nil, nil), http.StatusOK)

	want := "job.enqueued:" + j.ID + ",job.started:" + j.ID + ",job.failed:" + j.ID + ",job.retrying:" + j.ID +
		",job.started:" + j.ID + ",job.heartbeat:" + j.ID + ",job.completed:" + j.ID + ",job.enqueued:" + gone.ID + ",job.cancelled:" + gone.ID
	var l eventListJSON
	eventually.True(t, "the job's events", func() bool {
		_, l = w.listEvents(t, readKey, "types=job.*&queues=evq&limit=100")
		return l.subjectsOf() == want
	}, eventually.Within(10*time.Second))
	for _, e := range l.Events {
		if e.Data.JobType != "test.echo" || e.Data.Queue != "evq" {
			t.Errorf("%s: %+v, want the job's type and queue", e.Type, e.Data)
		}
	}
	if hb := l.Events[5]; hb.Data.Attempt == nil || *hb.Data.Attempt != 2 {
		t.Errorf("job.heartbeat: %+v, want attempt 2", hb.Data)
	}
	if done := l.Events[6]; done.Data.Attempt == nil || *done.Data.Attempt != 2 || done.Data.DurationMS == nil || *done.Data.DurationMS != 250 {
		t.Errorf("job.completed: %+v, want attempt 2 that ran 250 ms", done.Data)
	}
}

// Graceful shutdown §5.1: "The backend MUST NOT assign new jobs to a quiet
// worker." A quieted worker's fetch answers no jobs; another worker's takes
// them.
func TestQuietWorkerIsAssignedNothing(t *testing.T) {
	w := setupWorkers(t)
	fetch := func(worker string) []optionView {
		var out struct{ Jobs []optionView }
		wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/fetch",
			map[string]any{"queues": []string{"quiet-q"}, "worker_id": worker}, &out), http.StatusOK)
		return out.Jobs
	}
	fetch("w-quiet") // the worker is seen
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/admin/workers/w-quiet/quiet", nil, nil), http.StatusOK)
	j := w.publish(t, map[string]any{"type": "t", "args": []any{}, "queue": "quiet-q"})
	for range 3 {
		if jobs := fetch("w-quiet"); len(jobs) != 0 {
			t.Fatalf("a quiet worker was assigned %+v", jobs)
		}
	}
	eventually.True(t, "another worker takes the job", func() bool {
		jobs := fetch("w-busy")
		return len(jobs) == 1 && jobs[0].ID == j.ID
	})
}

// Backpressure spec §7: a bounded queue refuses what would pass its
// max_depth with 429 QUEUE_FULL, Retry-After and the depth headers, a
// single job or a whole batch; what it admits carries the depth.
func TestPublishIsHeldToTheQueuesBackpressure(t *testing.T) {
	w := setupWorkers(t)
	wantStatus(t, w.send(t, http.MethodPut, "/ojs/v1/queues/bounded/config",
		map[string]any{"backpressure": map[string]any{"max_depth": 2, "strategy": "reject", "warning_threshold": 0.5}}, nil), http.StatusOK)
	job := map[string]any{"type": "t", "args": []any{}, "queue": "bounded"}
	r := w.send(t, http.MethodPost, "/ojs/v1/jobs", job, nil)
	wantStatus(t, r, http.StatusCreated)
	if r.header.Get("X-OJS-Queue-Depth") != "1" || r.header.Get("X-OJS-Queue-Bound") != "2" {
		t.Fatalf("admitted: depth %q bound %q, want 1 and 2", r.header.Get("X-OJS-Queue-Depth"), r.header.Get("X-OJS-Queue-Bound"))
	}
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/jobs", job, nil), http.StatusCreated)
	r = w.send(t, http.MethodPost, "/ojs/v1/jobs", job, nil)
	wantError(t, "full", r, http.StatusTooManyRequests, "QUEUE_FULL", "")
	if r.header.Get("Retry-After") == "" || r.header.Get("X-OJS-Queue-Depth") != "2" {
		t.Fatalf("429 headers %v, want Retry-After and the depth", r.header)
	}
	// A batch is admitted or refused whole; another queue is not bounded.
	other := map[string]any{"type": "t", "args": []any{}, "queue": "unbounded"}
	wantError(t, "batch", w.send(t, http.MethodPost, "/ojs/v1/jobs/batch", map[string]any{"jobs": []any{other, job}}, nil),
		http.StatusTooManyRequests, "QUEUE_FULL", "")
	if n := w.count(t, "queue IN ('bounded', 'unbounded')"); n != 2 {
		t.Fatalf("%d jobs stored, want the 2 admitted", n)
	}
	// A fetch makes room: the depth counts waiting jobs.
	w.fetchAll(t, 1, "bounded")
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/jobs", job, nil), http.StatusCreated)
}
