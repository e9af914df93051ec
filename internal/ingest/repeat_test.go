package ingest_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/kafkatest"
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
	now := time.Now().UTC()
	id := uuid.Must(uuid.NewV7()).String()
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
