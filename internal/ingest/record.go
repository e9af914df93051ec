package ingest

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/policy"
)

// resolvedPolicy is a retry policy with its JSON form, computed once per
// (topic, type) per batch rather than per record.
type resolvedPolicy struct {
	retry policy.Retry
	json  []byte
}

type policyKey struct{ topic, typ string }

// buildRecords decodes a polled batch and applies the retry policy to each failure.
func (in *Ingester) buildRecords(recs []*kgo.Record) []dlq.Record {
	now := in.cfg.Now().UTC()
	policies := make(map[policyKey]*resolvedPolicy)
	out := make([]dlq.Record, len(recs))
	for i, rec := range recs {
		f := envelope.Decode(rec)
		queue := f.Source.Topic
		if queue == "" {
			// Unparseable records have no known source: file them under the DLQ topic.
			queue = f.DLQ.Topic
		}
		key := policyKey{queue, f.Type}
		pol, ok := policies[key]
		if !ok {
			pol = in.resolvePolicy(queue, f.Type)
			policies[key] = pol
		}
		out[i] = newRecord(&f, queue, pol, now, in.cfg.Rand())
	}
	return out
}

func (in *Ingester) resolvePolicy(queue, typ string) *resolvedPolicy {
	r := in.cfg.Policy(queue, typ)
	b, err := json.Marshal(r)
	if err != nil {
		// A policy that cannot be shown must not block ingest; keep the record.
		in.cfg.Logger.Error("encode retry policy", "component", "ingest", "queue", queue, "err", err)
		b = []byte("{}")
	}
	return &resolvedPolicy{retry: r, json: b}
}

// newRecord turns a first failure into a record: retryable with its next
// retry time, or discarded when the policy or the handler's code says so.
func newRecord(f *dlq.Failure, queue string, pol *resolvedPolicy, now time.Time, u float64) dlq.Record {
	failed := f.Error
	if failed.Attempt < 1 {
		failed.Attempt = 1
	}
	if failed.OccurredAt.IsZero() || failed.OccurredAt.After(now) {
		failed.OccurredAt = now
	}
	d := pol.retry.Decide(failed.Attempt, failed.Type, failed.Code, u)
	r := dlq.Record{
		ID:          uuid.Must(uuid.NewV7()).String(),
		Queue:       queue,
		Type:        f.Type,
		State:       d.State,
		Exhaustion:  d.Exhaustion,
		Attempt:     failed.Attempt,
		MaxAttempts: pol.retry.MaxAttempts,
		Source:      f.Source,
		DLQ:         f.DLQ,
		Format:      f.Format,
		Key:         f.Key,
		Value:       f.Value,
		Headers:     f.Headers,
		Errors:      []dlq.ErrorEntry{failed},
		Retry:       pol.json,
		CreatedAt:   now,
		UpdatedAt:   now,
	}
	switch d.State {
	case dlq.StateRetryable:
		// Backoff runs from the failure, so time spent in Kafka counts toward it.
		next := failed.OccurredAt.Add(d.Delay)
		r.NextRetryAt = &next
	case dlq.StateDiscarded:
		r.DiscardedAt = &now
	}
	return r
}
