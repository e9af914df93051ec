package redeliver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/redeliver"
	"github.com/redrive/redrive/internal/store"
)

// TestReservedTargetsAreNeverProducedTo: records written straight into the
// store, past ingest and the API, whose target is one of Redrive's own topics
// (their queue is the DLQ topic, an operator's override names the events
// topic, their topic policy's target_topic the archive topic) or a Kafka
// internal topic are never produced: each is kept as a dead letter whose
// redelivery_failure says not_routable and names the topic, with its attempt
// as it was and its archive copy due, and is counted. A healthy record of the
// same batch is redelivered.
func TestReservedTargetsAreNeverProducedTo(t *testing.T) {
	const eventsTopic, archiveTopic = dlqTopic + ".events", dlqTopic + ".archive"
	b := setup(t, "orders", "payments", eventsTopic)
	ctx := context.Background()

	ownQueue := b.due(t, dlqTopic, 1)[0]             // a forged record whose source is the DLQ itself
	internal := b.due(t, "__consumer_offsets", 1)[0] // a Kafka internal topic
	healthy := b.due(t, "orders", 1)[0]
	viaPolicy := b.due(t, "payments", 1)[0] // payments' policy targets the archive topic
	// An operator's override naming the events topic, stored as the API's
	// retry stores it (the API itself refuses it).
	viaOverride := b.due(t, "orders", 1)[0]
	if _, err := b.pool.Exec(ctx, "UPDATE redrive_lifecycle SET state = 'discarded', next_retry_at = NULL WHERE id = $1", viaOverride.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.RetryRecord(ctx, &store.RetryParams{ID: viaOverride.ID, Redelivery: &dlq.Redelivery{Topic: eventsTopic}}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Second) // the retry is due at the database's now

	set := policies(t, "topics:\n  payments:\n    redelivery: {target_topic: "+archiveTopic+"}\n")
	m := metrics.New()
	s := b.scheduler(t, set, func(c *redeliver.Config) {
		c.Reserved = dlq.NewReservedTopics(dlqTopic, archiveTopic, eventsTopic)
		c.Metrics = m
	})
	if n, err := s.RunOnce(ctx); err != nil || n != 5 {
		t.Fatalf("RunOnce = %d, %v; want 5 claimed", n, err)
	}

	for _, c := range []struct {
		rec              dlq.Record
		topic, from, why string
		attempt          int // before the claim
	}{
		{ownQueue, dlqTopic, "the record's queue", "Redrive's own topics", 1},
		{internal, "__consumer_offsets", "the record's queue", "Kafka internal topic", 1},
		{viaPolicy, archiveTopic, "redelivery.target_topic", "Redrive's own topics", 1},
		{viaOverride, eventsTopic, "override.queue", "Redrive's own topics", 0}, // a manual retry resets it
	} {
		r, err := b.store.Get(ctx, c.rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		f := r.RedeliveryFailure
		if r.State != dlq.StateDiscarded || r.Exhaustion != dlq.ExhaustionDeadLetter || r.NextRetryAt != nil || r.DiscardedAt == nil ||
			r.Attempt != c.attempt {
			t.Errorf("%s record: state %s exhaustion %s attempt %d next %v discarded %v; want a dead letter, attempt as before, nothing due",
				c.topic, r.State, r.Exhaustion, r.Attempt, r.NextRetryAt, r.DiscardedAt)
		}
		if f == nil || f.Reason != dlq.ReasonNotRoutable || !strings.Contains(f.Message, `"`+c.topic+`"`) ||
			!strings.Contains(f.Message, c.from) || !strings.Contains(f.Message, c.why) || !f.NextAttemptAt.IsZero() {
			t.Errorf("%s record: redelivery_failure %+v; want not_routable naming %q, %s and why (%s), nothing next", c.topic, f, c.topic, c.from, c.why)
		}
		if r.Archive == nil || r.Archive.State != dlq.ArchivePending {
			t.Errorf("%s record: archive %+v, want its copy due", c.topic, r.Archive)
		}
	}

	// Nothing reached Redrive's own topics; the healthy record reached orders.
	ends, err := kadm.NewClient(kafkatest.Client(t, b.brokers)).ListEndOffsets(ctx, dlqTopic, archiveTopic, eventsTopic)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset != 0 {
			t.Errorf("%s[%d] holds %d records; Redrive must never produce a redelivery to it", o.Topic, o.Partition, o.Offset)
		}
	})
	got := kafkatest.Consume(t, b.brokers, "orders", 1, 10*time.Second)
	if id := header(got[0], "redrive.id"); id != healthy.ID {
		t.Fatalf("orders got record %s, want the healthy one %s", id, healthy.ID)
	}
	if r, _ := b.store.Get(ctx, healthy.ID); r.State != dlq.StateCompleted || r.RedeliveryFailure != nil {
		t.Fatalf("healthy record: %s %+v", r.State, r.RedeliveryFailure)
	}
	for q, want := range map[string]float64{dlqTopic: 1, "__consumer_offsets": 1, "payments": 1, "orders": 1} {
		if got := counterValue(t, m.Redelivery.Failures.WithLabelValues(q, dlq.ReasonNotRoutable)); got != want {
			t.Errorf("redrive_redelivery_failures_total{queue=%q,reason=not_routable} = %v, want %v", q, got, want)
		}
	}
	// Refused records wait for an operator: nothing is due any more.
	if n, err := s.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("second RunOnce = %d, %v; want nothing claimed", n, err)
	}
	blocked, err := b.store.BlockedQueues(ctx, []string{dlqTopic, "__consumer_offsets", "payments", "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if len(blocked) != 0 {
		t.Fatalf("blocked queues %v: a not-routable dead letter waits on no backoff", blocked)
	}
}
