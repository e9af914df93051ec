// Package tracing is how Redrive takes part in a record's OpenTelemetry
// trace (docs/operations.md, Tracing): the W3C trace context a record
// carries in its traceparent header, the spans Redrive starts for a record
// (ingest, each redelivery, an operator's retry, a bulk task's batch), and
// the exporter the standard OTEL_* environment variables configure.
//
// Redrive continues traces, it never starts one: a span is started for a
// record only when the record carries a valid trace context. Each such span
// is a child of that context, so the record's whole life is one trace, and
// is linked to it, as the messaging semantic conventions ask of a span that
// handles a message. With tracing off (New of a nil or no-op provider) a
// *Tracer is nil and every method returns at once: nothing is allocated on
// the hot paths.
package tracing

import (
	"context"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/redrive/redrive/internal/dlq"
)

// Header names of the W3C trace context.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// Name is the instrumentation scope of Redrive's spans.
const Name = "github.com/redrive/redrive"

// Attribute keys of Redrive's own (not in the semantic conventions).
const (
	AttrRecordID    = attribute.Key("redrive.record.id")
	AttrAttempt     = attribute.Key("redrive.attempt")
	AttrTargetGroup = attribute.Key("redrive.target.group")
	AttrTaskID      = attribute.Key("redrive.task.id")
	AttrEdited      = attribute.Key("redrive.retry.edited")
	AttrErrorType   = attribute.Key("redrive.error.type")
)

// propagator is the W3C trace context: Redrive reads and writes the
// traceparent and tracestate headers whatever the global propagator is.
var propagator = propagation.TraceContext{}

// Tracer starts Redrive's spans. A nil *Tracer is tracing off.
type Tracer struct {
	t trace.Tracer
}

// New returns the Tracer of tp, or nil (tracing off) when tp is nil or a
// no-op provider.
func New(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		return nil
	}
	if _, off := tp.(noop.TracerProvider); off {
		return nil
	}
	return &Tracer{t: tp.Tracer(Name, trace.WithSchemaURL(semconv.SchemaURL))}
}

// On reports whether t traces.
func (t *Tracer) On() bool { return t != nil }

// Start starts a span for one record whose trace context is parent: a child
// of parent and linked to it. It returns a nil span, and starts nothing,
// when t is off or parent is not valid.
func (t *Tracer) Start(ctx context.Context, parent trace.SpanContext, name string, kind trace.SpanKind,
	attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if t == nil || !parent.IsValid() {
		return ctx, nil
	}
	return t.t.Start(trace.ContextWithRemoteSpanContext(ctx, parent), name,
		trace.WithSpanKind(kind), trace.WithLinks(trace.Link{SpanContext: parent}), trace.WithAttributes(attrs...))
}

// StartAt is Start of a span that began at start.
func (t *Tracer) StartAt(ctx context.Context, parent trace.SpanContext, start time.Time, name string, kind trace.SpanKind,
	attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if t == nil || !parent.IsValid() {
		return ctx, nil
	}
	return t.t.Start(trace.ContextWithRemoteSpanContext(ctx, parent), name, trace.WithTimestamp(start),
		trace.WithSpanKind(kind), trace.WithLinks(trace.Link{SpanContext: parent}), trace.WithAttributes(attrs...))
}

// End ends span (nil: nothing), marking it failed with err when err is not nil.
func End(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Messaging are the messaging attributes of a span on a Kafka topic.
func Messaging(op string, opType attribute.KeyValue, topic string) []attribute.KeyValue {
	return []attribute.KeyValue{semconv.MessagingSystemKafka, semconv.MessagingOperationName(op), opType,
		semconv.MessagingDestinationName(topic)}
}

// dlqCarrier reads a trace context from stored headers: the first header of
// a key wins, as kotel's record carrier reads it.
type dlqCarrier []dlq.Header

func (c dlqCarrier) Get(key string) string {
	for _, h := range c {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
func (c dlqCarrier) Set(string, string) {}
func (c dlqCarrier) Keys() []string {
	out := make([]string, len(c))
	for i, h := range c {
		out[i] = h.Key
	}
	return out
}

// hasTraceparent is the cheap test before a carrier is read.
func hasTraceparent(hs []dlq.Header) bool {
	for _, h := range hs {
		if h.Key == HeaderTraceparent {
			return true
		}
	}
	return false
}

// FromHeaders is the trace context of a record's headers (its first
// traceparent, with tracestate); invalid when it has none that parses.
func FromHeaders(hs []dlq.Header) trace.SpanContext {
	if !hasTraceparent(hs) {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(propagator.Extract(context.Background(), dlqCarrier(hs)))
}

// FromRecord is the trace context of a Kafka record's headers, as FromHeaders.
func FromRecord(r *kgo.Record) trace.SpanContext {
	found := false
	for _, h := range r.Headers {
		if h.Key == HeaderTraceparent {
			found = true
			break
		}
	}
	if !found {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(propagator.Extract(context.Background(), kotel.NewRecordCarrier(r)))
}

// TraceID is the trace id of a record's headers (32 lowercase hex
// digits), or "" when they carry no valid trace context.
func TraceID(hs []dlq.Header) string {
	sc := FromHeaders(hs)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// Inject sets r's trace context to sc: the first traceparent header takes
// sc's value in place, every other traceparent is removed (replaced, never
// appended), and so is tracestate; a record without one gets it at the end.
// An invalid sc leaves r as it is.
func Inject(r *kgo.Record, sc trace.SpanContext) {
	if !sc.IsValid() {
		return
	}
	c := propagation.MapCarrier{}
	propagator.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	tp, ts := c[HeaderTraceparent], c[HeaderTracestate]
	out := make([]kgo.RecordHeader, 0, len(r.Headers)+2)
	var setTP, setTS bool
	for _, h := range r.Headers {
		switch {
		case strings.EqualFold(h.Key, HeaderTraceparent):
			if !setTP {
				out = append(out, kgo.RecordHeader{Key: HeaderTraceparent, Value: []byte(tp)})
				setTP = true
			}
		case strings.EqualFold(h.Key, HeaderTracestate):
			if !setTS && ts != "" {
				out = append(out, kgo.RecordHeader{Key: HeaderTracestate, Value: []byte(ts)})
				setTS = true
			}
		default:
			out = append(out, h)
		}
	}
	if !setTP {
		out = append(out, kgo.RecordHeader{Key: HeaderTraceparent, Value: []byte(tp)})
	}
	if !setTS && ts != "" {
		out = append(out, kgo.RecordHeader{Key: HeaderTracestate, Value: []byte(ts)})
	}
	r.Headers = out
}
