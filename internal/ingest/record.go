package ingest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/policy"
)

// batch is one polled batch, decoded and sorted by what it does.
type batch struct {
	// fresh are first failures: new records.
	fresh []dlq.Record
	// repeats are failures of redelivered records and completion acks; they
	// change existing records.
	repeats []dlq.Failure
	now     time.Time
	// fps fingerprints the batch's failures, each distinct one once.
	fps *fingerprints
	// pending: a new record waits for its schema (background decoder).
	pending bool
	// turned says, by index in fresh, why a rule turned a record away.
	turned map[int]*turnedAway
	// caps are the capacities of the topics the batch adds retryable
	// records to, enforced once it is stored.
	caps map[string]policy.Capacity
}

// resolvedTopic is a topic's effective policy with its retry policy's JSON,
// computed once per (topic, type) per batch rather than per record.
type resolvedTopic struct {
	topic policy.Topic
	json  []byte
	// known: a policy file or an API config declares the topic (strict_queues).
	known bool
	// filters are the topic's ingest filters that apply here.
	filters []*policy.Filter
}

type topicKey struct{ topic, typ string }

// decode sorts a polled batch into new records and changes to existing ones,
// applying the retry policy to each new failure.
func (in *Ingester) decode(recs []*kgo.Record) *batch {
	b := &batch{now: in.cfg.Clock.Now().UTC(), fresh: make([]dlq.Record, 0, len(recs)), fps: newFingerprints()}
	topics := make(map[topicKey]*resolvedTopic)
	for _, rec := range recs {
		f := envelope.Decode(rec)
		if f.RecordID != "" {
			b.repeats = append(b.repeats, f)
			continue
		}
		queue, unroutable := in.route(&f)
		key := topicKey{queue, f.Type}
		t, ok := topics[key]
		if !ok {
			t = in.resolve(queue, f.Type)
			topics[key] = t
		}
		r, ta := in.newRecord(&f, queue, unroutable, t, b)
		if ta != nil {
			if b.turned == nil {
				b.turned = map[int]*turnedAway{}
			}
			b.turned[len(b.fresh)] = ta
		}
		b.fresh = append(b.fresh, r)
	}
	return b
}

// route is the queue a failure belongs to, and when Redrive may not
// redeliver to it, why. The queue is the source topic, or the DLQ topic
// itself for records whose source is unknown (unparseable ones, which are
// kept for an operator anyway). A source topic that is one of Redrive's own
// topics, a Kafka internal topic or no legal topic name is not routable
// (see Config.Reserved); an illegal name (decoding already keeps such
// records as unparseable) is no queue either: the record is filed under the
// DLQ topic, the claimed name quoted, cut, in its error.
func (in *Ingester) route(f *dlq.Failure) (queue, unroutable string) {
	if f.Format == dlq.FormatUnparseable {
		return f.DLQ.Topic, ""
	}
	queue = f.Source.Topic
	if queue == "" { // every decoder needs one; should one not, it is kept all the same
		return f.DLQ.Topic, "the record names no source topic: there is nowhere to redeliver it to, so it is kept as a dead letter"
	}
	problem := in.cfg.Reserved.Problem(queue)
	if problem == "" {
		return queue, ""
	}
	unroutable = fmt.Sprintf("the source topic %s %s: there is nowhere to redeliver it to, so it is kept as a dead letter",
		quoteCut(queue), problem)
	if dlq.TopicNameProblem(queue) != "" {
		queue = f.DLQ.Topic
	}
	return queue, unroutable
}

// quoteCut quotes a name for a message, cut to dlq.MaxNameBytes.
func quoteCut(s string) string {
	if len(s) > dlq.MaxNameBytes {
		s = strings.ToValidUTF8(s[:dlq.MaxNameBytes], "") + "…"
	}
	return strconv.Quote(s)
}

// resolve is the effective policy of a queue and type, its retry policy
// within the limits (a topic config stored before the limits were lowered
// is clamped, not trusted).
func (in *Ingester) resolve(queue, typ string) *resolvedTopic {
	t := in.cfg.Policies.Resolve(queue, typ)
	if retry, notes := in.cfg.RetryLimits.Clamp(t.Retry); len(notes) > 0 {
		in.warn.warn("topic retry policy past REDRIVE_RETRY_* limits; clamped", "queue", queue, "type", typ,
			"clamped", strings.Join(notes, ", "))
		t.Retry = retry
	}
	known := true
	if k, ok := in.cfg.Policies.(Knower); ok && t.StrictQueues {
		known = k.Known(queue)
	}
	return &resolvedTopic{topic: t, json: in.retryJSON(t.Retry, queue), known: known, filters: applicable(t, in.cfg.Environment)}
}

func (in *Ingester) retryJSON(r policy.Retry, queue string) []byte {
	b, err := json.Marshal(r)
	if err != nil {
		// A policy that cannot be shown must not block ingest; keep the record.
		in.cfg.Logger.Error("encode retry policy", "component", "ingest", "queue", queue, "err", err)
		return []byte("{}")
	}
	return b
}

// newRecord turns a first failure into a record: retryable with its next
// retry time, or discarded when the policy, the handler's code or the topic's
// state says so, when it is not routable (unroutable says why), or when an
// ingest-side rule turns it away (ta says which).
func (in *Ingester) newRecord(f *dlq.Failure, queue, unroutable string, rt *resolvedTopic, b *batch) (dlq.Record, *turnedAway) {
	now := b.now
	failed := f.Error
	failed.Attempt = max(failed.Attempt, 1)
	if failed.OccurredAt.IsZero() || failed.OccurredAt.After(now) {
		failed.OccurredAt = now
	}
	t, retryJSON := rt.topic, rt.json
	if len(f.Retry) > 0 && unroutable == "" { // a record kept for an operator is never retried on its own
		if over, err := t.WithRecordOverride(f.Retry); err != nil {
			in.warn.warn("ignoring invalid redrive.retry header; the topic policy applies",
				"queue", queue, "dlq_topic", f.DLQ.Topic, "dlq_partition", f.DLQ.Partition, "dlq_offset", f.DLQ.Offset, "err", err)
		} else {
			// Nobody reviews a header: past the limits it is clamped, and the
			// record's retry policy (API: retry, schedule) shows the result.
			if retry, notes := in.cfg.RetryLimits.Clamp(over.Retry); len(notes) > 0 {
				in.warn.warn("redrive.retry header past REDRIVE_RETRY_* limits; clamped", "queue", queue,
					"dlq_topic", f.DLQ.Topic, "dlq_partition", f.DLQ.Partition, "dlq_offset", f.DLQ.Offset,
					"clamped", strings.Join(notes, ", "))
				over.Retry = retry
			}
			t, retryJSON = over, in.retryJSON(over.Retry, queue)
		}
	}
	r := dlq.Record{
		ID:          dlq.NewID(now),
		Queue:       queue,
		Type:        f.Type,
		Attempt:     failed.Attempt,
		MaxAttempts: t.Retry.MaxAttempts,
		Source:      f.Source,
		DLQ:         f.DLQ,
		Format:      f.Format,
		Key:         f.Key,
		Value:       f.Value,
		Headers:     f.Headers,
		Errors:      []dlq.ErrorEntry{failed},
		Retry:       retryJSON,
		CreatedAt:   now,
		Fingerprint: b.fps.of(&failed),
	}
	in.decodeSchemas(&r, b)
	if unroutable != "" {
		// After the failure's own error, so that the history says both what
		// failed and why it stays (and the record is found by error_type).
		e := dlq.ErrorEntry{Attempt: failed.Attempt, Type: dlq.ErrorTypeNotRoutable, Message: unroutable,
			Code: dlq.CodeDeadLetter, OccurredAt: now}
		r.Errors = append(r.Errors, e)
		r.Fingerprint = b.fps.of(&e)
	}
	if f.Format == dlq.FormatUnparseable || unroutable != "" {
		// Nowhere to redeliver it to: keep it for an operator.
		setOutcome(&r, policy.Decision{State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDeadLetter}, failed.OccurredAt, now)
		return r, nil
	}
	if ta, e, exh := in.turnAway(f, queue, rt, failed.Attempt); ta != nil {
		// After the failure's own error, as for a record not routable.
		e.OccurredAt = now
		r.Errors = append(r.Errors, e)
		r.Fingerprint = b.fps.of(&e)
		setOutcome(&r, policy.Decision{State: dlq.StateDiscarded, Exhaustion: exh}, failed.OccurredAt, now)
		return r, ta
	}
	setOutcome(&r, in.decide(t, &failed, failed.OccurredAt, now), failed.OccurredAt, now)
	if r.State == dlq.StateRetryable && t.Capacity.Limited() {
		if b.caps == nil {
			b.caps = map[string]policy.Capacity{}
		}
		b.caps[queue] = t.Capacity
	}
	return r, nil
}

// decide applies the topic's policy (and state) to a failed attempt.
// firstFailedAt is when the record first failed, for max_age.
func (in *Ingester) decide(t policy.Topic, failed *dlq.ErrorEntry, firstFailedAt, now time.Time) policy.Decision {
	d := t.Decide(failed.Attempt, failed.Type, failed.Code, firstFailedAt, now, in.cfg.Rand())
	if d.State == dlq.StateRetryable && t.State == policy.TopicDraining {
		// A draining topic takes no new retries; the record is kept for an operator.
		return policy.Decision{State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDeadLetter}
	}
	return d
}

// setOutcome applies a decision to a record. Backoff runs from the failure,
// so time the failure spent in Kafka counts toward it.
func setOutcome(r *dlq.Record, d policy.Decision, failedAt, now time.Time) {
	r.State, r.Exhaustion, r.UpdatedAt = d.State, d.Exhaustion, now
	r.NextRetryAt, r.DiscardedAt = nil, nil
	switch d.State {
	case dlq.StateRetryable:
		next := failedAt.Add(d.Delay)
		r.NextRetryAt = &next
	case dlq.StateDiscarded:
		r.DiscardedAt = &now
	}
}

// applyRepeat applies a repeat failure or a completion ack to its (locked)
// record, and reports whether it changed it. Only an outcome of the record's
// latest delivery counts, while the record waits for one: available (being
// produced, or waiting for its ack), or completed by that redelivery alone
// (completion: redelivered), which a repeat failure re-opens and an ack
// confirms. A failure or ack of any other delivery, one already applied, or
// a failure after the consumer acknowledged the delivery, changes nothing:
// that is what keeps max_attempts an exact bound under duplicates.
func (in *Ingester) applyRepeat(r *dlq.Record, f *dlq.Failure, b *batch) bool {
	now := b.now
	waiting := r.State == dlq.StateAvailable && r.NextRetryAt == nil ||
		r.State == dlq.StateCompleted && r.CompletedBy == dlq.CompletedByRedelivered
	if !waiting || r.Attempt != f.Attempt {
		return false
	}
	r.AckDueAt, r.UnacknowledgedAt = nil, nil
	if f.Completed {
		r.State, r.NextRetryAt, r.CompletedAt, r.CompletedBy, r.UpdatedAt = dlq.StateCompleted, nil, &now, dlq.CompletedByAck, now
		return true
	}
	r.CompletedAt, r.CompletedBy = nil, ""
	failed := f.Error
	failed.Attempt = f.Attempt
	if failed.OccurredAt.IsZero() || failed.OccurredAt.After(now) {
		failed.OccurredAt = now
	}
	t := in.cfg.Policies.Resolve(r.Queue, r.Type)
	// The record keeps the retry policy it was given (topic, type, record
	// override, or an operator's); the topic's state and max_age are current.
	if retry, err := policy.ParseRetry(r.Retry); err == nil {
		t.Retry = retry
	}
	// Within the limits, whatever it was given (a record stored with a
	// forged header before the limits existed).
	t.Retry, _ = in.cfg.RetryLimits.Clamp(t.Retry)
	first := r.CreatedAt // the history keeps only the latest errors
	if len(r.Errors) > 0 && r.Errors[0].OccurredAt.Before(first) {
		first = r.Errors[0].OccurredAt
	}
	r.Errors = append(r.Errors, failed)
	r.Fingerprint = b.fps.of(&failed)
	setOutcome(r, in.decide(t, &failed, first, now), failed.OccurredAt, now)
	return true
}
