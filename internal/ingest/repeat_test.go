package ingest_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/testdate"
)

// failureOf is the DLQ record a consumer produces when delivery `attempt` of
// record id fails.
func failureOf(id string, attempt int) *kgo.Record {
	redelivered := &kgo.Record{Topic: "orders", Key: []byte("k"), Value: []byte("v"), Headers: []kgo.RecordHeader{
		{Key: envelope.HeaderID, Value: []byte(id)}, {Key: envelope.HeaderAttempt, Value: []byte(strconv.Itoa(attempt))},
	}}
	return envelope.Encode(redelivered, envelope.FailureInfo{DLQTopic: dlqTopic, ErrorType: "db.down", Message: "attempt " + strconv.Itoa(attempt)})
}

func TestRepeatFailuresJoinOnceEvenWhenDuplicated(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	now := testdate.Now().UTC()
	id := dlq.NewID(testdate.Now())
	// A record on its second delivery (redelivered, outcome pending), allowed 3 attempts.
	rec := dlq.Record{
		ID: id, Queue: "orders", State: dlq.StateAvailable, Attempt: 2, MaxAttempts: 3,
		Source: dlq.Source{Topic: "orders", Partition: 0, Offset: 1}, DLQ: dlq.Coord{Topic: dlqTopic, Offset: 1_000_000},
		Format: dlq.FormatRedrive, Retry: []byte(`{"max_attempts":3,"initial_interval":"PT1S","jitter":false}`),
		Errors:    []dlq.ErrorEntry{{Attempt: 1, Type: "db.down", Code: dlq.CodeRetry, OccurredAt: now}},
		CreatedAt: now, UpdatedAt: now,
	}
	if _, err := b.store.InsertRecords(ctx, []dlq.Record{rec}); err != nil {
		t.Fatal(err)
	}
	start(t, b, b.store, "g")

	// Delivery 2 fails, and the failure reaches the DLQ twice (a producer
	// retry); a stale failure of delivery 1 arrives too.
	kafkatest.Produce(t, b.cl, failureOf(id, 2), failureOf(id, 2), failureOf(id, 1))
	// A marker on the same partition (same key): once it is stored, the
	// failures produced before it have been ingested.
	marker := garbage(1)
	marker.Key = []byte("k")
	kafkatest.Produce(t, b.cl, marker)
	waitForCount(t, b.store, 2)

	got, err := b.store.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Errors) != 2 || got.Errors[1].Attempt != 2 || got.Attempt != 2 || got.State != dlq.StateRetryable ||
		got.NextRetryAt == nil || got.NextRetryAt.Sub(got.Errors[1].OccurredAt) != 2*time.Second {
		t.Fatalf("after duplicated failures of attempt 2: state %s attempt %d errors %d next %v; "+
			"want retryable, attempt 2, 2 errors, retry 2s (1s × 2¹) after the failure",
			got.State, got.Attempt, len(got.Errors), got.NextRetryAt)
	}
}

// Outcomes of a redelivery join its record by completion: a record completed
// by its redelivery alone (completion: redelivered) is re-opened by a repeat
// failure and confirmed by an acknowledgement; a record the consumer
// acknowledged stays completed whatever comes after; an unacknowledged one
// takes a late acknowledgement or failure like any record waiting for one.
func TestOutcomesOfRedeliveriesFollowCompletion(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	now := testdate.Now().UTC().Truncate(time.Microsecond)
	due := now.Add(-time.Minute)
	type seed struct {
		name  string
		state dlq.State
		by    dlq.CompletedBy
		unack bool
	}
	seeds := []seed{
		{"reopened", dlq.StateCompleted, dlq.CompletedByRedelivered, false},
		{"confirmed", dlq.StateCompleted, dlq.CompletedByRedelivered, false},
		{"acked", dlq.StateCompleted, dlq.CompletedByAck, false},
		{"late ack", dlq.StateAvailable, "", true},
		{"late failure", dlq.StateAvailable, "", true},
	}
	ids := make([]string, len(seeds))
	recs := make([]dlq.Record, len(seeds))
	for i := range seeds {
		ids[i] = dlq.NewID(testdate.Now())
		recs[i] = dlq.Record{
			ID: ids[i], Queue: "orders", State: dlq.StateAvailable, Attempt: 2, MaxAttempts: 5,
			Source: dlq.Source{Topic: "orders", Partition: 0, Offset: int64(i)}, DLQ: dlq.Coord{Topic: dlqTopic, Offset: 2_000_000 + int64(i)},
			Format: dlq.FormatRedrive, Retry: []byte(`{"max_attempts":5,"initial_interval":"PT1S","jitter":false}`),
			Errors:    []dlq.ErrorEntry{{Attempt: 1, Type: "db.down", Code: dlq.CodeRetry, OccurredAt: now}},
			CreatedAt: now, UpdatedAt: now,
		}
	}
	if _, err := b.store.InsertRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.UpdateLocked(ctx, ids, func(rs map[string]*dlq.Record) ([]*dlq.Record, error) {
		var out []*dlq.Record
		for i, s := range seeds {
			r := rs[ids[i]]
			r.State, r.CompletedBy = s.state, s.by
			if s.state == dlq.StateCompleted {
				r.CompletedAt = &now
			}
			if s.unack {
				r.AckDueAt, r.UnacknowledgedAt = &due, &due
			}
			out = append(out, r)
		}
		return out, nil
	}); err != nil {
		t.Fatal(err)
	}
	start(t, b, b.store, "g")

	ack := func(id string) *kgo.Record {
		r := envelope.Ack(dlqTopic, id, 2, "app")
		r.Key = []byte("k") // the partition of the failures and the marker
		return r
	}
	kafkatest.Produce(t, b.cl, failureOf(ids[0], 2), ack(ids[1]), failureOf(ids[2], 2), ack(ids[3]), failureOf(ids[4], 2))
	marker := garbage(1)
	marker.Key = []byte("k")
	kafkatest.Produce(t, b.cl, marker)
	waitForCount(t, b.store, int64(len(seeds))+1)

	got := make([]*dlq.Record, len(seeds))
	for i := range seeds {
		r, err := b.store.Get(ctx, ids[i])
		if err != nil {
			t.Fatal(err)
		}
		got[i] = r
	}
	if r := got[0]; r.State != dlq.StateRetryable || len(r.Errors) != 2 || r.CompletedAt != nil || r.CompletedBy != "" || r.NextRetryAt == nil {
		t.Errorf("%s: %s, %d errors, completed %v by %q; want retryable, the failure joined", seeds[0].name, r.State, len(r.Errors), r.CompletedAt, r.CompletedBy)
	}
	if r := got[1]; r.State != dlq.StateCompleted || r.CompletedBy != dlq.CompletedByAck || len(r.Errors) != 1 {
		t.Errorf("%s: %s by %q; want completed by ack", seeds[1].name, r.State, r.CompletedBy)
	}
	if r := got[2]; r.State != dlq.StateCompleted || r.CompletedBy != dlq.CompletedByAck || len(r.Errors) != 1 {
		t.Errorf("%s: %s by %q, %d errors; want completed by ack, the failure ignored", seeds[2].name, r.State, r.CompletedBy, len(r.Errors))
	}
	if r := got[3]; r.State != dlq.StateCompleted || r.CompletedBy != dlq.CompletedByAck || r.UnacknowledgedAt != nil || r.AckDueAt != nil {
		t.Errorf("%s: %s by %q unacknowledged %v; want completed by ack", seeds[3].name, r.State, r.CompletedBy, r.UnacknowledgedAt)
	}
	if r := got[4]; r.State != dlq.StateRetryable || len(r.Errors) != 2 || r.UnacknowledgedAt != nil || r.AckDueAt != nil {
		t.Errorf("%s: %s, %d errors, unacknowledged %v; want retryable, the failure joined", seeds[4].name, r.State, len(r.Errors), r.UnacknowledgedAt)
	}
}
