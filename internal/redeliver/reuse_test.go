package redeliver_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/redeliver"
	"github.com/redrive/redrive/internal/testdate"
)

// Each claim's keys and values are copied into memory that the claims before
// it released once their batches were produced and settled. Two workers
// claim small batches while others are being produced: every redelivered
// record must carry exactly the key and value stored for its id, which a
// batch whose memory was reused before its produce ended would not.
func TestBatchesOnReusedMemoryRedeliverEveryKeyAndValueExactly(t *testing.T) {
	b := setup(t, "orders")
	const n = 3000
	now := testdate.Now().UTC()
	past := now.Add(-time.Second)
	recs := make([]dlq.Record, n)
	want := make(map[string][2][]byte, n)
	for i := range recs {
		id := dlq.NewID(testdate.Now())
		// Values of 1–5 KiB, each filled with its own byte and number, so
		// that bytes of another record are told apart.
		value := append(fmt.Appendf(nil, "%d:", i), bytes.Repeat([]byte{byte('a' + i%26)}, 1024*(1+i%5))...)
		key := fmt.Appendf(nil, "key-%d", i)
		recs[i] = dlq.Record{
			ID: id, Queue: "orders", State: dlq.StateRetryable, Attempt: 1, MaxAttempts: 5,
			Source: dlq.Source{Topic: "orders", Partition: 0, Offset: int64(i)},
			DLQ:    dlq.Coord{Topic: dlqTopic, Partition: 0, Offset: int64(i)},
			Format: dlq.FormatRedrive, Key: key, Value: value,
			Errors:    []dlq.ErrorEntry{{Attempt: 1, Type: "db.down", Code: dlq.CodeRetry, OccurredAt: past}},
			CreatedAt: past, UpdatedAt: past, NextRetryAt: &past,
		}
		want[id] = [2][]byte{key, value}
	}
	if _, err := b.store.InsertRecords(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	s := b.scheduler(t, nil, func(c *redeliver.Config) {
		c.Clock, c.Workers, c.BatchSize, c.PollInterval = clock.Wall, 2, 100, 10*time.Millisecond
	})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := kafkatest.Consume(t, b.brokers, "orders", n, 60*time.Second)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range got {
		id := header(r, "redrive.id")
		w, ok := want[id]
		if !ok || seen[id] {
			t.Fatalf("redelivered a record with id %q: stored %v, seen before %v", id, ok, seen[id])
		}
		seen[id] = true
		if !bytes.Equal(r.Key, w[0]) || !bytes.Equal(r.Value, w[1]) {
			t.Fatalf("record %s redelivered with key %q and a value of %d bytes starting %q; stored key %q, value of %d bytes starting %q",
				id, r.Key, len(r.Value), r.Value[:min(len(r.Value), 12)], w[0], len(w[1]), w[1][:12])
		}
	}
	if len(seen) != n {
		t.Fatalf("redelivered %d records, want %d", len(seen), n)
	}
}
