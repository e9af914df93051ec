package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/idptest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// The worker lifecycle (docs/api.md#worker-lifecycle), written from the OJS
// worker protocol (§2, §4, §5.4, §10), HTTP binding §10.4 and admin API §9.
// Time is the app's pinned clock: a test moves it, nothing waits.

func init() {
	// How the worker routes narrow for a caller limited to payments.*
	// (TestNoRouteShowsAQueueBeyondTheCallersRoles). HEAD is added here:
	// narrowCases only adds it for its own routes.
	moreNarrowCases = append(moreNarrowCases, func(f *narrowFixture) map[string][]req {
		const admin = "/ojs/v1/admin/workers"
		gets := []req{{method: http.MethodGet, path: admin}, {method: http.MethodGet, path: admin + "?queue=" + hiddenQueue},
			{method: http.MethodGet, path: admin + "?state=stale&per_page=1"}}
		one := []req{{method: http.MethodGet, path: admin + "/w-narrow"}}
		heads := func(rs []req) []req {
			var out []req
			for _, r := range rs {
				r.method = http.MethodHead
				out = append(out, r)
			}
			return out
		}
		return map[string][]req{
			"POST /ojs/v1/workers/heartbeat": {{method: http.MethodPost, path: "/ojs/v1/workers/heartbeat",
				body: map[string]any{"worker_id": "w-narrow", "queues": []string{hiddenQueue}, "active_jobs": []string{f.hiddenID}}}},
			"GET " + admin:                     gets,
			"HEAD " + admin:                    heads(gets),
			"GET " + admin + "/:id":            one,
			"HEAD " + admin + "/:id":           heads(one),
			"POST " + admin + "/:id/quiet":     {{method: http.MethodPost, path: admin + "/w-narrow/quiet"}},
			"POST " + admin + "/:id/terminate": {{method: http.MethodPost, path: admin + "/w-narrow/terminate"}},
			"DELETE " + admin + "/:id":         {{method: http.MethodDelete, path: admin + "/w-narrow"}},
		}
	})
	// The audited worker actions (TestAuditMasksEveryAction): they carry
	// no record data.
	auditedCalls = append(auditedCalls,
		auditedCall{"worker.quiet", false, func(t *testing.T, b *bundle, _ *auditScene) {
			beat(t, b, map[string]any{"worker_id": "w-audit", "queues": []string{"orders"}})
			wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/admin/workers/w-audit/quiet", nil, nil), http.StatusOK)
		}},
		auditedCall{"worker.terminate", false, func(t *testing.T, b *bundle, _ *auditScene) {
			wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/admin/workers/w-audit/terminate", nil, nil), http.StatusOK)
		}},
		auditedCall{"worker.deregister", false, func(t *testing.T, b *bundle, _ *auditScene) {
			// Just seen: refused (409), and audited as every refused call is.
			wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/admin/workers/w-audit", nil, nil), http.StatusConflict)
		}},
	)
}

// beatAnswer is the heartbeat's answer (HTTP binding §10.4).
type beatAnswer struct {
	State        string   `json:"state"`
	JobsExtended []string `json:"jobs_extended"`
	ServerTime   string   `json:"server_time"`
}

// beat sends a heartbeat with the write key and expects 200.
func beat(t *testing.T, b *bundle, body map[string]any) beatAnswer {
	t.Helper()
	var out beatAnswer
	r := b.do(t, req{method: http.MethodPost, path: "/ojs/v1/workers/heartbeat", key: writeKey, body: body,
		header: http.Header{"Content-Type": {"application/openjobspec+json"}}})
	wantStatus(t, r, http.StatusOK)
	r.json(t, &out)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openjobspec+json") {
		t.Errorf("heartbeat answered %s, want application/openjobspec+json (HTTP binding §4.3)", ct)
	}
	return out
}

type workerItem struct {
	ID                 string   `json:"id"`
	Hostname           *string  `json:"hostname"`
	PID                *int64   `json:"pid"`
	State              string   `json:"state"`
	Directive          string   `json:"directive"`
	DirectiveBy        *string  `json:"directive_by"`
	ReportedState      *string  `json:"reported_state"`
	Queues             []string `json:"queues"`
	Concurrency        *int     `json:"concurrency"`
	Labels             []string `json:"labels"`
	ActiveJobs         int      `json:"active_jobs"`
	ReportedActiveJobs *int     `json:"reported_active_jobs"`
	StartedAt          *string  `json:"started_at"`
	LastSeenAt         string   `json:"last_seen_at"`
	LastHeartbeatAt    *string  `json:"last_heartbeat_at"`
	Heartbeats         int      `json:"heartbeats"`
	// The detail's.
	ActiveJobIDs         []string `json:"active_job_ids"`
	ReportedActiveJobIDs []string `json:"reported_active_job_ids"`
	Leases               []struct {
		JobID     string `json:"job_id"`
		Queue     string `json:"queue"`
		ExpiresAt string `json:"expires_at"`
	} `json:"leases"`
}

type workerList struct {
	Items   []workerItem `json:"items"`
	Summary struct {
		Total     int `json:"total"`
		Running   int `json:"running"`
		Quiet     int `json:"quiet"`
		Terminate int `json:"terminate"`
		Stale     int `json:"stale"`
	} `json:"summary"`
	Pagination struct {
		Total   int `json:"total"`
		Page    int `json:"page"`
		PerPage int `json:"per_page"`
	} `json:"pagination"`
}

func listWorkers(t *testing.T, b *bundle, key, query string) workerList {
	t.Helper()
	var out workerList
	b.getAs(t, key, "/ojs/v1/admin/workers"+query, &out)
	return out
}

func getWorker(t *testing.T, b *bundle, key, id string) workerItem {
	t.Helper()
	var out workerItem
	b.getAs(t, key, "/ojs/v1/admin/workers/"+url.PathEscape(id), &out)
	return out
}

// lifecycleJob is the part of a job these tests read.
type lifecycleJob struct {
	ID      string           `json:"id"`
	State   string           `json:"state"`
	Attempt int              `json:"attempt"`
	Errors  []map[string]any `json:"errors"`
	Lease   *struct {
		WorkerID  *string `json:"worker_id"`
		ExpiresAt string  `json:"expires_at"`
	} `json:"lease"`
}

func readJob(t *testing.T, b *bundle, id string) lifecycleJob {
	t.Helper()
	var out struct {
		Job lifecycleJob `json:"job"`
	}
	wantStatus(t, b.get(t, "/ojs/v1/jobs/"+id, &out), http.StatusOK)
	return out.Job
}

// leaseJob publishes a job to queue (with retry, when not nil) and fetches
// it for worker with a lease of vtMs milliseconds; it returns its id.
func leaseJob(t *testing.T, b *bundle, queue, worker string, vtMs int, retry map[string]any) string {
	t.Helper()
	body := map[string]any{"type": "lifecycle.test", "queue": queue, "args": []any{}}
	if retry != nil {
		body["retry"] = retry
	}
	var pub struct {
		Job lifecycleJob `json:"job"`
	}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/jobs", body, &pub), http.StatusCreated)
	var out struct {
		Jobs []lifecycleJob `json:"jobs"`
	}
	// A fetch skips a row another statement holds at that moment (ingest
	// notes a published job's incident just after storing it): poll again.
	eventually.True(t, "the job is fetched", func() bool {
		wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/workers/fetch",
			map[string]any{"queues": []string{queue}, "worker_id": worker, "visibility_timeout_ms": vtMs}, &out), http.StatusOK)
		return len(out.Jobs) > 0
	})
	if len(out.Jobs) != 1 || out.Jobs[0].ID != pub.Job.ID || out.Jobs[0].State != "active" {
		t.Fatalf("fetch %s: %+v, want job %s active", queue, out.Jobs, pub.Job.ID)
	}
	return pub.Job.ID
}

// expiresAt is job id's lease expiry, or the zero time without a lease.
func expiresAt(t *testing.T, b *bundle, id string) time.Time {
	t.Helper()
	j := readJob(t, b, id)
	if j.Lease == nil {
		return time.Time{}
	}
	at, err := time.Parse(time.RFC3339Nano, j.Lease.ExpiresAt)
	if err != nil {
		t.Fatalf("lease.expires_at %q: %v", j.Lease.ExpiresAt, err)
	}
	return at
}

func startLifecycle(t *testing.T) (*bundle, *clock.Fake) {
	t.Helper()
	t.Parallel()
	clk := clock.NewPinned(testdate.Now().UTC().Truncate(time.Millisecond))
	return start(t, options{clock: clk}), clk
}

// setColumn sets a lifecycle column of job id directly: what the fetch and
// publish of job options store (lease_ms, deadline_at), whatever they are
// at the time.
func setColumn(t *testing.T, b *bundle, id, column string, v any) {
	t.Helper()
	if _, err := b.pool.Exec(context.Background(), "UPDATE redrive_lifecycle SET "+column+" = $2 WHERE id = $1", id, v); err != nil {
		t.Fatal(err)
	}
}

// Worker protocol §5.4: "When the backend receives a heartbeat that includes
// a job ID in active_job_ids, it SHOULD reset that job's visibility timeout
// to the full configured duration (default or per-job), counted from the
// time the heartbeat is received." HTTP binding §10.4: "Extends the
// visibility timeout of active jobs"; visibility_timeout_ms is "Requested
// visibility extension in milliseconds". The case L1-VIS-002's timeline: a
// 3 s lease, heartbeats at 2 s and 4 s, still active at 5 s.
func TestHeartbeatExtendsTheLeasesTheWorkerHolds(t *testing.T) {
	b, clk := startLifecycle(t)
	id := leaseJob(t, b, "visibility-test", "worker-vis-1", 3000, nil)
	setColumn(t, b, id, "lease_ms", int64(3000)) // the job's lease length, as the fetch stores it
	clk.Advance(2 * time.Second)
	a := beat(t, b, map[string]any{"worker_id": "worker-vis-1", "active_jobs": []string{id}})
	if a.State != "running" || !slices.Equal(a.JobsExtended, []string{id}) {
		t.Fatalf("heartbeat at 2 s: %+v, want running and the job extended", a)
	}
	if st, err := time.Parse(time.RFC3339Nano, a.ServerTime); err != nil || !st.Equal(clk.Now()) {
		t.Errorf("server_time %q, want the server's now %s", a.ServerTime, clk.Now())
	}
	if got, want := expiresAt(t, b, id), clk.Now().Add(3*time.Second); !got.Equal(want) {
		t.Fatalf("after the heartbeat the lease ends at %s, want now + its 3 s lease: %s", got, want)
	}
	clk.Advance(2 * time.Second) // 4 s: past the first lease, within the extended one
	if a := beat(t, b, map[string]any{"worker_id": "worker-vis-1", "active_jobs": []string{id}}); !slices.Equal(a.JobsExtended, []string{id}) {
		t.Fatalf("heartbeat at 4 s: %+v", a)
	}
	clk.Advance(time.Second) // 5 s
	if j := readJob(t, b, id); j.State != "active" || j.Attempt != 1 {
		t.Fatalf("at 5 s the job is %+v, want still active at attempt 1", j)
	}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/workers/ack", map[string]any{"job_id": id, "worker_id": "worker-vis-1"}, nil), http.StatusOK)

	// A requested extension (HTTP binding §10.4's visibility_timeout_ms)
	// wins over the job's own length; worker protocol §4.2's shape
	// (active_job_ids) extends as the binding's does.
	id2 := leaseJob(t, b, "visibility-test", "worker-vis-1", 3000, nil)
	a = beat(t, b, map[string]any{"worker_id": "worker-vis-1", "state": "running", "active_jobs": 1,
		"active_job_ids": []string{id2}, "visibility_timeout_ms": 60000})
	if !slices.Equal(a.JobsExtended, []string{id2}) {
		t.Fatalf("heartbeat with visibility_timeout_ms: %+v", a)
	}
	if got, want := expiresAt(t, b, id2), clk.Now().Add(time.Minute); !got.Equal(want) {
		t.Fatalf("lease ends at %s, want now + 60 s: %s", got, want)
	}
	// Until the fetch stores a lease length, a lease is extended by the
	// fetch's default of 30 s.
	setColumn(t, b, id2, "lease_ms", nil)
	beat(t, b, map[string]any{"worker_id": "worker-vis-1", "active_jobs": []string{id2}})
	if got := expiresAt(t, b, id2); !got.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("a heartbeat shortened the lease to %s", got) // 30 s from now is before the 60 s it has
	}
	clk.Advance(45 * time.Second)
	beat(t, b, map[string]any{"worker_id": "worker-vis-1", "active_jobs": []string{id2}})
	if got, want := expiresAt(t, b, id2), clk.Now().Add(30*time.Second); !got.Equal(want) {
		t.Fatalf("lease ends at %s, want now + 30 s: %s", got, want)
	}
}

// HTTP binding §10.4 lists the jobs extended: a job the worker does not
// hold is not extended, and is no error. Worker protocol §5.6: a
// reservation is bound to the worker that claimed it.
func TestHeartbeatLeavesJobsTheWorkerDoesNotHold(t *testing.T) {
	b, clk := startLifecycle(t)
	mine := leaseJob(t, b, "hold-test", "worker-a", 5000, nil)
	theirs := leaseJob(t, b, "hold-test", "worker-b", 5000, nil)
	before := expiresAt(t, b, theirs)
	clk.Advance(time.Second)
	a := beat(t, b, map[string]any{"worker_id": "worker-a", "active_jobs": []string{theirs, mine, "job_1", "0190aaaa-0000-7000-8000-000000000000"}})
	if !slices.Equal(a.JobsExtended, []string{mine}) {
		t.Fatalf("jobs_extended %v, want only the worker's own %s", a.JobsExtended, mine)
	}
	if got := expiresAt(t, b, theirs); !got.Equal(before) {
		t.Fatalf("another worker's lease moved from %s to %s", before, got)
	}
	// The worker protocol's example ids ("job_1") are reported as sent.
	if w := getWorker(t, b, readKey, "worker-a"); !slices.Contains(w.ReportedActiveJobIDs, "job_1") || w.ReportedActiveJobs == nil || *w.ReportedActiveJobs != 4 {
		t.Errorf("reported ids %v (%v), want the four sent", w.ReportedActiveJobIDs, w.ReportedActiveJobs)
	}

	// A lease that has passed is not brought back: the attempt failed.
	clk.Advance(10 * time.Second)
	if a := beat(t, b, map[string]any{"worker_id": "worker-b", "active_jobs": []string{theirs}}); len(a.JobsExtended) != 0 {
		t.Fatalf("an expired lease was extended: %+v", a)
	}
	if j := readJob(t, b, theirs); j.State == "active" || j.Lease != nil {
		t.Fatalf("job after its lease passed: %+v", j)
	}
	// An acked job is not extended either.
	acked := leaseJob(t, b, "hold-test-acked", "worker-a", 5000, nil)
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/workers/ack", map[string]any{"job_id": acked}, nil), http.StatusOK)
	if a := beat(t, b, map[string]any{"worker_id": "worker-a", "active_jobs": []string{acked}}); len(a.JobsExtended) != 0 {
		t.Fatalf("an acked job was extended: %+v", a)
	}
}

// OJS timeouts: a heartbeat keeps a job visible, never past its execution
// timeout (deadline_at): the lease is capped there, and never shortened.
func TestHeartbeatStopsAtTheExecutionDeadline(t *testing.T) {
	b, clk := startLifecycle(t)
	id := leaseJob(t, b, "deadline-test", "worker-d", 5000, nil)
	deadline := clk.Now().Add(8 * time.Second)
	setColumn(t, b, id, "deadline_at", deadline)
	clk.Advance(4 * time.Second)
	if a := beat(t, b, map[string]any{"worker_id": "worker-d", "active_jobs": []string{id}, "visibility_timeout_ms": 10000}); !slices.Equal(a.JobsExtended, []string{id}) {
		t.Fatalf("heartbeat: %+v", a)
	}
	if got := expiresAt(t, b, id); !got.Equal(deadline) {
		t.Fatalf("lease ends at %s, want the deadline %s", got, deadline)
	}
	clk.Advance(time.Second)
	if a := beat(t, b, map[string]any{"worker_id": "worker-d", "active_jobs": []string{id}}); len(a.JobsExtended) != 0 {
		t.Fatalf("a lease at its deadline was extended: %+v", a)
	}
	if got := expiresAt(t, b, id); !got.Equal(deadline) {
		t.Fatalf("lease ends at %s, want still the deadline %s", got, deadline)
	}
}

// Worker protocol §4.4: every heartbeat answers a state; admin API §9.3:
// quiet "is delivered via the next heartbeat response"; §2.3: a worker
// never goes back from terminate. The cases L1-WRK-001..003 step by step,
// with the directive set the way the spec sets it: the admin API (the cases'
// metadata.test_directive is in no spec).
func TestDirectivesReachTheWorkerOnItsNextHeartbeat(t *testing.T) {
	b, _ := startLifecycle(t)
	job := leaseJob(t, b, "worker-test", "worker-quiet-1", 30000, nil)
	if a := beat(t, b, map[string]any{"worker_id": "worker-quiet-1", "active_jobs": []string{job}}); a.State != "running" {
		t.Fatalf("first heartbeat: %+v, want running", a)
	}
	var w workerItem
	r := b.send(t, http.MethodPost, "/ojs/v1/admin/workers/worker-quiet-1/quiet", nil, &w)
	wantStatus(t, r, http.StatusOK)
	if w.Directive != "quiet" || w.State != "quiet" || w.DirectiveBy == nil || *w.DirectiveBy != "ops-write" || !slices.Equal(w.ActiveJobIDs, []string{job}) {
		t.Fatalf("quieted worker %+v", w)
	}
	a := beat(t, b, map[string]any{"worker_id": "worker-quiet-1", "active_jobs": []string{job}})
	if a.State != "quiet" || !slices.Equal(a.JobsExtended, []string{job}) {
		t.Fatalf("heartbeat after quiet: %+v, want quiet, the job still extended", a)
	}
	// A quiet worker still finishes its job.
	var ack struct {
		State string `json:"state"`
	}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/workers/ack", map[string]any{"job_id": job, "worker_id": "worker-quiet-1"}, &ack), http.StatusOK)
	if ack.State != "completed" {
		t.Fatalf("ack: %+v", ack)
	}
	// Quiet again: nothing changes, 200.
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/admin/workers/worker-quiet-1/quiet", nil, nil), http.StatusOK)

	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/admin/workers/worker-quiet-1/terminate", nil, &w), http.StatusOK)
	if a := beat(t, b, map[string]any{"worker_id": "worker-quiet-1", "state": "quiet", "active_jobs": 0, "active_job_ids": []string{}}); a.State != "terminate" {
		t.Fatalf("heartbeat after terminate: %+v", a)
	}
	wantError(t, "quiet after terminate", b.send(t, http.MethodPost, "/ojs/v1/admin/workers/worker-quiet-1/quiet", nil, nil),
		http.StatusConflict, "conflict", "")

	// A worker that reports a state further along hears it back, never an
	// order to go back (worker protocol §11.5: a terminating worker's BEAT
	// answers terminate).
	if a := beat(t, b, map[string]any{"worker_id": "worker-sigterm", "state": "terminate", "active_jobs": 0, "active_job_ids": []string{}}); a.State != "terminate" {
		t.Fatalf("a terminating worker was answered %q", a.State)
	}
	if a := beat(t, b, map[string]any{"worker_id": "worker-sigtstp", "state": "quiet", "active_jobs": 0, "active_job_ids": []string{}}); a.State != "quiet" {
		t.Fatalf("a quiet worker was answered %q", a.State)
	}
	// SIGCONT: a worker that quieted itself resumes; nobody told it quiet.
	if a := beat(t, b, map[string]any{"worker_id": "worker-sigtstp", "state": "running", "active_jobs": 0, "active_job_ids": []string{}}); a.State != "running" {
		t.Fatalf("a resumed worker was answered %q", a.State)
	}

	// The store's fetch-side view: what a fetch checks before leasing.
	ctx := context.Background()
	for id, want := range map[string]store.WorkerState{"worker-quiet-1": store.WorkerTerminate, "worker-sigtstp": store.WorkerRunning, "never-seen": store.WorkerRunning} {
		if got, err := b.store.WorkerDirective(ctx, id); err != nil || got != want || got.Fetches() != (want == store.WorkerRunning) {
			t.Errorf("WorkerDirective(%s) = %q, %v; want %q", id, got, err, want)
		}
	}
	if got, err := b.store.TouchWorker(ctx, "worker-quiet-1", []string{"other"}, testdate.Now()); err != nil || got.Fetches() {
		t.Errorf("TouchWorker of a terminating worker = %q, %v; want terminate", got, err)
	}
	// Its heartbeats named no queues: a fetch's are shown.
	if got := getWorker(t, b, readKey, "worker-quiet-1"); !slices.Equal(got.Queues, []string{"other"}) {
		t.Errorf("queues %v, want those of the latest fetch", got.Queues)
	}

	// The operator's calls are in the audit log, by who made them.
	var log struct {
		Items []struct {
			Target  string         `json:"target"`
			KeyName string         `json:"key_name"`
			Status  int            `json:"status"`
			Before  map[string]any `json:"before"`
			After   map[string]any `json:"after"`
		} `json:"items"`
	}
	b.getAs(t, writeKey, "/ojs/v1/audit?action=worker.quiet", &log)
	n := len(log.Items) // newest first
	if n != 3 || log.Items[n-1].Target != "worker-quiet-1" || log.Items[n-1].KeyName != "ops-write" || log.Items[n-1].Status != 200 ||
		log.Items[n-1].Before["directive"] != "running" || log.Items[n-1].After["directive"] != "quiet" || log.Items[0].Status != http.StatusConflict {
		t.Errorf("audit of worker.quiet: %+v", log.Items)
	}

	// Unknown workers, and a read key.
	wantError(t, "quiet an unknown worker", b.send(t, http.MethodPost, "/ojs/v1/admin/workers/nobody/quiet", nil, nil), http.StatusNotFound, "not_found", "")
	wantError(t, "read key quiets", b.do(t, req{method: http.MethodPost, path: "/ojs/v1/admin/workers/worker-quiet-1/quiet", key: readKey}),
		http.StatusForbidden, "forbidden", "")
	wantError(t, "read key beats", b.do(t, req{method: http.MethodPost, path: "/ojs/v1/workers/heartbeat", key: readKey,
		body: map[string]any{"worker_id": "w"}}), http.StatusForbidden, "forbidden", "")
}

// Admin API §9.1: the workers with their state and summary counts; worker
// protocol §10.1: a worker not heard from for the heartbeat timeout (30 s)
// is dead — listed as stale. §3.1's registration fields are kept as
// reported.
func TestWorkersAreListedWithWhatTheyReport(t *testing.T) {
	b, clk := startLifecycle(t)
	if l := listWorkers(t, b, readKey, ""); l.Items == nil || len(l.Items) != 0 || l.Summary.Total != 0 || l.Pagination.Total != 0 {
		t.Fatalf("empty registry: %+v", l)
	}
	full := map[string]any{"worker_id": "worker_019539a4-b68c-7def", "state": "running", "active_jobs": 2,
		"active_job_ids": []string{"job_1", "job_2"}, "started_at": "2025-06-01T08:00:00Z", "hostname": "web-server-1",
		"pid": 12345, "queues": []string{"email", "default"}, "concurrency": 10, "labels": []string{"canary", "v2.1"}}
	beat(t, b, full)
	job := leaseJob(t, b, "email", "worker_019539a4-b68c-7def", 600000, nil)
	beat(t, b, map[string]any{"worker_id": "binding-shape", "active_jobs": []string{}})
	clk.Advance(20 * time.Second)
	beat(t, b, map[string]any{"worker_id": "worker_019539a4-b68c-7def"}) // seen again; keeps what it said before
	beat(t, b, map[string]any{"worker_id": "quiet-one", "queues": []string{"email"}})
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/admin/workers/quiet-one/quiet", nil, nil), http.StatusOK)
	clk.Advance(10*time.Second + time.Millisecond) // binding-shape: 30.001 s unseen

	l := listWorkers(t, b, readKey, "")
	if l.Summary.Total != 3 || l.Summary.Running != 1 || l.Summary.Quiet != 1 || l.Summary.Stale != 1 || l.Summary.Terminate != 0 ||
		l.Pagination.Total != 3 || l.Pagination.Page != 1 || l.Pagination.PerPage != 20 {
		t.Fatalf("list: %+v", l)
	}
	by := map[string]workerItem{}
	for _, it := range l.Items {
		by[it.ID] = it
	}
	w := by["worker_019539a4-b68c-7def"]
	if w.State != "running" || w.Hostname == nil || *w.Hostname != "web-server-1" || w.PID == nil || *w.PID != 12345 ||
		!slices.Equal(w.Queues, []string{"email", "default"}) || w.Concurrency == nil || *w.Concurrency != 10 ||
		!slices.Equal(w.Labels, []string{"canary", "v2.1"}) || w.StartedAt == nil || *w.StartedAt != "2025-06-01T08:00:00.000Z" ||
		w.ActiveJobs != 1 || w.ReportedActiveJobs == nil || *w.ReportedActiveJobs != 0 || w.Heartbeats != 2 || w.LastHeartbeatAt == nil {
		t.Errorf("the full worker: %+v", w)
	}
	if s := by["binding-shape"]; s.State != "stale" || s.Hostname != nil || len(s.Queues) != 0 {
		t.Errorf("the silent worker: %+v", s)
	}
	if q := by["quiet-one"]; q.State != "quiet" || q.Directive != "quiet" || q.ReportedState != nil {
		t.Errorf("the quieted worker: %+v", q)
	}
	// Detail (admin API §9.2): its active jobs.
	d := getWorker(t, b, readKey, "worker_019539a4-b68c-7def")
	if !slices.Equal(d.ActiveJobIDs, []string{job}) || len(d.Leases) != 1 || d.Leases[0].Queue != "email" || d.ActiveJobs != 1 {
		t.Errorf("detail: %+v", d)
	}
	// Filters and pages.
	if l := listWorkers(t, b, readKey, "?state=stale"); len(l.Items) != 1 || l.Items[0].ID != "binding-shape" || l.Pagination.Total != 1 || l.Summary.Total != 3 {
		t.Errorf("?state=stale: %+v", l)
	}
	if l := listWorkers(t, b, readKey, "?queue=email&per_page=1&page=2"); len(l.Items) != 1 || l.Items[0].ID != "worker_019539a4-b68c-7def" || l.Pagination.Total != 2 {
		t.Errorf("?queue=email page 2: %+v", l)
	}
	if n, err := b.store.CountWorkers(context.Background()); err != nil || n != 3 {
		t.Errorf("CountWorkers = %d, %v; want 3", n, err)
	}
	for _, q := range []string{"?page=0", "?per_page=101", "?state=dead", "?queue=a%20b", "?limit=5"} {
		name := strings.SplitN(strings.TrimPrefix(q, "?"), "=", 2)[0]
		wantError(t, q, b.do(t, req{method: http.MethodGet, path: "/ojs/v1/admin/workers" + q, key: readKey}), http.StatusBadRequest, "invalid_request", name)
	}
	wantError(t, "unknown worker", b.do(t, req{method: http.MethodGet, path: "/ojs/v1/admin/workers/nobody", key: readKey}), http.StatusNotFound, "not_found", "")
	// Any id a worker names itself with is reachable, percent-encoded.
	for _, id := range []string{"host/1 pid%41", "é-worker"} {
		beat(t, b, map[string]any{"worker_id": id})
		if w := getWorker(t, b, readKey, id); w.ID != id {
			t.Errorf("GET of worker %q found %q", id, w.ID)
		}
	}
}

// Admin API §9.4: "Removes a stale worker record and reschedules its active
// jobs. Only workers that have missed their heartbeat deadline can be
// deregistered." Its jobs are released as expired leases are (worker
// protocol §5.5: the job leaves active, its attempt counts, an error is
// recorded, and the retry policy decides), and are fetched again.
func TestDeregisteringAStaleWorkerReleasesItsJobs(t *testing.T) {
	b, clk := startLifecycle(t)
	retry := map[string]any{"max_attempts": 3, "initial_interval": "PT1S", "jitter": false}
	j1 := leaseJob(t, b, "stale-test", "worker-gone", 600000, retry)
	j2 := leaseJob(t, b, "stale-test", "worker-gone", 600000, retry)
	beat(t, b, map[string]any{"worker_id": "worker-gone", "active_jobs": []string{j1, j2}})

	clk.Advance(30 * time.Second) // exactly the timeout: not yet stale
	wantError(t, "deregister a live worker", b.send(t, http.MethodDelete, "/ojs/v1/admin/workers/worker-gone", nil, nil),
		http.StatusConflict, "conflict", "")
	if j := readJob(t, b, j1); j.State != "active" {
		t.Fatalf("a refused deregistration touched the job: %+v", j)
	}
	clk.Advance(time.Millisecond)
	var out struct {
		ID             string   `json:"id"`
		Deregistered   bool     `json:"deregistered"`
		ReleasedJobIDs []string `json:"released_job_ids"`
	}
	wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/admin/workers/worker-gone", nil, &out), http.StatusOK)
	want := []string{j1, j2}
	slices.Sort(want)
	if !out.Deregistered || out.ID != "worker-gone" || !slices.Equal(out.ReleasedJobIDs, want) {
		t.Fatalf("deregister: %+v, want %v released", out, want)
	}
	for _, id := range want {
		j := readJob(t, b, id)
		n := len(j.Errors)
		if j.State == "active" || j.Lease != nil || j.Attempt != 1 || n == 0 || j.Errors[n-1]["attempt"] != float64(1) {
			t.Fatalf("released job %+v, want no longer active, attempt 1 failed by its lease's end", j)
		}
	}
	wantError(t, "the worker is gone", b.do(t, req{method: http.MethodGet, path: "/ojs/v1/admin/workers/worker-gone", key: readKey}),
		http.StatusNotFound, "not_found", "")
	// After the backoff, another worker fetches it: attempt 2.
	clk.Advance(time.Second)
	var f struct {
		Jobs []lifecycleJob `json:"jobs"`
	}
	eventually.True(t, "a released job is fetched again", func() bool {
		wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/workers/fetch", map[string]any{"queues": []string{"stale-test"}, "worker_id": "worker-new", "count": 2}, &f), http.StatusOK)
		return len(f.Jobs) == 2
	})
	if f.Jobs[0].Attempt != 2 {
		t.Fatalf("refetched %+v, want attempt 2", f.Jobs)
	}
	// The deregistered worker coming back is a new worker.
	if a := beat(t, b, map[string]any{"worker_id": "worker-gone", "active_jobs": want}); a.State != "running" || len(a.JobsExtended) != 0 {
		t.Fatalf("the old worker's heartbeat: %+v", a)
	}
}

// Every field of a heartbeat is checked, an error names it, and a refused
// heartbeat changes nothing.
func TestHeartbeatRefusesBadFields(t *testing.T) {
	b, _ := startLifecycle(t)
	long := strings.Repeat("x", 256)
	ids := make([]string, 1001)
	for i := range ids {
		ids[i] = "job_" + strconv.Itoa(i)
	}
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{}, "worker_id"},
		{map[string]any{"worker_id": ""}, "worker_id"},
		{map[string]any{"worker_id": long}, "worker_id"},
		{map[string]any{"worker_id": "w\x00x"}, "worker_id"},
		{map[string]any{"worker_id": 7}, "worker_id"},
		{map[string]any{"worker_id": "w", "state": "sleeping"}, "state"},
		{map[string]any{"worker_id": "w", "active_jobs": "x"}, "active_jobs"},
		{map[string]any{"worker_id": "w", "active_jobs": -1}, "active_jobs"},
		{map[string]any{"worker_id": "w", "active_jobs": 1.5}, "active_jobs"},
		{map[string]any{"worker_id": "w", "active_jobs": []any{1}}, "active_jobs[0]"},
		{map[string]any{"worker_id": "w", "active_jobs": ids}, "active_jobs"},
		{map[string]any{"worker_id": "w", "active_job_ids": []string{"ok", ""}}, "active_job_ids[1]"},
		{map[string]any{"worker_id": "w", "active_job_ids": []string{long}}, "active_job_ids[0]"},
		{map[string]any{"worker_id": "w", "active_job_ids": "job_1"}, "active_job_ids"},
		{map[string]any{"worker_id": "w", "active_jobs": ids[:600], "active_job_ids": ids[600:]}, "active_job_ids"},
		{map[string]any{"worker_id": "w", "visibility_timeout_ms": 0}, "visibility_timeout_ms"},
		{map[string]any{"worker_id": "w", "visibility_timeout_ms": 43200001}, "visibility_timeout_ms"},
		{map[string]any{"worker_id": "w", "hostname": long}, "hostname"},
		{map[string]any{"worker_id": "w", "hostname": "a\nb"}, "hostname"},
		{map[string]any{"worker_id": "w", "pid": 0}, "pid"},
		{map[string]any{"worker_id": "w", "queues": []string{"ok", "bad queue"}}, "queues[1]"},
		{map[string]any{"worker_id": "w", "queues": make([]string, 101)}, "queues"},
		{map[string]any{"worker_id": "w", "concurrency": 0}, "concurrency"},
		{map[string]any{"worker_id": "w", "labels": []string{""}}, "labels[0]"},
		{map[string]any{"worker_id": "w", "labels": make([]string, 51)}, "labels"},
		{map[string]any{"worker_id": "w", "started_at": "yesterday"}, "started_at"},
		{map[string]any{"worker_id": "w", "sequence": 1}, "sequence"},
	} {
		r := b.do(t, req{method: http.MethodPost, path: "/ojs/v1/workers/heartbeat", key: writeKey, body: c.body})
		wantError(t, c.field, r, http.StatusBadRequest, "invalid_request", c.field)
	}
	if l := listWorkers(t, b, readKey, ""); len(l.Items) != 0 {
		t.Fatalf("refused heartbeats registered workers: %+v", l.Items)
	}
	// At the bounds, every field is kept.
	ok := make([]string, 1000)
	for i := range ok {
		ok[i] = strings.Repeat("j", 200) + strconv.Itoa(i)
	}
	w255 := strings.Repeat("w", 255)
	labels := make([]string, 50)
	for i := range labels {
		labels[i] = strings.Repeat("l", 255)
	}
	beat(t, b, map[string]any{"worker_id": w255, "hostname": strings.Repeat("h", 255), "active_job_ids": ok, "active_jobs": 1000,
		"labels": labels, "pid": 4294967295, "concurrency": 1000000, "state": "quiet"})
	if w := getWorker(t, b, readKey, w255); len(w.ReportedActiveJobIDs) != 1000 || len(w.Labels) != 50 || w.State != "quiet" {
		t.Fatalf("worker at the bounds: %d ids, %d labels, state %s", len(w.ReportedActiveJobIDs), len(w.Labels), w.State)
	}
}

// A caller limited to some queues sees the workers whose queues are all
// queues it may read, and of their jobs only those of such queues; it
// directs a worker when it may configure each of its queues, and
// deregisters one when it may configure the queues of the jobs it holds.
func TestWorkersNarrowToTheCallersQueues(t *testing.T) {
	t.Parallel()
	is := idptest.New(t, "redrive")
	roles := filepath.Join(t.TempDir(), "roles.yaml")
	writeFile(t, roles, rolesFile)
	clk := clock.NewPinned(testdate.Now().UTC().Truncate(time.Millisecond))
	b := start(t, options{clock: clk, env: map[string]string{"REDRIVE_OIDC_ISSUER": is.URL, "REDRIVE_OIDC_CLIENT_ID": "redrive",
		"REDRIVE_ROLES_FILE": roles}})
	ann := is.UserToken(idptest.User{Subject: "u-ann", Email: "ann@example.com", Groups: []string{"payments"}})
	lead := is.UserToken(idptest.User{Subject: "u-lead", Email: "lead@example.com", Groups: []string{"payments-leads"}})
	root := is.UserToken(idptest.User{Subject: "u-root", Email: "root@example.com", Groups: []string{"sre"}})

	payJob := leaseJob(t, b, "payments.card", "w-pay", 600000, nil)
	hiddenJob := leaseJob(t, b, "secret.q", "w-pay", 600000, nil)
	beat(t, b, map[string]any{"worker_id": "w-pay", "queues": []string{"payments.card"}, "active_job_ids": []string{payJob, hiddenJob}, "active_jobs": 2})
	beat(t, b, map[string]any{"worker_id": "w-secret", "queues": []string{"secret.q"}})
	beat(t, b, map[string]any{"worker_id": "w-mixed", "queues": []string{"payments.card", "secret.q"}})
	beat(t, b, map[string]any{"worker_id": "w-none"})

	l := listWorkers(t, b, ann, "")
	if len(l.Items) != 1 || l.Items[0].ID != "w-pay" || l.Summary.Total != 1 || l.Pagination.Total != 1 || l.Items[0].ActiveJobs != 1 {
		t.Fatalf("ann's list: %+v", l)
	}
	d := getWorker(t, b, ann, "w-pay")
	if !slices.Equal(d.ActiveJobIDs, []string{payJob}) || !slices.Equal(d.ReportedActiveJobIDs, []string{payJob}) || d.ActiveJobs != 1 {
		t.Fatalf("ann's view of w-pay: %+v", d)
	}
	for _, id := range []string{"w-secret", "w-mixed", "w-none"} {
		r := b.do(t, req{method: http.MethodGet, path: "/ojs/v1/admin/workers/" + id, key: ann})
		wantError(t, "ann reads "+id, r, http.StatusNotFound, "not_found", "")
		if strings.Contains(string(r.body), "secret.q") {
			t.Errorf("the 404 of %s names the hidden queue: %s", id, r.body)
		}
	}
	if l := listWorkers(t, b, ann, "?queue=secret.q"); len(l.Items) != 0 || l.Summary.Total != 0 {
		t.Errorf("ann lists the workers of secret.q: %+v", l)
	}
	if l := listWorkers(t, b, ann, "?state=running"); len(l.Items) != 1 || l.Pagination.Total != 1 {
		t.Errorf("ann lists the running workers: %+v", l)
	}
	// ann reads and retries, configures nothing.
	wantError(t, "ann quiets", b.do(t, req{method: http.MethodPost, path: "/ojs/v1/admin/workers/w-pay/quiet", key: ann}), http.StatusForbidden, "forbidden", "")
	// The lead configures payments.*.
	wantStatus(t, b.do(t, req{method: http.MethodPost, path: "/ojs/v1/admin/workers/w-pay/quiet", key: lead}), http.StatusOK)
	wantError(t, "lead quiets w-mixed", b.do(t, req{method: http.MethodPost, path: "/ojs/v1/admin/workers/w-mixed/quiet", key: lead}), http.StatusNotFound, "not_found", "")
	wantError(t, "lead terminates w-none", b.do(t, req{method: http.MethodPost, path: "/ojs/v1/admin/workers/w-none/terminate", key: lead}), http.StatusNotFound, "not_found", "")

	clk.Advance(time.Minute)
	r := b.do(t, req{method: http.MethodDelete, path: "/ojs/v1/admin/workers/w-pay", key: lead})
	wantError(t, "lead deregisters a worker holding a secret.q job", r, http.StatusForbidden, "forbidden", "")
	if strings.Contains(string(r.body), "secret.q") || strings.Contains(string(r.body), hiddenJob) {
		t.Errorf("the refusal shows the hidden queue: %s", r.body)
	}
	if j := readJob(t, b, hiddenJob); j.State != "active" {
		t.Fatalf("a refused deregistration released a job: %+v", j)
	}
	wantStatus(t, b.do(t, req{method: http.MethodDelete, path: "/ojs/v1/admin/workers/w-pay", key: root}), http.StatusOK)
	if l := listWorkers(t, b, root, ""); l.Summary.Total != 3 || l.Summary.Stale != 3 {
		t.Fatalf("root's list: %+v", l.Summary)
	}
}
