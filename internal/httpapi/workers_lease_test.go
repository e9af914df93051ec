package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/eventually"
)

// A worker's lease ends at lease.expires_at (issue 44): an ack or nack after
// it is refused with 409 lease_expired, and a read of the job shows the
// expiry at once, not at the next fetch. Time is the app's pinned clock.

// leaseOne publishes a job to queue with retry and fetches it for worker
// with a lease of vt seconds; it returns the job's id.
func (w *workerBundle) leaseOne(t *testing.T, queue, worker string, vt int, retry map[string]any) string {
	t.Helper()
	j := w.publish(t, map[string]any{"type": "t", "queue": queue, "args": []any{}, "retry": retry})
	var out struct{ Jobs []jobView }
	// A fetch skips rows another statement holds at that moment (ingest
	// notes a published job's incident just after storing it): poll again.
	eventually.True(t, "the job is fetched", func() bool {
		wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/fetch",
			map[string]any{"queues": []string{queue}, "worker_id": worker, "count": 1, "visibility_timeout": vt}, &out), http.StatusOK)
		return len(out.Jobs) > 0
	})
	if len(out.Jobs) != 1 || out.Jobs[0].ID != j.ID || out.Jobs[0].State != "active" || out.Jobs[0].Lease == nil {
		t.Fatalf("fetch %s: %+v, want job %s active", queue, out.Jobs, j.ID)
	}
	return j.ID
}

// wantLeaseExpired checks r is the 409 lease_expired of job id, its details
// naming the job and the state the expiry left.
func wantLeaseExpired(t *testing.T, what string, r resp, id, state string) {
	t.Helper()
	wantError(t, what, r, http.StatusConflict, "lease_expired", "")
	if r.status != http.StatusConflict {
		return
	}
	d := r.err(t).Error.Details
	if d["job_id"] != id || d["state"] != state {
		t.Errorf("%s: details %v, want job_id %s and state %s", what, d, id, state)
	}
}

// wantExpired checks job id is no longer held: its attempt failed with the
// expiry's error, and it is in state.
func (w *workerBundle) wantExpired(t *testing.T, id, state string, attempt int) jobView {
	t.Helper()
	got := w.job(t, id)
	if got.State != state || got.Lease != nil || got.Attempt != attempt || got.CompletedAt != nil && state != "discarded" {
		t.Fatalf("job after its lease expired: %+v, want %s at attempt %d, no lease", got, state, attempt)
	}
	if n := len(got.Errors); n == 0 || got.Errors[n-1]["type"] != "visibility_timeout" || got.Errors[n-1]["attempt"] != float64(attempt) {
		t.Fatalf("errors %v, want the last one visibility_timeout of attempt %d", got.Errors, attempt)
	}
	return got
}

var leaseRetry = map[string]any{"max_attempts": 3, "initial_interval": "PT1S", "jitter": false}

func TestWorkerAckAfterLeaseExpiryIsRefused(t *testing.T) {
	w := setupWorkers(t)

	// The lease holds until expires_at inclusive: an ack then completes.
	onTime := w.leaseOne(t, "ack-on-time", "A", 1, leaseRetry)
	w.clk.Advance(time.Second)
	var ack struct {
		Acknowledged bool
		State        string
	}
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/ack", map[string]any{"job_id": onTime}, &ack), http.StatusOK)
	if !ack.Acknowledged || ack.State != "completed" {
		t.Fatalf("ack within the lease: %+v", ack)
	}

	// The case: visibility_timeout 1, ack 2.5 s later.
	late := w.leaseOne(t, "ack-late", "A", 1, leaseRetry)
	w.clk.Advance(2500 * time.Millisecond)
	r := w.send(t, http.MethodPost, "/ojs/v1/workers/ack", map[string]any{"job_id": late, "result": map[string]any{"ok": true}}, nil)
	// Worker protocol §5.5: back to available at once, the attempt counted.
	wantLeaseExpired(t, "ack after expiry", r, late, "available")
	w.wantExpired(t, late, "available", 1)
	if n := w.count(t, "id = $1 AND completed_at IS NULL AND lease_until IS NULL", late); n != 1 {
		t.Fatal("a late ack completed the job, or left its lease")
	}
	// Asked again (the expiry is applied now), the answer is the same.
	wantLeaseExpired(t, "second late ack", w.send(t, http.MethodPost, "/ojs/v1/workers/ack", map[string]any{"job_id": late}, nil),
		late, "available")
	// The job is fetched again at once, a new attempt that acks.
	if f := w.fetchOne(t, "ack-late", late); f.Attempt != 2 {
		t.Fatalf("refetched at attempt %d, want 2", f.Attempt)
	}
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/ack", map[string]any{"job_id": late}, nil), http.StatusOK)

	// A job no worker ever held is a plain conflict.
	never := w.publish(t, map[string]any{"type": "t", "queue": "ack-never", "args": []any{}})
	wantError(t, "ack unfetched", w.send(t, http.MethodPost, "/ojs/v1/workers/ack", map[string]any{"job_id": never.ID}, nil),
		http.StatusConflict, "conflict", "")
}

func TestWorkerNackAfterLeaseExpiryIsRefused(t *testing.T) {
	w := setupWorkers(t)

	onTime := w.leaseOne(t, "nack-on-time", "A", 1, leaseRetry)
	w.clk.Advance(time.Second)
	if n := w.nack(t, onTime, map[string]any{"code": "Flaky", "message": "x"}); n.State != "retryable" || n.Attempt != 1 {
		t.Fatalf("nack within the lease: %+v", n)
	}

	late := w.leaseOne(t, "nack-late", "A", 1, leaseRetry)
	w.clk.Advance(time.Second + time.Millisecond)
	r := w.send(t, http.MethodPost, "/ojs/v1/workers/nack",
		map[string]any{"job_id": late, "error": map[string]any{"code": "Worker.Late", "message": "too slow"}}, nil)
	wantLeaseExpired(t, "nack after expiry", r, late, "available")
	got := w.wantExpired(t, late, "available", 1)
	if len(got.Errors) != 1 {
		t.Fatalf("errors %v, want only the expiry's: a late nack is not recorded", got.Errors)
	}

	// The last attempt's lease expires: the late nack hears lease_expired,
	// and the job is a dead letter.
	last := w.leaseOne(t, "nack-last", "A", 1, map[string]any{"max_attempts": 1, "on_exhaustion": "dead_letter"})
	w.clk.Advance(2 * time.Second)
	r = w.send(t, http.MethodPost, "/ojs/v1/workers/nack", map[string]any{"job_id": last, "error": map[string]any{"code": "X"}}, nil)
	wantLeaseExpired(t, "last nack after expiry", r, last, "discarded")
	if got := w.wantExpired(t, last, "discarded", 1); got.Exhaustion == nil || *got.Exhaustion != "dead_letter" {
		t.Fatalf("after the last lease expired: %+v, want a dead letter", got)
	}
}

func TestWorkerJobReadShowsLeaseExpiry(t *testing.T) {
	w := setupWorkers(t)
	id := w.leaseOne(t, "read-expiry", "A", 30, leaseRetry)
	w.clk.Advance(30 * time.Second)
	if got := w.job(t, id); got.State != "active" || got.Lease == nil || got.Lease.WorkerID != "A" {
		t.Fatalf("job at its lease's last instant: %+v, want active, leased to A", got)
	}
	// Expired, and no fetch in between: the read shows what the next
	// fetch would make of it.
	w.clk.Advance(time.Millisecond)
	w.wantExpired(t, id, "available", 1)
	// Read again: the expiry was applied once.
	if got := w.wantExpired(t, id, "available", 1); len(got.Errors) != 1 {
		t.Fatalf("errors %v, want one expiry", got.Errors)
	}
	// Consistent with the fetch: available at once, attempt 2.
	if f := w.fetchOne(t, "read-expiry", id); f.Attempt != 2 {
		t.Fatalf("refetched at attempt %d, want 2", f.Attempt)
	}
	if got := w.job(t, id); got.State != "active" {
		t.Fatalf("refetched job: %+v, want active", got)
	}
}
