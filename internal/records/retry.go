package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/mask"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/tracing"
)

// RetryParams is a manual retry of one record, with an operator's optional
// override (OJS dead-letter spec §6.3).
type RetryParams struct {
	ID string
	// Redelivery, when non-nil, replaces the record's pending redelivery
	// changes: the target topic, headers set on it, an edited value. The
	// original key, value and headers stay as received.
	Redelivery *dlq.Redelivery
	// Meta is merged into the record's meta when non-empty.
	Meta json.RawMessage
	// Retry, when non-nil, is a partial retry policy merged onto the
	// record's own (or, if it has none that parses, its queue's), held to
	// the bounds policy files are.
	Retry *policy.RetrySpec
	// Payload, when non-nil, is an edited payload (JSON): encoded with the
	// record's schema, or as JSON text, it becomes the redelivered value
	// (see EncodePayload). Redelivery must not set a value too.
	Payload json.RawMessage
	// Masking, when set, is what the operator saw of each queue's records
	// masked: the edit's masked values sent back as shown are replaced by
	// the record's own (keepMasked). Nil: the operator saw everything.
	Masking func(queue string) *mask.Rules
}

// Retry retries one record: it becomes available, attempt 0, redelivered as
// soon as the scheduler sees it. It reads the record once, to merge a retry
// override onto its policy and to check it has a topic to go back to.
//
// Errors: *TargetError for a reserved target topic, ErrNotFound,
// *PolicyError for a retry override out of bounds, *NoRouteError for a
// record with no topic to go back to, *RetryConflictError when it is in
// flight or completed, and for an edited payload EncodePayload's.
func (s *Service) Retry(ctx context.Context, p *RetryParams) (*dlq.Record, error) {
	target := ""
	if p.Redelivery != nil {
		target = p.Redelivery.Topic
		if target != "" {
			if msg := s.TargetProblem(target); msg != "" {
				return nil, &TargetError{Topic: target, Problem: msg}
			}
		}
	}
	cur, err := s.store.Get(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	_, span := s.cfg.Tracer.Start(ctx, tracing.FromHeaders(cur.Headers), "retry "+cur.Queue, trace.SpanKindInternal,
		retryAttrs(cur, p)...)
	r, err := s.retry(ctx, cur, p, target)
	tracing.End(span, err)
	return r, err
}

// retryAttrs are the attributes of an operator's retry span.
func retryAttrs(cur *dlq.Record, p *RetryParams) []attribute.KeyValue {
	edited := p.Payload != nil || p.Redelivery != nil && p.Redelivery.ValueSet
	attrs := []attribute.KeyValue{tracing.AttrRecordID.String(cur.ID), tracing.AttrEdited.Bool(edited)}
	if rd := p.Redelivery; rd != nil {
		if rd.Topic != "" {
			attrs = append(attrs, semconv.MessagingDestinationName(rd.Topic))
		}
		if rd.Target != "" {
			attrs = append(attrs, attribute.String("redrive.retry.target", rd.Target))
		}
	}
	return attrs
}

// retry is Retry of the record as read (cur).
func (s *Service) retry(ctx context.Context, cur *dlq.Record, p *RetryParams, target string) (*dlq.Record, error) {
	if p.Masking != nil {
		if err := keepMasked(p.Masking(cur.Queue), cur, p); err != nil {
			return nil, err
		}
	}
	sp := &store.RetryParams{ID: p.ID, Redelivery: p.Redelivery, Meta: p.Meta}
	if p.Payload != nil {
		enc, err := s.EncodePayload(ctx, cur, p.Payload)
		if err != nil {
			return nil, err
		}
		rd := enc.Redelivery(nil)
		if p.Redelivery != nil {
			rd.Topic, rd.Headers, rd.Target = p.Redelivery.Topic, p.Redelivery.Headers, p.Redelivery.Target
		}
		sp.Redelivery = rd
	}
	if p.Retry != nil {
		merged, err := s.mergeRetry(cur, p.Retry)
		if err != nil {
			return nil, err
		}
		raw, err := json.Marshal(merged)
		if err != nil {
			return nil, fmt.Errorf("encode retry policy: %w", err)
		}
		sp.Retry, sp.MaxAttempts = raw, merged.MaxAttempts
	}
	if why := s.noRoute(cur, target); why != "" {
		return nil, &NoRouteError{ID: p.ID, Queue: cur.Queue, Why: why}
	}
	r, err := s.store.RetryRecord(ctx, sp)
	switch {
	case errors.Is(err, ErrConflict):
		return nil, &RetryConflictError{Err: err, Record: cur}
	case err != nil:
		return nil, err
	}
	s.cfg.Wake()
	s.cfg.Events.Publish(ctx, events.Record(events.DeadLetterRetried, events.RecordData{ID: r.ID, Queue: r.Queue,
		RecordKeyData: events.KeyOf(r.Key), Type: r.Type, State: string(r.State), Attempt: r.Attempt}))
	return r, nil
}

// mergeRetry merges an operator's partial retry policy onto the record's
// own (its queue's when its own does not parse), held to the bounds policy
// files are (REDRIVE_RETRY_MAX_ATTEMPTS, REDRIVE_RETRY_MIN_INTERVAL).
func (s *Service) mergeRetry(r *dlq.Record, spec *policy.RetrySpec) (policy.Retry, error) {
	base, err := policy.ParseRetry(r.Retry)
	if err != nil {
		base = s.cfg.Queues.Resolve(r.Queue, r.Type).Retry
	}
	if err := s.cfg.Queues.Limits().Check(spec); err != nil {
		return policy.Retry{}, &PolicyError{Err: err}
	}
	merged := base.Merge(spec)
	if err := merged.Validate(); err != nil {
		return policy.Retry{}, &PolicyError{Err: err}
	}
	return merged, nil
}

// Policy is the policy a record's next failure is judged by, as ingest
// judges it: the record keeps the retry policy it was given (topic, type,
// record override, or an operator's), while max_age and the rest are its
// topic's current ones.
func (s *Service) Policy(r *dlq.Record) policy.Topic {
	t := s.cfg.Queues.Resolve(r.Queue, r.Type)
	if retry, err := policy.ParseRetry(r.Retry); err == nil {
		t.Retry = retry
	}
	return t
}

// Delete deletes one record (ErrNotFound when there is none) and emits
// dead_letter.deleted.
func (s *Service) Delete(ctx context.Context, id string) error {
	row, err := s.store.DeleteRecord(ctx, id)
	if err != nil {
		return err
	}
	s.cfg.Events.Publish(ctx, BatchEvents(TaskPurge, []BatchRow{row})...)
	return nil
}

// BatchEvents turns the records a bulk change touched into lifecycle events:
// dead_letter.retried for a retry, dead_letter.deleted for a purge.
func BatchEvents(kind TaskKind, rows []BatchRow) []events.Event {
	t := events.DeadLetterRetried
	if kind == TaskPurge {
		t = events.DeadLetterDeleted
	}
	out := make([]events.Event, len(rows))
	for i, r := range rows {
		out[i] = events.Record(t, events.RecordData{ID: r.ID, Queue: r.Queue, RecordKeyData: events.RecordKey(r.KeyPrefix, r.KeySize), Type: r.Type})
	}
	return out
}

// TraceBatch records, for each record a committed batch of bulk retry task
// t retried that carries a trace context, a span in the record's trace
// (retry <queue>, with the task's id). It reads the batch's headers only
// when tracing is on; a purge has no records left to trace.
func (s *Service) TraceBatch(ctx context.Context, t *store.Task, rows []store.BatchRow) {
	if !s.cfg.Tracer.On() || t.Kind != TaskRetry || len(rows) == 0 {
		return
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	headers, err := s.store.RecordHeaders(ctx, ids)
	if err != nil {
		s.log.Warn("bulk retry spans not recorded", "task", t.ID, "err", err)
		return
	}
	for _, r := range rows {
		attrs := []attribute.KeyValue{tracing.AttrRecordID.String(r.ID), tracing.AttrTaskID.String(t.ID),
			tracing.AttrEdited.Bool(len(t.Patch) > 0)}
		if t.Target != "" {
			attrs = append(attrs, attribute.String("redrive.retry.target", t.Target))
		}
		_, span := s.cfg.Tracer.Start(ctx, tracing.FromHeaders(headers[r.ID]), "retry "+r.Queue, trace.SpanKindInternal, attrs...)
		tracing.End(span, nil)
	}
}

// PublishBatch emits the lifecycle events of a committed batch of a bulk
// task (the task runner calls it after each).
func (s *Service) PublishBatch(ctx context.Context, kind TaskKind, rows []BatchRow) {
	s.cfg.Events.Publish(ctx, BatchEvents(kind, rows)...)
}
