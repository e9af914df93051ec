package tracing

import (
	"cmp"
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/internal/dlq"
)

// The spans of the worker API's jobs (OJS observability extension,
// ojs-observability.md §5-§7): an enqueue span when a job is published and
// a process span for each attempt a worker fetched, recorded when the
// attempt ends. As every Redrive span, they are recorded only for a job that
// carries a valid trace context (meta.traceparent, §5.1): Redrive continues
// traces, it never starts one for a job nobody traces.

// Attribute keys of the OJS observability extension (§7).
const (
	AttrOJSJobID           = attribute.Key("ojs.job.id")
	AttrOJSJobType         = attribute.Key("ojs.job.type")
	AttrOJSJobQueue        = attribute.Key("ojs.job.queue")
	AttrOJSJobState        = attribute.Key("ojs.job.state")
	AttrOJSJobAttempt      = attribute.Key("ojs.job.attempt")
	AttrOJSJobPriority     = attribute.Key("ojs.job.priority")
	AttrOJSJobScheduledAt  = attribute.Key("ojs.job.scheduled_at")
	AttrOJSWorkerID        = attribute.Key("ojs.worker.id")
	AttrOJSJobErrorAttempt = attribute.Key("ojs.job.error.attempt")
	AttrErrorMessage       = attribute.Key("error.message")
)

// Values of §7.1: messaging.system is always "ojs"; messaging.operation.type
// is "publish" for enqueue (the spec's word; the messaging conventions now
// call it "send") and "process" for a worker's attempt.
var (
	messagingSystemOJS = semconv.MessagingSystemKey.String("ojs")
	operationPublish   = semconv.MessagingOperationTypeKey.String("publish")
	operationProcess   = semconv.MessagingOperationTypeProcess
)

// Job is what the spans of a job say about it.
type Job struct {
	ID, Type, Queue string
	// State is the job's state after the operation (ojs.job.state).
	State string
	// Attempt is the attempt, from 1; 0 leaves ojs.job.attempt out (an
	// enqueue).
	Attempt int
	// Priority and ScheduledAt, when set, are the job's (enqueue spans).
	Priority    *int
	ScheduledAt *time.Time
	// Worker is the worker that held the attempt, "" when unknown.
	Worker string
}

// JobError is the failure of an attempt (§7.3).
type JobError struct {
	// Type is the error's type (error.type); Message its text.
	Type, Message string
	// Attempt is the attempt it ended (ojs.job.error.attempt).
	Attempt int
}

// JobContext is a job's trace context: meta.traceparent with
// meta.tracestate (ojs-observability §5.1), or, when meta has no
// traceparent (a record of a pull-mode queue, read from Kafka), the trace
// context of its headers (FromHeaders). Invalid when it has none that parses.
func JobContext(meta json.RawMessage, hs []dlq.Header) trace.SpanContext {
	var m struct {
		TraceParent any `json:"traceparent"`
		TraceState  any `json:"tracestate"`
	}
	if len(meta) > 0 && json.Unmarshal(meta, &m) == nil {
		if tp, ok := m.TraceParent.(string); ok {
			c := propagation.MapCarrier{HeaderTraceparent: tp}
			if ts, ok := m.TraceState.(string); ok {
				c[HeaderTracestate] = ts
			}
			return trace.SpanContextFromContext(propagator.Extract(context.Background(), c))
		}
	}
	return FromHeaders(hs)
}

// jobAttrs are the attributes of §7.1 and those of §7.2 j has.
func jobAttrs(op attribute.KeyValue, j Job) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 12)
	attrs = append(attrs, messagingSystemOJS, op, semconv.MessagingDestinationName(j.Queue),
		AttrOJSJobID.String(j.ID), AttrOJSJobType.String(j.Type),
		AttrOJSJobQueue.String(j.Queue), semconv.MessagingMessageID(j.ID))
	if j.State != "" {
		attrs = append(attrs, AttrOJSJobState.String(j.State))
	}
	if j.Attempt > 0 {
		attrs = append(attrs, AttrOJSJobAttempt.Int(j.Attempt))
	}
	if j.Priority != nil {
		attrs = append(attrs, AttrOJSJobPriority.Int(*j.Priority))
	}
	if j.ScheduledAt != nil {
		attrs = append(attrs, AttrOJSJobScheduledAt.String(j.ScheduledAt.UTC().Format(time.RFC3339Nano)))
	}
	if j.Worker != "" {
		attrs = append(attrs, AttrOJSWorkerID.String(j.Worker))
	}
	return attrs
}

// JobEnqueued records the enqueue span of job j, published at `at` (§6.1:
// "{queue} enqueue", kind PRODUCER, status OK): a child of the job's trace
// context parent, the producer's, so that the publish shows in the
// producer's trace. Nothing when t is off or parent is not valid.
func (t *Tracer) JobEnqueued(ctx context.Context, parent trace.SpanContext, j Job, at time.Time) {
	if t == nil || !parent.IsValid() {
		return
	}
	_, span := t.t.Start(trace.ContextWithRemoteSpanContext(ctx, parent), j.Queue+" enqueue",
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithTimestamp(at),
		trace.WithAttributes(jobAttrs(operationPublish, j)...))
	span.SetStatus(codes.Ok, "")
	span.End(trace.WithTimestamp(at))
}

// JobProcessed records the process span of one attempt of job j, from its
// fetch (start) to its end (§6.2: "{queue} process", kind CONSUMER): status
// OK when it completed the job, ERROR with the error attributes of §7.3
// when it failed (e not nil), unset when the job was cancelled under it.
//
// It is linked to the job's trace context link and is the root of a trace
// of its own, not a child of link: "The enqueue span and process span are
// linked via span links, not parent-child" (§4.2, §5.2), so that a job
// processed hours after its publish does not stretch the producer's trace.
// As it has no parent for the sampler to follow, it is recorded only when
// link is sampled: a job's spans are sampled as its trace is. Nothing when t
// is off or link is not valid.
func (t *Tracer) JobProcessed(ctx context.Context, link trace.SpanContext, j Job, start, end time.Time, e *JobError) {
	if t == nil || !link.IsValid() || !link.IsSampled() {
		return
	}
	attrs := jobAttrs(operationProcess, j)
	if e != nil {
		// error.type is bounded: "_OTHER" when the worker gave none,
		// as the semantic conventions say.
		attrs = append(attrs, semconv.ErrorTypeKey.String(cmp.Or(e.Type, "_OTHER")), AttrErrorMessage.String(e.Message),
			AttrOJSJobErrorAttempt.Int(e.Attempt))
	}
	_, span := t.t.Start(ctx, j.Queue+" process", trace.WithNewRoot(),
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(start),
		trace.WithLinks(trace.Link{SpanContext: link}), trace.WithAttributes(attrs...))
	switch {
	case e != nil:
		span.SetStatus(codes.Error, e.Message)
	case j.State == string(dlq.StateCompleted):
		span.SetStatus(codes.Ok, "")
	}
	span.End(trace.WithTimestamp(end))
}
