package redeliver_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/ingest"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/redeliver"
	"github.com/redrive/redrive/internal/store"
)

// consume runs an application consumer on topic whose handler is h, wrapped
// by the client library, until the test ends.
func consume(t *testing.T, brokers []string, topic string, h redrive.Handler, opts ...redrive.Opt) {
	t.Helper()
	cl := kafkatest.Client(t, brokers, kgo.ConsumerGroup("app"), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	dl, err := redrive.New(cl, opts...)
	if err != nil {
		t.Fatal(err)
	}
	handle := dl.Wrap(h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			for _, r := range cl.PollFetches(ctx).Records() {
				if err := handle(ctx, r); err != nil {
					return
				}
				_ = cl.CommitRecords(ctx, r)
			}
		}
	}()
}

// ingestInto runs ingest on the DLQ topic with the test's clock and policies.
func (b *bundle) ingest(t *testing.T, cfg ingest.Config) {
	t.Helper()
	cfg.Brokers, cfg.ClientOpts, cfg.Clock = b.brokers, kafkatest.ClientOpts(b.brokers), b.clock
	in, err := ingest.New(cfg, b.store)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := in.Stop(); err != nil {
			t.Errorf("stopping: %v", err)
		}
	})
}

// waitRecord waits until the only record of queue satisfies cond.
func (b *bundle) waitRecord(t *testing.T, queue, what string, cond func(*dlq.Record) bool) *dlq.Record {
	t.Helper()
	var r *dlq.Record
	eventually.True(t, what, func() bool {
		page, err := b.store.List(context.Background(), &store.ListParams{Filter: filter.Filter{Queue: queue}, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Records) > 1 {
			t.Fatalf("queue %s has %d records; repeat failures must join their record", queue, len(page.Records))
		}
		if len(page.Records) == 1 && cond(&page.Records[0]) {
			r = &page.Records[0]
			return true
		}
		return false
	})
	return r
}

func TestFullLoopRetriesOnTheSourceTopicUntilExhaustedThenArchives(t *testing.T) {
	b := setup(t, "orders")
	set := policies(t, `
topics:
  orders:
    retry: {max_attempts: 3, initial_interval: PT10S, backoff_coefficient: 2.0, max_interval: PT1H,
            jitter: false, on_exhaustion: discard}
`)
	b.ingest(t, ingest.Config{Policies: set})
	sched := b.scheduler(t, set)
	ctx := context.Background()
	runOnce := func(want int) {
		t.Helper()
		if n, err := sched.RunOnce(ctx); err != nil || n != want {
			t.Fatalf("scheduler handled %d records (%v), want %d", n, err, want)
		}
	}

	// The application fails every delivery of the order.
	consume(t, b.brokers, "orders", func(context.Context, *kgo.Record) error {
		return redrive.Retry("db.connection_refused", errors.New("connection refused"))
	})
	kafkatest.Produce(t, kafkatest.Client(t, b.brokers), &kgo.Record{Topic: "orders", Key: []byte("order-1"), Value: []byte(`{"id":1}`)})

	r := b.waitRecord(t, "orders", "the first failure", func(r *dlq.Record) bool { return r.Attempt == 1 })
	if r.State != dlq.StateRetryable || r.NextRetryAt.Sub(r.Errors[0].OccurredAt) != 10*time.Second {
		t.Fatalf("after attempt 1: %s, next retry %v after the failure; want retryable, 10s (initial_interval)",
			r.State, r.NextRetryAt.Sub(r.Errors[0].OccurredAt))
	}
	runOnce(0) // not due yet
	b.clock.Advance(10 * time.Second)
	runOnce(1)

	r = b.waitRecord(t, "orders", "the second failure", func(r *dlq.Record) bool { return len(r.Errors) == 2 })
	if r.State != dlq.StateRetryable || r.Attempt != 2 || r.Errors[1].Attempt != 2 ||
		r.NextRetryAt.Sub(r.Errors[1].OccurredAt) != 20*time.Second {
		t.Fatalf("after attempt 2: %s attempt %d, next retry %v after the failure; want retryable 2, 20s (10s × 2¹)",
			r.State, r.Attempt, r.NextRetryAt.Sub(r.Errors[1].OccurredAt))
	}
	runOnce(0)
	b.clock.Advance(20 * time.Second)
	// The last redelivery.
	if n, err := sched.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("scheduler handled %d records (%v), want the last redelivery", n, err)
	}

	r = b.waitRecord(t, "orders", "exhaustion", func(r *dlq.Record) bool { return len(r.Errors) == 3 })
	if r.State != dlq.StateDiscarded || r.Exhaustion != dlq.ExhaustionDiscard || r.Attempt != 3 || r.NextRetryAt != nil {
		t.Fatalf("after attempt 3 of 3: %s/%s attempt %d next %v; want discarded/discard, nothing scheduled",
			r.State, r.Exhaustion, r.Attempt, r.NextRetryAt)
	}
	if r.Archive == nil || r.Archive.State != dlq.ArchivePending {
		t.Fatalf("a discarded record's archive copy is %+v, want pending", r.Archive)
	}
	if n, err := b.archiver(t).RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("archived %d (%v), want 1", n, err)
	}
	r = b.waitRecord(t, "orders", "the archive copy", func(r *dlq.Record) bool { return r.ArchivedAt != nil })
	if r.Archive.State != dlq.ArchiveDone || r.Archive.Reason != "" {
		t.Fatalf("archive after the copy: %+v", r.Archive)
	}

	deliveries := kafkatest.Consume(t, b.brokers, "orders", 3, 10*time.Second)
	for i, d := range deliveries[1:] {
		if header(d, "redrive.id") != r.ID || header(d, "redrive.attempt") != []string{"2", "3"}[i] ||
			string(d.Key) != "order-1" || string(d.Value) != `{"id":1}` {
			t.Fatalf("redelivery %d: key %q value %q headers %v", i+2, d.Key, d.Value, d.Headers)
		}
	}
	archived := kafkatest.Consume(t, b.brokers, dlqTopic+".archive", 1, 10*time.Second)[0]
	var history []dlq.ErrorEntry
	if err := json.Unmarshal([]byte(header(archived, "redrive.errors")), &history); err != nil || len(history) != 3 ||
		header(archived, "redrive.id") != r.ID || string(archived.Value) != `{"id":1}` {
		t.Fatalf("archive copy: headers %v (%v)", archived.Headers, err)
	}
}

// completion: ack — a redelivered record waits, available, for the
// consumer's acknowledgement, and the acknowledgement completes it.
func TestCompletionAckMarksTheRecordCompleted(t *testing.T) {
	b := setup(t, "orders")
	set := policies(t, "topics: {orders: {completion: ack}}\n")
	b.ingest(t, ingest.Config{Policies: set})
	sched := b.scheduler(t, set)

	// Fails the first time, succeeds on redelivery and acknowledges it.
	var calls atomic.Int32
	consume(t, b.brokers, "orders", func(context.Context, *kgo.Record) error {
		if calls.Add(1) == 1 {
			return errors.New("transient")
		}
		return nil
	}, redrive.AckCompletions())
	kafkatest.Produce(t, kafkatest.Client(t, b.brokers), &kgo.Record{Topic: "orders", Value: []byte("x")})

	b.waitRecord(t, "orders", "the failure", func(r *dlq.Record) bool { return r.State == dlq.StateRetryable })
	b.clock.Advance(time.Hour)
	if n, err := sched.RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("redelivered %d: %v", n, err)
	}
	r := b.waitRecord(t, "orders", "the completion", func(r *dlq.Record) bool { return r.State == dlq.StateCompleted })
	if r.CompletedAt == nil || r.CompletedBy != dlq.CompletedByAck || r.Attempt != 2 || len(r.Errors) != 1 || r.AckDueAt != nil {
		t.Fatalf("completed record: %+v", r)
	}
}

// completion: redelivered (the default) — a consumer that never
// acknowledges (AckCompletions off, a Spring or Connect consumer) leaves
// nothing waiting: its record is completed once it is produced back, and a
// repeat failure of that redelivery that comes back still joins the record
// and re-opens it.
func TestCompletionRedeliveredCompletesAndARepeatFailureReopens(t *testing.T) {
	b := setup(t, "orders")
	set := policies(t, `
topics:
  orders:
    retry: {max_attempts: 5, initial_interval: PT10S, backoff_coefficient: 1.0, max_interval: PT10S, jitter: false}
`)
	b.ingest(t, ingest.Config{Policies: set})
	sched := b.scheduler(t, set)
	ctx := context.Background()

	// Fails the original and the first redelivery, then succeeds; never acks.
	var calls atomic.Int32
	consume(t, b.brokers, "orders", func(context.Context, *kgo.Record) error {
		if calls.Add(1) <= 2 {
			return errors.New("transient")
		}
		return nil
	})
	kafkatest.Produce(t, kafkatest.Client(t, b.brokers), &kgo.Record{Topic: "orders", Value: []byte("x")})

	b.waitRecord(t, "orders", "the failure", func(r *dlq.Record) bool { return r.State == dlq.StateRetryable })
	b.clock.Advance(10 * time.Second)
	if n, err := sched.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("redelivered %d: %v", n, err)
	}
	// Completed as soon as it is produced back, before the consumer says
	// anything...
	r := b.waitRecord(t, "orders", "the redelivery", func(r *dlq.Record) bool { return r.Attempt == 2 })
	if r.State != dlq.StateCompleted && len(r.Errors) == 1 {
		t.Fatalf("redelivered record: %s, want completed", r.State)
	}
	// ...and re-opened when the redelivery fails.
	r = b.waitRecord(t, "orders", "the repeat failure", func(r *dlq.Record) bool { return len(r.Errors) == 2 })
	if r.State != dlq.StateRetryable || r.Attempt != 2 || r.CompletedAt != nil || r.CompletedBy != "" || r.NextRetryAt == nil {
		t.Fatalf("after the repeat failure: %s attempt %d completed %v by %q next %v; want retryable, re-opened",
			r.State, r.Attempt, r.CompletedAt, r.CompletedBy, r.NextRetryAt)
	}
	b.clock.Advance(10 * time.Second)
	if n, err := sched.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("redelivered %d: %v", n, err)
	}
	eventually.True(t, "the third delivery", func() bool { return calls.Load() >= 3 })
	r = b.waitRecord(t, "orders", "the completion", func(r *dlq.Record) bool { return r.Attempt == 3 })
	if r.State != dlq.StateCompleted || r.CompletedBy != dlq.CompletedByRedelivered || len(r.Errors) != 2 || r.InFlight {
		t.Fatalf("after the last redelivery: %s by %q, %d errors", r.State, r.CompletedBy, len(r.Errors))
	}
}

// completion: ack with a consumer that never acknowledges — the record is
// marked unacknowledged after ack_timeout (and counted), and an operator
// may retry it.
func TestAckTimeoutMarksTheRecordUnacknowledged(t *testing.T) {
	b := setup(t, "orders")
	set := policies(t, "topics: {orders: {completion: ack, ack_timeout: PT5M}}\n")
	m := metrics.New()
	sched := b.scheduler(t, set, func(c *redeliver.Config) { c.Metrics = m })
	ctx := context.Background()
	rec := b.due(t, "orders", 1)[0]

	if n, err := sched.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("redelivered %d: %v", n, err)
	}
	r, err := b.store.Get(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != dlq.StateAvailable || r.InFlight || r.AckDueAt == nil || !r.AckDueAt.Equal(b.clock.Now().Add(5*time.Minute)) {
		t.Fatalf("redelivered record: %s in flight %t ack due %v", r.State, r.InFlight, r.AckDueAt)
	}
	b.clock.Advance(5*time.Minute - time.Second)
	if _, err := sched.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _ := b.store.Get(ctx, rec.ID); r.UnacknowledgedAt != nil {
		t.Fatalf("marked unacknowledged before ack_timeout")
	}
	b.clock.Advance(time.Second)
	if _, err := sched.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	r, _ = b.store.Get(ctx, rec.ID)
	if r.State != dlq.StateAvailable || r.UnacknowledgedAt == nil || !r.UnacknowledgedAt.Equal(b.clock.Now()) {
		t.Fatalf("after ack_timeout: %s unacknowledged %v", r.State, r.UnacknowledgedAt)
	}
	if n := counterValue(t, m.Redelivery.Unacknowledged.WithLabelValues("orders")); n != 1 {
		t.Fatalf("redrive_unacknowledged_total = %v, want 1", n)
	}
	// An operator retries it: it goes out again, and waits for an ack anew.
	if _, err := b.store.RetryRecord(ctx, &store.RetryParams{ID: rec.ID}); err != nil {
		t.Fatalf("retrying an unacknowledged record: %v", err)
	}
	if n, err := sched.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("redelivered %d after the retry: %v", n, err)
	}
	r, _ = b.store.Get(ctx, rec.ID)
	if r.State != dlq.StateAvailable || r.UnacknowledgedAt != nil || r.Attempt != 1 || r.AckDueAt == nil {
		t.Fatalf("after the retry: %s unacknowledged %v attempt %d ack due %v", r.State, r.UnacknowledgedAt, r.Attempt, r.AckDueAt)
	}
}
