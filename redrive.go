// Package redrive is the client library of Redrive, a Kafka-native
// dead-letter processor. It wraps a franz-go record handler: when the handler
// fails a record, the record goes to the DLQ topic with its failure context
// instead of blocking its partition or being dropped, and Redrive retries,
// stores and replays it from there.
//
// The guarantee is no loss: a wrapped handler returns nil only once the
// record is done — handled, or written to the DLQ and acknowledged by the
// broker — so the caller may commit its offset. When the DLQ write fails, the
// wrapped handler returns an error and the caller must not commit: the record
// is consumed again after a restart (backpressure, never loss).
//
// A typical consumer loop with manual commits (kgo.DisableAutoCommit):
//
//	dl, err := redrive.New(cl)
//	handle := dl.Wrap(myHandler)
//	for {
//		fetches := cl.PollFetches(ctx)
//		for _, r := range fetches.Records() {
//			if err := handle(ctx, r); err != nil {
//				return err // not done: do not commit; a restart resumes here
//			}
//			if err := cl.CommitRecords(ctx, r); err != nil {
//				return err
//			}
//		}
//	}
//
// DeadLetterer.Process does the inner loop for a whole poll.
//
// Handlers classify failures with typed errors (Retry, Discard, DeadLetter,
// Fail, or an *Error) that carry a dot-namespaced error type and a Code.
//
// The package never commits offsets itself and never drops a record.
package redrive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	rdclock "github.com/redrive/redrive/internal/clock"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/tracing"
)

// Handler processes one record. A nil error means the record is done.
type Handler func(ctx context.Context, r *kgo.Record) error

// DeadLetterer sends the records a handler fails to the DLQ topic. It is safe
// for concurrent use, e.g. by one goroutine per partition.
type DeadLetterer struct {
	cl     *kgo.Client
	cfg    cfg
	log    *slog.Logger
	guard  *floodGuard        // nil without FloodGuard
	skips  prometheus.Counter // nil without Registerer
	tracer trace.Tracer
}

// New returns a DeadLetterer that produces failed records with client, which
// may be the consuming client itself. client must not be transactional: the
// DLQ write has to be acknowledged on its own, before the offset commit.
//
// Produce settings are client's: a publish waits for the broker's ack, for
// ctx, or for the client's kgo.RecordDeliveryTimeout / kgo.RecordRetries to
// give up, whichever comes first. Consider bounding them so that a DLQ outage
// surfaces as an error rather than a stalled consumer.
func New(client *kgo.Client, opts ...Opt) (*DeadLetterer, error) {
	if client == nil {
		return nil, errors.New("redrive: New: nil client")
	}
	c := cfg{dlqTopic: DefaultDLQTopic, now: rdclock.Wall.Now} // the real time (a test's moved one)
	for _, o := range opts {
		o.apply(&c)
	}
	if !c.groupSet {
		c.group, _ = client.OptValue(kgo.ConsumerGroup).(string)
	}
	switch {
	case c.dlqTopic == "":
		return nil, errors.New("redrive: New: empty DLQ topic")
	case c.retries < 0:
		return nil, fmt.Errorf("redrive: New: InlineRetries: negative count %d", c.retries)
	case c.backoff < 0:
		return nil, fmt.Errorf("redrive: New: InlineRetries: negative backoff %v", c.backoff)
	}
	if txn, _ := client.OptValue(kgo.TransactionalID).(string); txn != "" {
		return nil, fmt.Errorf("redrive: New: client is transactional (%q); give New a non-transactional client", txn)
	}
	log := c.logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tp := c.tracer
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	d := &DeadLetterer{cl: client, cfg: c, log: log.With("component", "redrive"),
		tracer: tp.Tracer(tracing.Name, trace.WithSchemaURL(semconv.SchemaURL))}
	if c.registerer != nil {
		d.skips = prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "redrive_client_redeliveries_skipped_total",
			Help:        "Redeliveries the client library skipped because they were for another consumer group (redrive.target.group).",
			ConstLabels: prometheus.Labels{"dlq_topic": c.dlqTopic, "group": c.group},
		})
		if err := c.registerer.Register(d.skips); err != nil {
			return nil, fmt.Errorf("redrive: New: register metrics: %w", err)
		}
	}
	if c.flood != nil {
		g, err := newFloodGuard(*c.flood, d)
		if err != nil {
			return nil, fmt.Errorf("redrive: New: FloodGuard: %w", err)
		}
		d.guard = g
	}
	return d, nil
}

// Wrap returns a handler that runs h and dead-letters the records it fails.
//
// The returned handler returns nil when the record is done: h succeeded
// (possibly after inline retries), or h failed and the record is now in the
// DLQ topic, acknowledged by the broker. A panic in h is a failure too, of
// type ErrorTypePanic with the panic's stack as backtrace. The returned
// handler returns a *PublishError when the record could not be dead-lettered:
// the record is not done and its offset must not be committed.
//
// A record Redrive redelivered for one consumer group only (it carries
// redrive.target.group, see docs/redelivery.md) is handed to h only in that
// group: in any other group, and in a consumer without a group, the returned
// handler skips it — it returns nil at once, so the caller commits past it —
// counts it (redrive_client_redeliveries_skipped_total, see Registerer) and
// logs it at Debug. The group is the Group option, else the client's
// kgo.ConsumerGroup.
//
// With FloodGuard, the returned handler also returns a *FloodError
// (errors.Is(err, ErrFlooded)) for a record the guard holds in Kafka: not
// done either, but the caller should keep polling (see FloodGuard).
//
// Wrap has the middleware shape func(Handler) Handler.
func (d *DeadLetterer) Wrap(h Handler) Handler {
	return func(ctx context.Context, r *kgo.Record) error {
		if d.otherGroup(r) {
			return nil
		}
		if d.guard != nil {
			return d.guard.handle(ctx, d, h, r)
		}
		err := d.run(ctx, h, r)
		if err == nil {
			if d.cfg.ack {
				d.ackCompletion(ctx, r)
			}
			return nil
		}
		return d.Publish(ctx, r, err)
	}
}

// run calls h, retrying inline as configured, and returns the last error.
func (d *DeadLetterer) run(ctx context.Context, h Handler, r *kgo.Record) error {
	for try := 0; ; try++ {
		err := call(ctx, h, r)
		if err == nil {
			return nil
		}
		if try >= d.cfg.retries || classify(err).code != CodeRetry || ctx.Err() != nil {
			return err
		}
		d.log.Debug("handler failed; retrying inline",
			"topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
			"try", try+1, "of", d.cfg.retries+1, "err", err)
		if !sleep(ctx, d.cfg.backoff) {
			return err
		}
	}
}

// call runs h, turning a panic into an error.
func call(ctx context.Context, h Handler, r *kgo.Record) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &panicError{value: p, stack: debug.Stack()}
		}
	}()
	return h(ctx, r)
}

// sleep waits for d or ctx, reporting whether it waited the whole time.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Publish dead-letters r, which failed with cause: it produces the native
// failure envelope (r's key, value and headers, plus the failure context) to
// the DLQ topic and waits for the broker's ack. It returns nil once the record
// is safely in the DLQ, and a *PublishError otherwise. Wrap calls it; call it
// directly to dead-letter from a loop of your own.
//
// The failure's type, code, details and backtrace come from cause (see Error);
// a cause without a type is named after its Go type (*net.OpError is
// "net.OpError", errors.New is ErrorTypeGeneric). If r was redelivered by
// Redrive (it carries redrive.id and redrive.attempt), those headers go back
// with it so the failure joins its existing record.
func (d *DeadLetterer) Publish(ctx context.Context, r *kgo.Record, cause error) error {
	return d.publish(ctx, r, cause, classify(cause), "")
}

// publish is Publish of a classified cause; a flood guard deciding on a
// flood passes its fingerprint as flood, written as FloodHeader.
func (d *DeadLetterer) publish(ctx context.Context, r *kgo.Record, cause error, f failure, flood string) error {
	info := envelope.FailureInfo{
		DLQTopic:  d.cfg.dlqTopic,
		Group:     d.cfg.group,
		ErrorType: f.typ,
		Message:   f.message,
		Code:      dlq.Code(f.code),
		Backtrace: f.backtrace,
		Details:   f.details,
		FailedAt:  d.cfg.now(),
	}
	if d.cfg.recordType != nil {
		info.Type = d.cfg.recordType(r)
	}
	env := envelope.Encode(r, info)
	if flood != "" {
		env.Headers = append(env.Headers, kgo.RecordHeader{Key: FloodHeader, Value: []byte(flood)})
	}
	ctx, span := d.startPublish(ctx, r, f)
	// The DLQ record carries the publish span's context, once: Redrive's
	// spans for the record are its children. A kotel hook on the client
	// parents its own publish span to it (env.Context) and injects that.
	tracing.Inject(env, span.SpanContext())
	env.Context = ctx
	out, err := d.cl.ProduceSync(ctx, env).First()
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.End()
		d.log.Error("dead-letter publish failed; record not done",
			"topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
			"dlq_topic", d.cfg.dlqTopic, "error_type", f.typ, "err", err)
		return &PublishError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, HandlerErr: cause, Err: err}
	}
	attrs := []any{"topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
		"error_type", f.typ, "code", string(f.code), "message", f.message,
		"dlq_topic", out.Topic, "dlq_partition", out.Partition, "dlq_offset", out.Offset}
	if flood != "" {
		attrs = append(attrs, "flood", flood)
	}
	d.log.Warn("record dead-lettered", attrs...)
	span.SetAttributes(semconv.MessagingDestinationPartitionID(strconv.Itoa(int(out.Partition))), semconv.MessagingKafkaOffset(int(out.Offset)))
	span.End()
	return nil
}

// startPublish starts the dead-letter publish span of r (messaging
// semantic conventions: send to the DLQ topic, kind producer). It is linked
// to r's trace context — its traceparent header, the creation context — and
// to the consumer span a kotel hook put in r.Context; its parent is the
// span of ctx (the handler's), else that consumer span, else the creation
// context, so that it stays in the record's trace.
func (d *DeadLetterer) startPublish(ctx context.Context, r *kgo.Record, f failure) (context.Context, trace.Span) {
	creation := tracing.FromRecord(r)
	var consumer trace.SpanContext
	if r.Context != nil {
		consumer = trace.SpanContextFromContext(r.Context)
	}
	var links []trace.Link
	if creation.IsValid() {
		links = append(links, trace.Link{SpanContext: creation})
	}
	if consumer.IsValid() && !consumer.Equal(creation) {
		links = append(links, trace.Link{SpanContext: consumer})
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		switch {
		case consumer.IsValid():
			ctx = trace.ContextWithSpanContext(ctx, consumer)
		case creation.IsValid():
			ctx = trace.ContextWithRemoteSpanContext(ctx, creation)
		}
	}
	attrs := append(tracing.Messaging("send", semconv.MessagingOperationTypeSend, d.cfg.dlqTopic),
		attribute.String("redrive.source.topic", r.Topic),
		attribute.Int("redrive.source.partition", int(r.Partition)),
		attribute.Int64("redrive.source.offset", r.Offset),
		tracing.AttrErrorType.String(f.typ),
		attribute.String("redrive.error.code", string(f.code)))
	if d.cfg.group != "" {
		attrs = append(attrs, semconv.MessagingConsumerGroupName(d.cfg.group))
	}
	return d.tracer.Start(ctx, "send "+d.cfg.dlqTopic, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithLinks(links...), trace.WithAttributes(attrs...))
}

// otherGroup reports whether r is a redelivery for another consumer group
// (redrive.target.group names a group that is not d's), counting and
// logging it when it is.
func (d *DeadLetterer) otherGroup(r *kgo.Record) bool {
	var target []byte
	found := false
	for _, h := range r.Headers {
		if h.Key == envelope.HeaderTargetGroup {
			target, found = h.Value, true
		}
	}
	if !found || string(target) == d.cfg.group {
		return false
	}
	if d.skips != nil {
		d.skips.Inc()
	}
	if d.log.Enabled(context.Background(), slog.LevelDebug) {
		id, attempt := redeliveryOf(r)
		d.log.Debug("redelivery for another consumer group skipped; its offset may be committed",
			"topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
			"target_group", string(target), "group", d.cfg.group, "redrive_id", id, "attempt", attempt)
	}
	return true
}

// Process runs h, wrapped (see Wrap), on the records of fetches in order and
// returns the records that are done, ready for kgo.Client.CommitRecords. It
// stops at the first record it cannot dead-letter and returns that
// *PublishError: the returned records then stop before it in its partition,
// and the caller should commit them and stop consuming, so that a restart
// resumes at the record that is not done. Fetch errors are not inspected.
//
// With FloodGuard, records the guard holds are left out of the returned
// records, and Process goes on over the poll (the guard holds the rest too,
// rewinding each partition to its first held record) and returns the first
// *FloodError: commit the returned records and keep polling; the held records
// come back once the guard resumes.
func (d *DeadLetterer) Process(ctx context.Context, fetches kgo.Fetches, h Handler) ([]*kgo.Record, error) {
	handle := d.Wrap(h)
	var done []*kgo.Record
	var flooded error
	iter := fetches.RecordIter()
	for !iter.Done() {
		r := iter.Next()
		err := handle(ctx, r)
		if err == nil {
			done = append(done, r)
			continue
		}
		if _, ok := err.(*FloodError); ok { //nolint:errorlint // the guard's own error, not one a handler wrapped
			if flooded == nil {
				flooded = err
			}
			continue
		}
		return done, err
	}
	return done, flooded
}

// ackCompletion tells Redrive that a redelivered record succeeded.
func (d *DeadLetterer) ackCompletion(ctx context.Context, r *kgo.Record) {
	id, attempt := redeliveryOf(r)
	if id == "" {
		return
	}
	d.cl.Produce(context.WithoutCancel(ctx), envelope.Ack(d.cfg.dlqTopic, id, attempt, d.cfg.group), func(_ *kgo.Record, err error) {
		if err != nil {
			d.log.Warn("completion ack failed; Redrive does not learn that the redelivered record succeeded",
				"redrive_id", id, "attempt", attempt, "err", err)
		}
	})
}

// redeliveryOf returns the redrive.id and redrive.attempt of a record Redrive
// redelivered, or "" when r is not one.
func redeliveryOf(r *kgo.Record) (string, int) {
	var id string
	attempt := 0
	for _, h := range r.Headers {
		switch h.Key {
		case envelope.HeaderID:
			id = string(h.Value)
		case envelope.HeaderAttempt:
			attempt, _ = strconv.Atoi(string(h.Value))
		}
	}
	if attempt < 1 {
		return "", 0
	}
	return id, attempt
}
