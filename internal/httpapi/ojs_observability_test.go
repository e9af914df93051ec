package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/redrive/redrive/internal/eventually"
)

// The OJS observability extension's metrics (ojs-observability.md §8) as
// the server exports them at GET /metrics, after a job's life through the
// worker API: published, fetched 2 s later, acked 0.75 s after that, and a
// second job nacked until discarded. Time is the app's pinned clock.
func TestOJSJobMetricsThroughTheWorkerAPI(t *testing.T) {
	w := setupWorkers(t)
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	j := w.publish(t, map[string]any{"type": "email.send", "queue": "obs-mail", "args": []any{"a@example.com"},
		"meta": map[string]any{"traceparent": traceparent}})
	w.clk.Advance(2 * time.Second)
	// OBS-001, §5.1: the worker gets the trace context in meta as published.
	var fetched struct{ Jobs []map[string]any }
	eventually.True(t, "the job is fetched", func() bool {
		wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/fetch",
			map[string]any{"queues": []string{"obs-mail"}, "worker_id": "w-1"}, &fetched), http.StatusOK)
		return len(fetched.Jobs) > 0
	})
	if meta, _ := fetched.Jobs[0]["meta"].(map[string]any); fetched.Jobs[0]["id"] != j.ID || meta["traceparent"] != traceparent {
		t.Fatalf("fetched %v, want job %s with meta.traceparent %s", fetched.Jobs, j.ID, traceparent)
	}
	w.clk.Advance(750 * time.Millisecond)
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/ack", map[string]any{"job_id": j.ID}, nil), http.StatusOK)

	k := w.publish(t, map[string]any{"type": "report.build", "queue": "obs-reports", "args": []any{},
		"retry": map[string]any{"max_attempts": 1}})
	w.fetchAll(t, 1, "obs-reports")
	w.clk.Advance(time.Second)
	if n := w.nack(t, k.ID, map[string]any{"code": "Render.Failed", "message": "no fonts"}); n.State != "discarded" {
		t.Fatalf("nack: %+v, want discarded", n)
	}

	out := w.metricsText(t)
	for _, line := range []string{
		// §8.1 counters (ojs.job.enqueued, .completed, .failed).
		`ojs_job_enqueued_total{queue="obs-mail",type="email.send"} 1`,
		`ojs_job_enqueued_total{queue="obs-reports",type="report.build"} 1`,
		`ojs_job_completed_total{queue="obs-mail",type="email.send"} 1`,
		`ojs_job_failed_total{queue="obs-reports",type="report.build"} 1`,
		// §8.2 histograms: the attempt from fetch to ack; enqueue to first fetch.
		`ojs_job_duration_seconds_bucket{queue="obs-mail",state="completed",type="email.send",le="0.5"} 0`,
		`ojs_job_duration_seconds_bucket{queue="obs-mail",state="completed",type="email.send",le="1"} 1`,
		`ojs_job_duration_seconds_sum{queue="obs-mail",state="completed",type="email.send"} 0.75`,
		`ojs_job_duration_seconds_count{queue="obs-reports",state="discarded",type="report.build"} 1`,
		`ojs_job_queue_time_seconds_sum{queue="obs-mail",type="email.send"} 2`,
		`ojs_job_queue_time_seconds_count{queue="obs-mail",type="email.send"} 1`,
		// §8.3 ojs.queue.depth, per queue and state.
		`ojs_queue_depth{queue="obs-mail",state="completed"} 1`,
		`ojs_queue_depth{queue="obs-mail",state="available"} 0`,
		`ojs_queue_depth{queue="obs-reports",state="discarded"} 1`,
	} {
		if !strings.Contains(out, "\n"+line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	reg := w.app.Metrics().Registry
	if n, err := testutil.GatherAndCount(reg, "ojs_job_completed_total", "ojs_job_failed_total", "ojs_job_retried_total"); err != nil || n != 2 {
		t.Errorf("%d completed, failed and retried series (%v), want 2", n, err)
	}
}
