package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/testdate"
)

// The worker API (docs/api.md#workers), and the OJS level-1 cases of the
// retry and dead-letter specs, written from the specs. Time is the app's
// injected clock: a test moves it past a retry delay, nothing waits.

type workerBundle struct {
	*bundle
	clk *clock.Fake
}

func setupWorkers(t *testing.T) *workerBundle {
	t.Helper()
	t.Parallel()
	clk := clock.NewPinned(testdate.Now().UTC().Truncate(time.Millisecond))
	return &workerBundle{bundle: start(t, options{clock: clk}), clk: clk}
}

type jobView struct {
	ID          string           `json:"id"`
	Type        string           `json:"type"`
	Queue       string           `json:"queue"`
	State       string           `json:"state"`
	Attempt     int              `json:"attempt"`
	MaxAttempts int              `json:"max_attempts"`
	Exhaustion  *string          `json:"exhaustion"`
	Source      string           `json:"source"`
	Errors      []map[string]any `json:"errors"`
	CompletedAt *string          `json:"completed_at"`
	ScheduledAt *string          `json:"scheduled_at"`
	Lease       *struct {
		WorkerID string `json:"worker_id"`
	} `json:"lease"`
}

func (w *workerBundle) publish(t *testing.T, body map[string]any) jobView {
	t.Helper()
	var out struct{ Job jobView }
	r := w.send(t, http.MethodPost, "/ojs/v1/jobs", body, &out)
	wantStatus(t, r, http.StatusCreated)
	if loc := r.header.Get("Location"); loc != "/ojs/v1/jobs/"+out.Job.ID {
		t.Fatalf("Location %q", loc)
	}
	return out.Job
}

func (w *workerBundle) fetch(t *testing.T, queues ...string) []jobView {
	t.Helper()
	var out struct{ Jobs []jobView }
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/fetch",
		map[string]any{"queues": queues, "worker_id": "w-1", "count": 10}, &out), http.StatusOK)
	return out.Jobs
}

type nackAnswer struct {
	State        string `json:"state"`
	Attempt      int    `json:"attempt"`
	RetryDelayMs *int64 `json:"retry_delay_ms"`
	Job          jobView
}

func (w *workerBundle) nack(t *testing.T, id string, e map[string]any) nackAnswer {
	t.Helper()
	var out nackAnswer
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/nack", map[string]any{"job_id": id, "error": e}, &out), http.StatusOK)
	return out
}

func (w *workerBundle) job(t *testing.T, id string) jobView {
	t.Helper()
	var out struct{ Job jobView }
	wantStatus(t, w.get(t, "/ojs/v1/jobs/"+id, &out), http.StatusOK)
	return out.Job
}

// fetchOne fetches queue and expects exactly job id.
func (w *workerBundle) fetchOne(t *testing.T, queue, id string) jobView {
	t.Helper()
	jobs := w.fetch(t, queue)
	if len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("fetch %s: %+v, want job %s", queue, jobs, id)
	}
	if jobs[0].State != "active" || jobs[0].Lease == nil || jobs[0].Lease.WorkerID != "w-1" {
		t.Fatalf("fetched job %+v, want active and leased to w-1", jobs[0])
	}
	return jobs[0]
}

func TestWorkerDeadLetterRoundTrip(t *testing.T) {
	w := setupWorkers(t)
	j := w.publish(t, map[string]any{"type": "email.send", "queue": "emails",
		"args":  []any{"a@example.com", map[string]any{"n": 1}},
		"retry": map[string]any{"max_attempts": 1, "on_exhaustion": "dead_letter"}})
	if u, err := uuid.Parse(j.ID); err != nil || u.Version() != 7 {
		t.Fatalf("id %q is not a UUIDv7", j.ID)
	}
	if j.State != "available" || j.Attempt != 0 || j.Source != "http" || j.MaxAttempts != 1 {
		t.Fatalf("published %+v", j)
	}
	// Stored before the answer; never visible to the Kafka scheduler.
	if n := w.count(t, "id = $1 AND next_retry_at IS NULL AND fetch_at IS NOT NULL", j.ID); n != 1 {
		t.Fatalf("job not stored as due for a fetch only")
	}
	w.fetchOne(t, "emails", j.ID)
	if jobs := w.fetch(t, "emails"); len(jobs) != 0 {
		t.Fatalf("a leased job was fetched again: %+v", jobs)
	}
	n := w.nack(t, j.ID, map[string]any{"code": "SMTP.Down", "message": "connection refused", "retryable": true})
	if n.State != "discarded" || n.Attempt != 1 || n.RetryDelayMs != nil {
		t.Fatalf("nack: %+v", n)
	}
	var list listJSON
	wantStatus(t, w.get(t, "/ojs/v1/dead-letter?queue=emails&exhaustion=dead_letter", &list), http.StatusOK)
	if len(list.Items) != 1 || list.Items[0].ID != j.ID || list.Items[0].Type != "email.send" || len(list.Items[0].Errors) != 1 {
		t.Fatalf("dead-letter list: %+v", list.Items)
	}
	got := w.job(t, j.ID)
	if len(got.Errors) != 1 {
		t.Fatalf("errors %+v", got.Errors)
	}
	for _, k := range []string{"code", "message", "attempt", "occurred_at"} {
		if _, ok := got.Errors[0][k]; !ok {
			t.Errorf("errors[0] has no %s: %v", k, got.Errors[0])
		}
	}
	if got.Errors[0]["code"] != "SMTP.Down" || got.Errors[0]["attempt"] != float64(1) {
		t.Errorf("errors[0] = %v", got.Errors[0])
	}

	// Retry from the dead letter: available, attempt 0; a fetch gives attempt 1; ack completes it.
	var rec recordJSON
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+j.ID+"/retry", nil, &rec), http.StatusOK)
	if rec.State != "available" || rec.Attempt != 0 {
		t.Fatalf("retried: state %s attempt %d", rec.State, rec.Attempt)
	}
	if n := w.count(t, "id = $1 AND next_retry_at IS NULL AND fetch_at IS NOT NULL", j.ID); n != 1 {
		t.Fatalf("a retried job must wait for a fetch, not for the scheduler")
	}
	// A retry is dated by Postgres's clock (wall time), past the test's.
	w.clk.Set(testdate.Now().Add(time.Second))
	// A fetch skips rows another statement holds (the archiver may be
	// settling the dead letter's copy): an empty answer means "poll again".
	var jobs []jobView
	eventually.True(t, "the retried job is fetched", func() bool {
		jobs = w.fetch(t, "emails")
		return len(jobs) > 0
	})
	if len(jobs) != 1 || jobs[0].ID != j.ID || jobs[0].Attempt != 1 {
		t.Fatalf("fetched %+v, want the job at attempt 1", jobs)
	}
	var ack struct {
		Acknowledged bool
		State        string
		Job          jobView
	}
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/ack", `{"job_id":"`+j.ID+`","result":{"sent":12345678901234567890}}`, &ack), http.StatusOK)
	if !ack.Acknowledged || ack.State != "completed" || ack.Job.CompletedAt == nil {
		t.Fatalf("ack: %+v", ack)
	}
	raw := w.get(t, "/ojs/v1/jobs/"+j.ID, nil)
	if !strings.Contains(string(raw.body), `"result":{"sent":12345678901234567890}`) {
		t.Errorf("result not kept exactly: %s", raw.body)
	}
	// Acking again is a conflict, not a second completion.
	wantError(t, "ack twice", w.send(t, http.MethodPost, "/ojs/v1/workers/ack", map[string]any{"job_id": j.ID}, nil),
		http.StatusConflict, "conflict", "")
}

func TestWorkerTwoDeadLettersAndDelete(t *testing.T) {
	w := setupWorkers(t)
	var ids []string
	for range 2 {
		j := w.publish(t, map[string]any{"type": "report.build", "queue": "reports", "args": []any{1},
			"retry": map[string]any{"max_attempts": 1, "on_exhaustion": "dead_letter"}})
		ids = append(ids, j.ID)
	}
	// A fetch skips rows another statement holds at that moment (ingest
	// notes a published job's incident just after storing it): a worker
	// fetches again for what it did not get.
	// Each fetch gives what it takes oldest first.
	var jobs []jobView
	eventually.Nil(t, "both jobs fetched", func() error {
		got := w.fetch(t, "reports")
		if len(got) == 2 && (got[0].ID != ids[0] || got[1].ID != ids[1]) {
			t.Fatalf("fetch: %+v, want both, oldest first", got)
		}
		if jobs = append(jobs, got...); len(jobs) < 2 {
			return fmt.Errorf("fetched %d", len(jobs))
		}
		return nil
	})
	if len(jobs) != 2 || !slices.Contains(ids, jobs[0].ID) || !slices.Contains(ids, jobs[1].ID) || jobs[0].ID == jobs[1].ID {
		t.Fatalf("fetched %+v, want both jobs once", jobs)
	}
	for _, id := range ids {
		w.nack(t, id, map[string]any{"code": "Build.Failed", "message": "x"})
	}
	var list listJSON
	wantStatus(t, w.get(t, "/ojs/v1/dead-letter?queue=reports", &list), http.StatusOK)
	if len(list.Items) != 2 {
		t.Fatalf("listed %d, want 2", len(list.Items))
	}
	var del struct {
		Deleted bool   `json:"deleted"`
		JobID   string `json:"job_id"`
	}
	wantStatus(t, w.send(t, http.MethodDelete, "/ojs/v1/dead-letter/"+ids[0], nil, &del), http.StatusOK)
	if !del.Deleted || del.JobID != ids[0] {
		t.Fatalf("delete: %+v", del)
	}
	wantStatus(t, w.get(t, "/ojs/v1/jobs/"+ids[0], nil), http.StatusNotFound)
	wantStatus(t, w.get(t, "/ojs/v1/dead-letter/"+ids[0], nil), http.StatusNotFound)
}

// delays publishes a job with retry, then fetches and nacks it times
// times, moving the clock to each retry's due time (and checking the job is
// not fetched a millisecond before it), and returns the answers.
func (w *workerBundle) delays(t *testing.T, queue string, retry map[string]any, times int, e map[string]any) []nackAnswer {
	t.Helper()
	j := w.publish(t, map[string]any{"type": "t", "queue": queue, "args": []any{}, "retry": retry})
	if e == nil {
		e = map[string]any{"code": "Flaky", "message": "try again"}
	}
	var out []nackAnswer
	for i := range times {
		f := w.fetchOne(t, queue, j.ID)
		if f.Attempt != i+1 {
			t.Fatalf("fetch %d: attempt %d, want %d", i+1, f.Attempt, i+1)
		}
		n := w.nack(t, j.ID, e)
		out = append(out, n)
		if n.State != "retryable" {
			break
		}
		if d := time.Duration(*n.RetryDelayMs) * time.Millisecond; d > time.Millisecond {
			w.clk.Advance(d - time.Millisecond)
			if jobs := w.fetch(t, queue); len(jobs) != 0 {
				t.Fatalf("fetched %v before its retry delay %v elapsed", jobs[0].ID, d)
			}
			w.clk.Advance(time.Millisecond)
		} else {
			w.clk.Advance(d)
		}
	}
	return out
}

func delayList(ns []nackAnswer) []int64 {
	var out []int64
	for _, n := range ns {
		if n.RetryDelayMs != nil {
			out = append(out, *n.RetryDelayMs)
		}
	}
	return out
}

func TestWorkerRetryPolicyCases(t *testing.T) {
	w := setupWorkers(t)
	noJitter := func(m map[string]any) map[string]any { m["jitter"] = false; return m }
	for _, tc := range []struct {
		name  string
		retry map[string]any
		nacks int
		want  []int64
	}{
		{"exponential", noJitter(map[string]any{"max_attempts": 5, "initial_interval": "PT1S", "backoff_coefficient": 2.0}), 2, []int64{1000, 2000}},
		{"capped", noJitter(map[string]any{"max_attempts": 4, "initial_interval": "PT1S", "backoff_coefficient": 10, "max_interval": "PT2S"}), 3, []int64{1000, 2000, 2000}},
		{"linear", noJitter(map[string]any{"max_attempts": 4, "initial_interval": "PT1S", "backoff_strategy": "linear"}), 3, []int64{1000, 2000, 3000}},
		{"constant", noJitter(map[string]any{"max_attempts": 4, "initial_interval": "PT1S", "backoff_coefficient": 1}), 3, []int64{1000, 1000, 1000}},
	} {
		got := delayList(w.delays(t, "q-"+tc.name, tc.retry, tc.nacks, nil))
		if len(got) != len(tc.want) {
			t.Errorf("%s: delays %v, want %v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: delays %v, want %v", tc.name, got, tc.want)
				break
			}
		}
	}

	// max_attempts 3 discards at attempt 3; attempts count 0 → 1 → 2 → 3.
	ns := w.delays(t, "q-three", noJitter(map[string]any{"max_attempts": 3}), 5, nil)
	if len(ns) != 3 || ns[2].State != "discarded" || ns[2].Attempt != 3 || ns[0].Attempt != 1 || ns[1].Attempt != 2 {
		t.Fatalf("max_attempts 3: %+v", ns)
	}

	// Jitter with PT2S stays in [1000, 3000].
	for i := range 5 {
		d := delayList(w.delays(t, "q-jitter-"+string(rune('a'+i)), map[string]any{"max_attempts": 2, "initial_interval": "PT2S", "jitter": true}, 1, nil))
		if len(d) != 1 || d[0] < 1000 || d[0] > 3000 {
			t.Fatalf("jittered delay %v, want within [1000, 3000]", d)
		}
	}

	// retryable: false and a glob of non_retryable_errors give up at once.
	for name, e := range map[string]map[string]any{
		"retryable false": {"code": "Bad.Input", "message": "no", "retryable": false},
		"glob by code":    {"code": "Auth.TokenExpired", "message": "expired"},
		"glob by class":   {"code": "E401", "message": "expired", "details": map[string]any{"error_class": "Auth.TokenExpired"}},
	} {
		ns := w.delays(t, "q-"+strings.ReplaceAll(name, " ", "-"),
			map[string]any{"max_attempts": 5, "non_retryable_errors": []string{"Auth.*"}, "on_exhaustion": "dead_letter"}, 2, e)
		if len(ns) != 1 || ns[0].State != "discarded" || ns[0].Attempt != 1 || ns[0].Job.Exhaustion == nil || *ns[0].Job.Exhaustion != "dead_letter" {
			t.Errorf("%s: %+v, want discarded as a dead letter at attempt 1", name, ns)
		}
	}

	// on_exhaustion: discard sets completed_at.
	ns = w.delays(t, "q-discard", map[string]any{"max_attempts": 1, "on_exhaustion": "discard"}, 1, nil)
	if ns[0].State != "discarded" || ns[0].Job.CompletedAt == nil || ns[0].Job.Exhaustion == nil || *ns[0].Job.Exhaustion != "discard" {
		t.Fatalf("on_exhaustion discard: %+v", ns[0])
	}

	// Invalid policies are refused at publish (RET-16).
	for name, retry := range map[string]map[string]any{
		"max_attempts -1":     {"max_attempts": -1},
		"coefficient 0.5":     {"backoff_coefficient": 0.5},
		"max below initial":   {"initial_interval": "PT10S", "max_interval": "PT1S"},
		"malformed duration":  {"initial_interval": "1 second"},
		"unknown on_exhaustn": {"on_exhaustion": "keep"},
	} {
		r := w.send(t, http.MethodPost, "/ojs/v1/jobs", map[string]any{"type": "t", "queue": "q", "args": []any{}, "retry": retry}, nil)
		wantError(t, name, r, http.StatusUnprocessableEntity, "validation_error", "")
		var e struct {
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		r.json(t, &e)
		if e.Error.Type != "validation_error" {
			t.Errorf("%s: error.type %q", name, e.Error.Type)
		}
	}
}

func TestWorkerLeaseExpiryIsAFailedAttempt(t *testing.T) {
	w := setupWorkers(t)
	j := w.publish(t, map[string]any{"type": "t", "queue": "slow", "args": []any{},
		"retry": map[string]any{"max_attempts": 2, "jitter": false, "on_exhaustion": "dead_letter"}})
	var out struct{ Jobs []jobView }
	// A fetch skips rows another statement holds at that moment (ingest
	// notes a published job's incident just after storing it): poll again.
	eventually.True(t, "the job is fetched", func() bool {
		wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/fetch",
			map[string]any{"queues": []string{"slow"}, "worker_id": "w-dies", "visibility_timeout": 30}, &out), http.StatusOK)
		return len(out.Jobs) > 0
	})
	if len(out.Jobs) != 1 || out.Jobs[0].ID != j.ID {
		t.Fatalf("fetch: %+v", out.Jobs)
	}
	w.clk.Advance(30 * time.Second)
	if jobs := w.fetch(t, "slow"); len(jobs) != 0 {
		t.Fatalf("fetched while the lease holds: %+v", jobs)
	}
	// The lease has expired (worker protocol §5.5): attempt 1 counted, an
	// error of type visibility_timeout recorded, the job available again.
	w.clk.Advance(time.Millisecond)
	got := w.job(t, j.ID)
	if got.State != "available" || len(got.Errors) != 1 || got.Errors[0]["type"] != "visibility_timeout" {
		t.Fatalf("after expiry: %+v", got)
	}
	wantError(t, "late ack", w.send(t, http.MethodPost, "/ojs/v1/workers/ack", map[string]any{"job_id": j.ID}, nil),
		http.StatusConflict, "lease_expired", "")
	if f := w.fetchOne(t, "slow", j.ID); f.Attempt != 2 {
		t.Fatalf("attempt %d, want 2", f.Attempt)
	}
	// The second lease expires too: exhausted, a dead letter.
	w.clk.Advance(31 * time.Second)
	w.fetch(t, "slow")
	if got := w.job(t, j.ID); got.State != "discarded" || got.Exhaustion == nil || *got.Exhaustion != "dead_letter" {
		t.Fatalf("after the last lease expired: %+v", got)
	}
}

// The Kafka scheduler never produces a pull-mode record, nor a job published
// over HTTP; a worker fetches them. Switching the queue back to kafka mode
// lets the scheduler produce its records (so the test can fail).
func TestSchedulerNeverProducesPullRecords(t *testing.T) {
	w := setupWorkers(t)
	wantStatus(t, w.send(t, http.MethodPut, "/ojs/v1/queues/orders/config",
		map[string]any{"redelivery": map[string]any{"mode": "pull"}}, nil), http.StatusOK)
	due := w.clk.Now().Add(-time.Minute)
	ids := w.seed(t, rec{queue: "orders", state: "retryable", nextRetryAt: &due})
	job := w.publish(t, map[string]any{"type": "t", "queue": "billing", "args": []any{1}})
	ctx := context.Background()
	for range 3 {
		n, err := w.app.Scheduler().RunOnce(ctx)
		if err != nil || n != 0 {
			t.Fatalf("scheduler claimed %d (err %v), want nothing", n, err)
		}
	}
	if n := w.count(t, "id = ANY($1) AND redelivered_at IS NULL AND attempt = 3", []string{ids[0]}); n != 1 {
		t.Fatal("the scheduler touched the pull-mode record")
	}
	jobs := w.fetch(t, "orders", "billing")
	if len(jobs) != 2 || jobs[0].ID != ids[0] || jobs[1].ID != job.ID || jobs[0].Attempt != 4 || jobs[0].Source != "kafka" {
		t.Fatalf("fetch: %+v, want the pull-mode record (attempt 4) then the published job", jobs)
	}
	n := w.nack(t, ids[0], map[string]any{"code": "X"})
	if n.State != "discarded" && n.State != "retryable" {
		t.Fatalf("nack: %+v", n)
	}
	// Back to kafka mode: a due record of orders is produced by the scheduler.
	due2 := w.clk.Now().Add(-time.Minute)
	more := w.seed(t, rec{queue: "orders", state: "retryable", nextRetryAt: &due2})
	wantStatus(t, w.send(t, http.MethodPut, "/ojs/v1/queues/orders/config",
		map[string]any{"redelivery": map[string]any{"mode": "kafka"}}, nil), http.StatusOK)
	eventually.True(t, "the kafka-mode record is redelivered", func() bool {
		_, _ = w.app.Scheduler().RunOnce(ctx)
		return w.count(t, "id = $1 AND redelivered_at IS NOT NULL", more[0]) == 1
	})
	if w.count(t, "id = $1 AND next_retry_at IS NULL AND redelivered_at IS NULL", job.ID) != 0 {
		t.Fatal("the published job was produced")
	}
}

func TestWorkerInputAndScopes(t *testing.T) {
	w := setupWorkers(t)
	// OJS clients send application/openjobspec+json.
	r := w.do(t, req{method: http.MethodPost, path: "/ojs/v1/jobs", key: writeKey, rawBody: true,
		header: http.Header{"Content-Type": {"application/openjobspec+json"}},
		body:   `{"specversion":"1.0","type":"t","queue":"ct","args":[12345678901234567890.123456789]}`})
	wantStatus(t, r, http.StatusCreated)
	if !strings.Contains(string(r.body), `"args":[12345678901234567890.123456789]`) {
		t.Errorf("args not kept exactly: %s", r.body)
	}
	for name, c := range map[string]struct {
		path  string
		body  any
		field string
	}{
		"no type":         {"/ojs/v1/jobs", map[string]any{"queue": "q", "args": []any{}}, "type"},
		"args object":     {"/ojs/v1/jobs", map[string]any{"type": "t", "args": map[string]any{}}, "args"},
		"type uppercase":  {"/ojs/v1/jobs", map[string]any{"type": "Email.Send", "args": []any{}}, "type"},
		"type space":      {"/ojs/v1/jobs", map[string]any{"type": "email send", "args": []any{}}, "type"},
		"type digit":      {"/ojs/v1/jobs", map[string]any{"type": "1email.send", "args": []any{}}, "type"},
		"type empty part": {"/ojs/v1/jobs", map[string]any{"type": "email..send", "args": []any{}}, "type"},
		"type dash":       {"/ojs/v1/jobs", map[string]any{"type": "email-send", "args": []any{}}, "type"},
		"no args":         {"/ojs/v1/jobs", map[string]any{"type": "t"}, "args"},
		"bad queue":       {"/ojs/v1/jobs", map[string]any{"type": "t", "queue": "a b", "args": []any{}}, "queue"},
		"meta array":      {"/ojs/v1/jobs", map[string]any{"type": "t", "args": []any{}, "meta": []any{}}, "meta"},
		"no queues":       {"/ojs/v1/workers/fetch", map[string]any{"worker_id": "w"}, "queues"},
		"empty worker":    {"/ojs/v1/workers/fetch", map[string]any{"queues": []string{"q"}, "worker_id": ""}, "worker_id"},
		"count 0":         {"/ojs/v1/workers/fetch", map[string]any{"queues": []string{"q"}, "worker_id": "w", "count": 0}, "count"},
		"vt 0":            {"/ojs/v1/workers/fetch", map[string]any{"queues": []string{"q"}, "worker_id": "w", "visibility_timeout": 0}, "visibility_timeout"},
		"ack bad id":      {"/ojs/v1/workers/ack", map[string]any{"job_id": "nope"}, "job_id"},
		"nack no error":   {"/ojs/v1/workers/nack", map[string]any{"job_id": uuid.NewString()}, "error"},
		"nack no code":    {"/ojs/v1/workers/nack", map[string]any{"job_id": uuid.NewString(), "error": map[string]any{"message": "m"}}, "error.code"},
		"nack details []": {"/ojs/v1/workers/nack", map[string]any{"job_id": uuid.NewString(), "error": map[string]any{"code": "c", "details": []any{}}}, "error.details"},
	} {
		wantError(t, name, w.send(t, http.MethodPost, c.path, c.body, nil), http.StatusBadRequest, "invalid_request", c.field)
	}
	wantError(t, "reserved queue", w.send(t, http.MethodPost, "/ojs/v1/jobs",
		map[string]any{"type": "t", "queue": dlqTopic, "args": []any{}}, nil), http.StatusUnprocessableEntity, "validation_error", "queue")
	wantError(t, "ack unknown", w.send(t, http.MethodPost, "/ojs/v1/workers/ack", map[string]any{"job_id": uuid.NewString()}, nil),
		http.StatusNotFound, "not_found", "")
	// A read key may look, not work.
	for _, path := range []string{"/ojs/v1/jobs", "/ojs/v1/workers/fetch", "/ojs/v1/workers/ack", "/ojs/v1/workers/nack"} {
		r := w.do(t, req{method: http.MethodPost, path: path, key: readKey, body: map[string]any{}})
		wantError(t, path+" with a read key", r, http.StatusForbidden, "forbidden", "")
	}
}
