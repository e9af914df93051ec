package ingest

import (
	"context"
	"fmt"
	"strings"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/store"
)

// The ingest-side rules (docs/policies.md): ingest filters, strict_queues
// and allowed_job_types decide, record by record, while a batch is decoded;
// capacity (max_size, max_size_bytes) is enforced per topic once the batch
// is stored, from the sizes the statistics table keeps. A record a rule
// turns away is never dropped: it is stored discarded, with an error entry
// saying which rule and why, counted, archived like any discarded record.

// Reasons a rule turns a record away: the metric's reason label.
const (
	reasonQueueFull         = "queue_full"
	reasonOverflow          = "overflow"
	reasonJobTypeNotAllowed = "job_type_not_allowed"
	reasonQueueNotFound     = "queue_not_found"
	reasonFiltered          = "filtered"
	reasonSkipRetry         = "skip_retry"
)

// Knower is implemented by the policy resolvers that know which topics are
// declared (a policy file's topics entry, by name or glob, or an API config):
// strict_queues turns the others away. A resolver without it knows every topic.
type Knower interface {
	Known(topic string) bool
}

// turnedAway is why a rule kept a new record from being retried.
type turnedAway struct {
	reason string
	filter *policy.Filter // the filter that matched, for filtered and skip_retry
}

// applicable returns the enabled filters of t that apply in env.
func applicable(t policy.Topic, env string) []*policy.Filter {
	var out []*policy.Filter
	for i := range t.Filters {
		if f := &t.Filters[i]; f.AppliesIn(env) {
			out = append(out, f)
		}
	}
	return out
}

// turnAway applies the filters, strict_queues and allowed_job_types to a new
// failure, in that order; the first that applies says why the record is
// kept from being retried: its error entry, and how it is kept.
func (in *Ingester) turnAway(f *dlq.Failure, queue string, rt *resolvedTopic, attempt int) (*turnedAway, dlq.ErrorEntry, dlq.Exhaustion) {
	t := rt.topic
	for _, flt := range rt.filters {
		if !flt.Matches(f) {
			continue
		}
		e := dlq.ErrorEntry{Attempt: attempt, Type: policy.ErrorTypeFiltered, Code: policy.CodeFiltered}
		if flt.Action == policy.FilterSkipRetry {
			e.Message = fmt.Sprintf("ingest filter %q matched (action skip_retry): kept as a dead letter, never redelivered automatically; an operator may retry it", flt.Name)
			return &turnedAway{reason: reasonSkipRetry, filter: flt}, e, dlq.ExhaustionDeadLetter
		}
		e.Message = fmt.Sprintf("ingest filter %q matched (action discard): kept as a discard, never retried", flt.Name)
		return &turnedAway{reason: reasonFiltered, filter: flt}, e, dlq.ExhaustionDiscard
	}
	if t.StrictQueues && !rt.known {
		return &turnedAway{reason: reasonQueueNotFound}, dlq.ErrorEntry{Attempt: attempt, Type: policy.ErrorTypeQueueNotFound,
			Code: policy.CodeQueueNotFound, Message: fmt.Sprintf(
				"strict_queues is on and no policy file or API config declares the topic %s: kept, never retried", quoteCut(queue))}, t.Retry.OnExhaustion
	}
	if !t.AllowsType(f.Type) {
		return &turnedAway{reason: reasonJobTypeNotAllowed}, dlq.ErrorEntry{Attempt: attempt, Type: policy.ErrorTypeJobTypeNotAllowed,
			Code: policy.CodeJobTypeNotAllowed, Message: fmt.Sprintf(
				"the record type %s is not among the allowed_job_types of %s (%s): kept, never retried",
				quoteCut(f.Type), quoteCut(queue), strings.Join(t.AllowedJobTypes, ", "))}, t.Retry.OnExhaustion
	}
	return nil, dlq.ErrorEntry{}, ""
}

// enforceCapacity brings each topic of the stored batch that has a capacity
// back within it (store.EnforceCapacity): under reject the batch's newest
// records past the limit are kept discarded (QUEUE_FULL), under drop_oldest
// the topic's oldest retryable records are (overflow). Records of the batch
// it changed are changed in fresh too; it returns every record it changed.
func (in *Ingester) enforceCapacity(ctx context.Context, b *batch, fresh []dlq.Record, stored store.InsertResult) ([]dlq.Record, error) {
	var changed []dlq.Record
	for queue, c := range b.caps {
		check := store.CapacityCheck{Queue: queue, MaxSize: c.MaxSize, MaxBytes: c.MaxSizeBytes, DropOldest: c.Overflow == policy.OverflowDropOldest}
		at := map[dlq.Coord]int{}
		for i := range fresh {
			if r := &fresh[i]; r.Queue == queue && r.State == dlq.StateRetryable {
				at[coordKey(r.DLQ)] = i
				check.Coords = append(check.Coords, r.DLQ)
			}
		}
		if len(check.Coords) == 0 {
			continue
		}
		now := b.now
		recs, err := in.store.EnforceCapacity(ctx, check, func(r *dlq.Record) {
			e := dlq.ErrorEntry{Attempt: r.Attempt, Type: policy.ErrorTypeQueueFull, Code: policy.CodeQueueFull, OccurredAt: now,
				Message: fmt.Sprintf("%s is full (%s): kept, not scheduled", quoteCut(queue), limits(c))}
			if check.DropOldest {
				e.Type, e.Code = policy.ErrorTypeOverflow, policy.CodeOverflow
				e.Message = fmt.Sprintf("%s is full (%s, overflow_policy drop_oldest): discarded, the oldest waiting record, to make room", quoteCut(queue), limits(c))
			}
			r.Errors = append(r.Errors, e)
			if len(r.Errors) > dlq.MaxErrorHistory {
				r.Errors = r.Errors[len(r.Errors)-dlq.MaxErrorHistory:]
			}
			r.State, r.Exhaustion, r.NextRetryAt, r.DiscardedAt, r.UpdatedAt = dlq.StateDiscarded, exhaustionOf(r), nil, &now, now
		})
		if err != nil {
			return changed, err
		}
		for _, r := range recs {
			if i, ok := at[coordKey(r.DLQ)]; ok && stored.New(i) {
				fresh[i] = r
				if i < len(b.fresh) { // fresh holds the batch's records, then orphans
					b.fresh[i] = r
				}
			}
		}
		changed = append(changed, recs...)
	}
	return changed, nil
}

// coordKey is a record's DLQ coordinates without the timestamp (Postgres
// keeps microseconds).
func coordKey(c dlq.Coord) dlq.Coord {
	return dlq.Coord{Topic: c.Topic, Partition: c.Partition, Offset: c.Offset}
}

// exhaustionOf is how a record turned away by capacity is kept: as its retry
// policy's on_exhaustion says.
func exhaustionOf(r *dlq.Record) dlq.Exhaustion {
	if retry, err := policy.ParseRetry(r.Retry); err == nil {
		return retry.OnExhaustion
	}
	return dlq.ExhaustionDeadLetter
}

func limits(c policy.Capacity) string {
	var parts []string
	if c.MaxSize > 0 {
		parts = append(parts, fmt.Sprintf("max_size %d", c.MaxSize))
	}
	if c.MaxSizeBytes > 0 {
		parts = append(parts, fmt.Sprintf("max_size_bytes %d", c.MaxSizeBytes))
	}
	return strings.Join(parts, ", ")
}

// reportRules counts what the rules turned away in a stored batch and
// announces the records drop_oldest discarded (job.discarded).
func (in *Ingester) reportRules(b *batch, res persisted) []events.Event {
	m := in.cfg.Metrics.Rules
	for i, ta := range b.turned {
		if !res.stored.New(i) {
			continue
		}
		m.TurnedAway.WithLabelValues(b.fresh[i].Queue, ta.reason).Inc()
		if ta.filter != nil {
			m.FilterMatches.WithLabelValues(ta.filter.Name, string(ta.filter.Action)).Inc()
		}
	}
	var evs []events.Event
	for i := range res.capped {
		r := &res.capped[i]
		last := r.LastError()
		if last.Type == policy.ErrorTypeOverflow {
			m.TurnedAway.WithLabelValues(r.Queue, reasonOverflow).Inc()
			evs = append(evs, events.Record(events.JobDiscarded, events.RecordData{
				ID: r.ID, Queue: r.Queue, RecordKeyData: events.KeyOf(r.Key), Type: r.Type, State: string(r.State),
				Exhaustion: string(r.Exhaustion), ErrorType: last.Type, Attempt: r.Attempt}))
		} else {
			m.TurnedAway.WithLabelValues(r.Queue, reasonQueueFull).Inc()
		}
	}
	return evs
}
