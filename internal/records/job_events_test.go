package records_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/records"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
	"github.com/redrive/redrive/internal/tracing"
)

// The OJS observability extension (ojs-observability.md) of the worker
// API's jobs, driven through records.Service — the one path every state
// change of a job takes — with a real registry and the SDK's in-memory
// exporter: §8's metrics and §6/§7's spans. Time is pinned.

// obsBundle is a records.Service with job metrics and tracing on.
type obsBundle struct {
	rec *records.Service
	reg *prometheus.Registry
	exp *tracetest.InMemoryExporter
	t0  time.Time
}

func setupObservability(t *testing.T) *obsBundle {
	t.Helper()
	t.Parallel()
	b := &obsBundle{reg: prometheus.NewRegistry(), exp: tracetest.NewInMemoryExporter(),
		t0: testdate.Now().UTC().Truncate(time.Millisecond)}
	m := metrics.NewOJS(b.reg, nil)
	var err error
	b.rec, err = records.New(records.Config{Store: store.New(pgtest.New(t)), JobMetrics: m,
		Tracer: tracing.New(sdktrace.NewTracerProvider(sdktrace.WithSyncer(b.exp)))})
	if err != nil {
		t.Fatal(err)
	}
	m.SetDepthSource(func(ctx context.Context) (map[string]map[string]int64, error) {
		return b.rec.JobDepth(ctx, b.t0.Add(time.Minute))
	}, func(err error) { t.Errorf("reading the depth: %v", err) })
	return b
}

// traceparent is a sampled W3C trace context of trace i.
func traceparent(i int) string { return fmt.Sprintf("00-%032x-%016x-01", 0xabc000+i, 0xdef000+i) }

func (b *obsBundle) publish(t *testing.T, queue, meta string, at time.Time) string {
	t.Helper()
	p := &records.PublishParams{Type: queue + ".job", Queue: queue, Args: json.RawMessage(`[1]`), Meta: json.RawMessage(meta), Priority: 5, Now: at}
	j, err := b.rec.PublishJob(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return j.Record.ID
}

// fetch fetches job id of queue at at for worker w-1, leased for lease.
func (b *obsBundle) fetch(t *testing.T, queue, id string, at time.Time, lease time.Duration) {
	t.Helper()
	eventually.True(t, "job "+id+" is fetched", func() bool {
		jobs, err := b.rec.FetchJobs(context.Background(), &records.FetchParams{Queues: []string{queue}, Worker: "w-1", Count: 1, Lease: lease, Now: at})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) == 1 && jobs[0].Record.ID != id {
			t.Fatalf("fetched %s, want %s", jobs[0].Record.ID, id)
		}
		return len(jobs) == 1
	})
}

func (b *obsBundle) nack(t *testing.T, id string, retryable bool, at time.Time) {
	t.Helper()
	if _, err := b.rec.NackJob(context.Background(), &records.NackParams{ID: id, Worker: "w-1", Code: "SMTP.Down",
		Message: "connection refused", Retryable: &retryable, Now: at}); err != nil {
		t.Fatal(err)
	}
}

// series reads the series of family name with labels (a counter's or
// gauge's value, a histogram's count and sum); ok false when absent.
func (b *obsBundle) series(t *testing.T, name string, labels map[string]string) (v float64, count uint64, ok bool) {
	t.Helper()
	mfs, err := b.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if len(got) != len(labels) {
				continue
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			switch mf.GetType() {
			case dto.MetricType_HISTOGRAM:
				return m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount(), true
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue(), 0, true
			default:
				return m.GetCounter().GetValue(), 0, true
			}
		}
	}
	return 0, 0, false
}

func TestJobMetricsAndSpans(t *testing.T) {
	b := setupObservability(t)
	ctx := context.Background()
	t0 := b.t0
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	meta := func(i int) string { return `{"traceparent":"` + traceparent(i) + `","tracestate":"ojs=p:8"}` }
	long := time.Hour

	// emails: fetched 2 s after its publish, acked 0.5 s later.
	emails := b.publish(t, "emails", meta(1), t0)
	b.fetch(t, "emails", emails, at(2*time.Second), long)
	if _, err := b.rec.AckJob(ctx, emails, "w-1", nil, at(2500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	// sms: a retryable nack; push: a nack that gives up (discarded).
	sms := b.publish(t, "sms", meta(2), t0)
	b.fetch(t, "sms", sms, at(time.Second), long)
	b.nack(t, sms, true, at(1250*time.Millisecond))
	push := b.publish(t, "push", meta(3), t0)
	b.fetch(t, "push", push, at(time.Second), long)
	b.nack(t, push, false, at(1500*time.Millisecond))
	// reports: its 10 s lease expires; a fetch a minute later fails the
	// attempt (available again at once).
	reports := b.publish(t, "reports", meta(4), t0)
	b.fetch(t, "reports", reports, at(time.Second), 10*time.Second)
	// exports: one cancelled while a worker holds it, one never fetched.
	exports := b.publish(t, "exports", meta(5), t0)
	b.fetch(t, "exports", exports, at(time.Second), long)
	if _, _, err := b.rec.CancelJob(ctx, exports, at(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	waiting := b.publish(t, "exports", meta(6), at(5*time.Second))
	if _, _, err := b.rec.CancelJob(ctx, waiting, at(6*time.Second)); err != nil {
		t.Fatal(err)
	}
	// plain: no trace context; unsampled: a context its producer did not
	// sample. Both are counted, neither gets a span.
	plain := b.publish(t, "plain", `{"tenant":"a"}`, t0)
	b.fetch(t, "plain", plain, at(time.Second), long)
	if _, err := b.rec.AckJob(ctx, plain, "w-1", nil, at(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	unsampled := b.publish(t, "unsampled", `{"traceparent":"00-0000000000000000000000000000abcd-00000000000000ef-00"}`, t0)
	b.fetch(t, "unsampled", unsampled, at(time.Second), long)
	if _, err := b.rec.AckJob(ctx, unsampled, "w-1", nil, at(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	// held: active at the end; later: scheduled an hour ahead.
	held := b.publish(t, "held", meta(7), t0)
	b.fetch(t, "held", held, at(time.Second), long)
	later := &records.PublishParams{Type: "later.job", Queue: "later", Args: json.RawMessage(`[]`), Now: t0}
	due := at(time.Hour)
	later.DelayUntil = &due
	if _, err := b.rec.PublishJob(ctx, later); err != nil {
		t.Fatal(err)
	}
	if _, err := b.rec.FetchJobs(ctx, &records.FetchParams{Queues: []string{"nothing"}, Count: 1, Now: at(time.Minute)}); err != nil {
		t.Fatal(err)
	}

	// §8.1 counters.
	counters := map[string]map[string]float64{
		"ojs_job_enqueued_total": {"emails": 1, "sms": 1, "push": 1, "reports": 1, "exports": 2, "plain": 1, "unsampled": 1, "held": 1, "later": 1},
		// "Total jobs that reached completed state."
		"ojs_job_completed_total": {"emails": 1, "plain": 1, "unsampled": 1},
		// "Total jobs that reached discarded state."
		"ojs_job_failed_total": {"push": 1},
		// "Total retry attempts": a retryable nack, an expired lease.
		"ojs_job_retried_total":   {"sms": 1, "reports": 1},
		"ojs_job_cancelled_total": {"exports": 2},
	}
	for name, want := range counters {
		for _, q := range []string{"emails", "sms", "push", "reports", "exports", "plain", "unsampled", "held", "later"} {
			got, _, _ := b.series(t, name, map[string]string{"queue": q, "type": q + ".job"})
			if got != want[q] {
				t.Errorf("%s{queue=%q} = %v, want %v", name, q, got, want[q])
			}
		}
	}
	// §8.2 ojs.job.duration: each attempt from its fetch to its end, by
	// the state it left the job in.
	for _, w := range []struct {
		queue, state string
		sum          float64
	}{{"emails", "completed", 0.5}, {"sms", "retryable", 0.25}, {"push", "discarded", 0.5}, {"reports", "available", 59},
		{"exports", "cancelled", 3}, {"plain", "completed", 2}, {"unsampled", "completed", 1}} {
		sum, n, _ := b.series(t, "ojs_job_duration_seconds", map[string]string{"queue": w.queue, "type": w.queue + ".job", "state": w.state})
		if n != 1 || sum != w.sum {
			t.Errorf("ojs_job_duration_seconds{queue=%q,state=%q}: %d observations summing to %v, want 1 of %v", w.queue, w.state, n, sum, w.sum)
		}
	}
	if _, n, ok := b.series(t, "ojs_job_duration_seconds", map[string]string{"queue": "held", "type": "held.job", "state": "active"}); ok || n != 0 {
		t.Errorf("an attempt still running has a duration")
	}
	// ojs.job.queue_time: "Time from enqueue to first execution start."
	for q, want := range map[string]float64{"emails": 2, "sms": 1, "exports": 1, "held": 1} {
		sum, n, _ := b.series(t, "ojs_job_queue_time_seconds", map[string]string{"queue": q, "type": q + ".job"})
		if n != 1 || sum != want {
			t.Errorf("ojs_job_queue_time_seconds{queue=%q}: %d observations summing to %v, want 1 of %v", q, n, sum, want)
		}
	}
	// §8.3 ojs.queue.depth: "Current number of jobs per queue per state."
	depth := map[string]map[string]float64{"emails": {"completed": 1}, "sms": {"retryable": 1}, "push": {"discarded": 1},
		"reports": {"available": 1}, "exports": {"cancelled": 2}, "held": {"active": 1}, "later": {"scheduled": 1}}
	for q, states := range depth {
		for _, s := range records.JobStates {
			got, _, ok := b.series(t, "ojs_queue_depth", map[string]string{"queue": q, "state": s})
			if !ok || got != states[s] {
				t.Errorf("ojs_queue_depth{queue=%q,state=%q} = %v (present %v), want %v", q, s, got, ok, states[s])
			}
		}
	}

	b.checkSpans(t, map[string]string{"emails": emails, "sms": sms, "push": push, "reports": reports, "exports": exports,
		"waiting": waiting, "plain": plain, "unsampled": unsampled, "held": held})
}

// checkSpans checks §6's spans of the jobs TestJobMetricsAndSpans drove.
func (b *obsBundle) checkSpans(t *testing.T, ids map[string]string) {
	t.Helper()
	t0 := b.t0
	byJob := map[string][]tracetest.SpanStub{}
	for _, s := range b.exp.GetSpans() {
		for _, kv := range s.Attributes {
			if kv.Key == "ojs.job.id" {
				byJob[kv.Value.AsString()] = append(byJob[kv.Value.AsString()], s)
			}
		}
	}
	// Redrive continues traces, it never starts one: a job without a
	// (sampled) trace context gets no span.
	for _, q := range []string{"plain", "unsampled"} {
		if spans := byJob[ids[q]]; len(spans) != 0 {
			t.Errorf("job of %s without a sampled trace context has spans %+v", q, spans)
		}
	}
	type want struct {
		queue, state string
		ctx          int // its traceparent
		start, end   time.Duration
		code         codes.Code
		errType      string
	}
	// The process spans: one per ended attempt, from its fetch to its end.
	for _, w := range []want{
		{"emails", "completed", 1, 2 * time.Second, 2500 * time.Millisecond, codes.Ok, ""},
		{"sms", "retryable", 2, time.Second, 1250 * time.Millisecond, codes.Error, "SMTP.Down"},
		{"push", "discarded", 3, time.Second, 1500 * time.Millisecond, codes.Error, "SMTP.Down"},
		{"reports", "available", 4, time.Second, time.Minute, codes.Error, "visibility_timeout"},
		{"exports", "cancelled", 5, time.Second, 4 * time.Second, codes.Unset, ""},
	} {
		id := ids[w.queue]
		spans := byJob[id]
		if len(spans) != 2 || spans[0].Name != w.queue+" enqueue" || spans[1].Name != w.queue+" process" {
			t.Errorf("job of %s: spans %v, want an enqueue and a process span", w.queue, names(spans))
			continue
		}
		job := fmt.Sprintf("%032x", 0xabc000+w.ctx)
		enq, proc := spans[0], spans[1]
		// §6.1, §7.1: PRODUCER, publish, a child of the job's context.
		if enq.SpanKind != trace.SpanKindProducer || enq.Parent.TraceID().String() != job ||
			enq.Parent.SpanID().String() != fmt.Sprintf("%016x", 0xdef000+w.ctx) || !enq.StartTime.Equal(t0) ||
			enq.Status.Code != codes.Ok || enq.SpanContext.TraceState().Get("ojs") != "p:8" {
			t.Errorf("%s enqueue span: kind %v parent %v start %v status %v", w.queue, enq.SpanKind, enq.Parent, enq.StartTime, enq.Status)
		}
		wantAttrs(t, w.queue+" enqueue", enq.Attributes, map[string]any{"messaging.system": "ojs", "messaging.operation.type": "publish",
			"messaging.destination.name": w.queue, "ojs.job.id": id, "ojs.job.type": w.queue + ".job", "ojs.job.queue": w.queue,
			"ojs.job.state": "available", "ojs.job.priority": int64(5), "messaging.message.id": id})
		// §6.2, §7.1: CONSUMER, process, its own trace linked to the job's.
		if proc.SpanKind != trace.SpanKindConsumer || proc.Parent.IsValid() || proc.SpanContext.TraceID().String() == job ||
			len(proc.Links) != 1 || proc.Links[0].SpanContext.TraceID().String() != job ||
			proc.Links[0].SpanContext.SpanID().String() != fmt.Sprintf("%016x", 0xdef000+w.ctx) ||
			!proc.StartTime.Equal(t0.Add(w.start)) || !proc.EndTime.Equal(t0.Add(w.end)) || proc.Status.Code != w.code {
			t.Errorf("%s process span: kind %v parent %v links %+v from %v to %v status %v", w.queue, proc.SpanKind, proc.Parent,
				proc.Links, proc.StartTime.Sub(t0), proc.EndTime.Sub(t0), proc.Status)
		}
		attrs := map[string]any{"messaging.system": "ojs", "messaging.operation.type": "process",
			"messaging.destination.name": w.queue, "ojs.job.id": id, "ojs.job.type": w.queue + ".job",
			"ojs.job.state": w.state, "ojs.job.attempt": int64(1)}
		if w.errType != "" { // §7.3
			attrs["error.type"], attrs["ojs.job.error.attempt"] = w.errType, int64(1)
		}
		wantAttrs(t, w.queue+" process", proc.Attributes, attrs)
	}
	// A job cancelled before any fetch had no attempt; one still held has
	// not ended its attempt: an enqueue span each, no process span yet.
	for _, q := range []string{"waiting", "held"} {
		if spans := byJob[ids[q]]; len(spans) != 1 || spans[0].SpanKind != trace.SpanKindProducer {
			t.Errorf("job %s: spans %v, want its enqueue span only", q, names(spans))
		}
	}
}

func names(spans []tracetest.SpanStub) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}

func wantAttrs(t *testing.T, span string, kvs []attribute.KeyValue, want map[string]any) {
	t.Helper()
	got := map[string]any{}
	for _, kv := range kvs {
		got[string(kv.Key)] = kv.Value.AsInterface()
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s span: %s = %v, want %v", span, k, got[k], v)
		}
	}
}
