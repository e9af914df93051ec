package tracing_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/testdate"
	"github.com/redrive/redrive/internal/tracing"
)

const (
	sampledTP   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	unsampledTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	headerTP    = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
)

// §5.1: a job's trace context is meta.traceparent with meta.tracestate;
// a record read from Kafka (no traceparent in meta) has its headers'.
func TestJobContext(t *testing.T) {
	t.Parallel()
	sc := tracing.JobContext(json.RawMessage(`{"traceparent":"`+sampledTP+`","tracestate":"ojs=p:8;r:62"}`), nil)
	if !sc.IsValid() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" ||
		!sc.IsSampled() || !sc.IsRemote() || sc.TraceState().Get("ojs") != "p:8;r:62" {
		t.Errorf("meta context %+v (tracestate %q)", sc, sc.TraceState().String())
	}
	hs := []dlq.Header{{Key: "traceparent", Value: []byte(headerTP)}}
	if sc := tracing.JobContext(json.RawMessage(`{"other":1}`), hs); sc.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("without meta.traceparent: %v, want the headers' context", sc.TraceID())
	}
	if sc := tracing.JobContext(json.RawMessage(`{"traceparent":"`+sampledTP+`"}`), hs); sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("meta.traceparent and a header: %v, want meta's", sc.TraceID())
	}
	for _, meta := range []string{``, `{}`, `{"traceparent":"garbage"}`, `{"traceparent":"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}`, `not json`} {
		if sc := tracing.JobContext(json.RawMessage(meta), nil); sc.IsValid() {
			t.Errorf("meta %q: valid context %v", meta, sc)
		}
	}
}

func attrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		out[kv.Key] = kv.Value
	}
	return out
}

// The enqueue span (§6.1) is a child of the job's context; the process
// span (§6.2) is a new root linked to it (§4.2: "Span links, not
// parent-child"), with the error attributes of §7.3 on a failure, and only
// for a sampled job context. Nothing without a valid context.
func TestJobSpans(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tr := tracing.New(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	ctx := context.Background()
	at := testdate.Now().UTC().Truncate(time.Millisecond)
	parent := tracing.JobContext(json.RawMessage(`{"traceparent":"`+sampledTP+`"}`), nil)
	prio := 3
	job := tracing.Job{ID: "019503e1-7b2a-7000-8000-000000000001", Type: "email.send", Queue: "email", State: "available", Priority: &prio}

	tr.JobEnqueued(ctx, parent, job, at)
	job.State, job.Attempt, job.Priority, job.Worker = "retryable", 2, nil, "worker-1"
	tr.JobProcessed(ctx, parent, job, at.Add(time.Second), at.Add(1500*time.Millisecond),
		&tracing.JobError{Type: "SMTP.Down", Message: "connection refused", Attempt: 2})
	// No span: no context, or an unsampled one for the process span (it
	// has no parent the sampler could follow).
	tr.JobEnqueued(ctx, trace.SpanContext{}, job, at)
	tr.JobProcessed(ctx, trace.SpanContext{}, job, at, at, nil)
	tr.JobProcessed(ctx, tracing.JobContext(json.RawMessage(`{"traceparent":"`+unsampledTP+`"}`), nil), job, at, at, nil)

	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want an enqueue and a process span: %+v", len(spans), spans)
	}
	enq, proc := spans[0], spans[1]
	if enq.Name != "email enqueue" || enq.SpanKind != trace.SpanKindProducer || enq.Parent.SpanID() != parent.SpanID() ||
		enq.SpanContext.TraceID() != parent.TraceID() || !enq.StartTime.Equal(at) || !enq.EndTime.Equal(at) || enq.Status.Code != codes.Ok {
		t.Errorf("enqueue span %+v", enq)
	}
	a := attrs(enq.Attributes)
	for k, v := range map[attribute.Key]string{"messaging.system": "ojs", "messaging.operation.type": "publish",
		"messaging.destination.name": "email", "ojs.job.id": job.ID, "ojs.job.type": "email.send", "ojs.job.queue": "email",
		"messaging.message.id": job.ID, "ojs.job.state": "available"} {
		if a[k].AsString() != v {
			t.Errorf("enqueue span %s = %q, want %q", k, a[k].AsString(), v)
		}
	}
	if a["ojs.job.priority"].AsInt64() != 3 {
		t.Errorf("enqueue span ojs.job.priority %v", a["ojs.job.priority"])
	}
	if _, ok := a["ojs.job.attempt"]; ok {
		t.Errorf("enqueue span has an attempt")
	}

	if proc.Name != "email process" || proc.SpanKind != trace.SpanKindConsumer || proc.Parent.IsValid() ||
		proc.SpanContext.TraceID() == parent.TraceID() || len(proc.Links) != 1 || proc.Links[0].SpanContext.SpanID() != parent.SpanID() ||
		proc.Links[0].SpanContext.TraceID() != parent.TraceID() {
		t.Errorf("process span: name %q kind %v parent %v trace %v links %+v; want a root linked to the job's context",
			proc.Name, proc.SpanKind, proc.Parent, proc.SpanContext.TraceID(), proc.Links)
	}
	if !proc.StartTime.Equal(at.Add(time.Second)) || !proc.EndTime.Equal(at.Add(1500*time.Millisecond)) {
		t.Errorf("process span from %v to %v", proc.StartTime, proc.EndTime)
	}
	if proc.Status.Code != codes.Error || proc.Status.Description != "connection refused" {
		t.Errorf("process span status %+v", proc.Status)
	}
	a = attrs(proc.Attributes)
	for k, v := range map[attribute.Key]string{"messaging.system": "ojs", "messaging.operation.type": "process",
		"messaging.destination.name": "email", "ojs.job.id": job.ID, "ojs.job.type": "email.send",
		"ojs.job.state": "retryable", "ojs.worker.id": "worker-1", "error.type": "SMTP.Down", "error.message": "connection refused"} {
		if a[k].AsString() != v {
			t.Errorf("process span %s = %q, want %q", k, a[k].AsString(), v)
		}
	}
	if a["ojs.job.attempt"].AsInt64() != 2 || a["ojs.job.error.attempt"].AsInt64() != 2 {
		t.Errorf("process span attempt %v, error attempt %v", a["ojs.job.attempt"], a["ojs.job.error.attempt"])
	}
}

// With tracing off (a nil *Tracer) a job's spans cost nothing: no span, no
// allocation.
func TestJobSpansOffAllocateNothing(t *testing.T) {
	var off *tracing.Tracer
	ctx, at := context.Background(), testdate.Now()
	parent := tracing.JobContext(json.RawMessage(`{"traceparent":"`+sampledTP+`"}`), nil)
	job := tracing.Job{ID: "id", Type: "t", Queue: "q", State: "completed", Attempt: 1}
	e := &tracing.JobError{Type: "x", Message: "y", Attempt: 1}
	if n := testing.AllocsPerRun(100, func() {
		off.JobEnqueued(ctx, parent, job, at)
		off.JobProcessed(ctx, parent, job, at, at, e)
	}); n != 0 {
		t.Errorf("tracing off allocates %v times per job", n)
	}
}
