package redeliver_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/store"
)

// TestRedeliveryTargetsTheFailingGroup: a redelivery to its source topic
// carries redrive.target.group, the group that failed it, when its target
// is group — the default, a policy's redelivery.target, a retry's
// override.target or a bulk retry's target — and none when the target is
// topic, when the failure names no group, or when the record goes to
// another topic (the failing group may not read it).
func TestRedeliveryTargetsTheFailingGroup(t *testing.T) {
	b := setup(t, "orders", "payments", "orders.retry")
	ctx := context.Background()
	withGroup := func(queue, group string) dlq.Record {
		r := b.due(t, queue, 1)[0]
		if _, err := b.pool.Exec(ctx, "UPDATE redrive_record_data SET source_group = $2 WHERE id = $1", r.ID, group); err != nil {
			t.Fatal(err)
		}
		return r
	}
	// retried makes a record a discarded one retried by an operator with rd.
	retried := func(r dlq.Record, rd *dlq.Redelivery) {
		if _, err := b.pool.Exec(ctx, "UPDATE redrive_lifecycle SET state = 'discarded', next_retry_at = NULL WHERE id = $1", r.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := b.store.RetryRecord(ctx, &store.RetryParams{ID: r.ID, Redelivery: rd}); err != nil {
			t.Fatal(err)
		}
	}
	byDefault := withGroup("orders", "billing")
	noGroup := withGroup("orders", "")
	topicPolicy := withGroup("payments", "ledger")
	overrideTopic := withGroup("orders", "billing")
	retried(overrideTopic, &dlq.Redelivery{Target: "topic"})
	overrideGroup := withGroup("payments", "ledger")
	retried(overrideGroup, &dlq.Redelivery{Target: "group"})
	elsewhere := withGroup("orders", "billing")
	retried(elsewhere, &dlq.Redelivery{Topic: "orders.retry", Target: "group"})
	bulkTopic := withGroup("orders", "billing")
	if _, err := b.pool.Exec(ctx, "UPDATE redrive_lifecycle SET state = 'discarded', next_retry_at = NULL WHERE id = $1", bulkTopic.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.store.WithTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		res, err := b.store.RetryBatch(ctx, tx, &store.BatchParams{Filter: filter.Filter{IDs: []string{bulkTopic.ID}}, Limit: 10, Target: "topic"})
		if err == nil && res.N != 1 {
			t.Errorf("bulk retry batch changed %d records, want 1", res.N)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Second) // the retries are due at the database's now

	set := policies(t, "topics:\n  payments:\n    redelivery: {target: topic}\n")
	s := b.scheduler(t, set)
	if n, err := s.RunOnce(ctx); err != nil || n != 7 {
		t.Fatalf("RunOnce = %d, %v; want 7 claimed", n, err)
	}
	got := map[string]*kgo.Record{}
	for _, topic := range []string{"orders", "payments", "orders.retry"} {
		want := map[string]int{"orders": 4, "payments": 2, "orders.retry": 1}[topic]
		for _, r := range kafkatest.Consume(t, b.brokers, topic, want, 10*time.Second) {
			got[header(r, "redrive.id")] = r
		}
	}
	for _, c := range []struct {
		name  string
		rec   dlq.Record
		group string
	}{
		{"default policy, failure names billing", byDefault, "billing"},
		{"default policy, failure names no group", noGroup, ""},
		{"policy target topic", topicPolicy, ""},
		{"override.target topic over the default", overrideTopic, ""},
		{"override.target group over a topic policy", overrideGroup, "ledger"},
		{"override.queue: another topic", elsewhere, ""},
		{"bulk retry target topic", bulkTopic, ""},
	} {
		r := got[c.rec.ID]
		if r == nil {
			t.Errorf("%s: record %s not redelivered", c.name, c.rec.ID)
			continue
		}
		n := 0
		for _, h := range r.Headers {
			if h.Key == "redrive.target.group" {
				n++
			}
		}
		if g := header(r, "redrive.target.group"); g != c.group || n > 1 {
			t.Errorf("%s: redrive.target.group = %q (%d headers), want %q", c.name, g, n, c.group)
		}
	}
}
