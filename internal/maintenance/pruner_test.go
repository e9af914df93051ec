package maintenance_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/store"
)

const day = 24 * time.Hour

// topicPolicy returns a PolicyFunc: the defaults changed by edit, for every queue.
func topicPolicy(edit func(t *policy.Topic)) maintenance.PolicyFunc {
	return func(q string) policy.Topic {
		t := maintenance.DefaultPolicy(q)
		edit(&t)
		return t
	}
}

func (b *bundle) pruner(t *testing.T, pol maintenance.PolicyFunc, cfg maintenance.PrunerConfig) *maintenance.Pruner {
	t.Helper()
	cfg.Store, cfg.Policy, cfg.Now, cfg.Events, cfg.Metrics = b.store, pol, b.clock.now, b.events, b.metrics
	p, err := maintenance.NewPruner(cfg)
	mustNoErr(t, err)
	return p
}

func TestPruneByAgeThenCount(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	now := b.clock.now()
	// orders: 3 dead letters past 10 days, 5 within; max_count 3 prunes the 2
	// oldest of those 5. Discards past 2 days and completed records past 1
	// day go too. billing keeps its own (default) retention.
	old := b.insert(t, deadLetter("orders", now.Add(-30*day)), deadLetter("orders", now.Add(-20*day)), deadLetter("orders", now.Add(-11*day)))
	young := b.insert(t,
		deadLetter("orders", now.Add(-9*day)), deadLetter("orders", now.Add(-8*day)), deadLetter("orders", now.Add(-7*day)),
		deadLetter("orders", now.Add(-6*day)), deadLetter("orders", now.Add(-5*day)))
	b.insert(t,
		rec{queue: "orders", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDiscard, at: now.Add(-3 * day)},
		rec{queue: "orders", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDiscard, at: now.Add(-1 * day)},
		rec{queue: "orders", state: dlq.StateCompleted, at: now.Add(-2 * day)},
		rec{queue: "orders", state: dlq.StateCompleted, at: now.Add(-time.Hour)},
		rec{queue: "orders", state: dlq.StateRetryable, at: now.Add(-300 * day)},
		deadLetter("billing", now.Add(-100*day)),
	)
	pol := func(q string) policy.Topic {
		t := maintenance.DefaultPolicy(q)
		if q == "orders" {
			t.DeadLetter.Retention = policy.DeadLetterRetention{MaxAge: 10 * day, MaxCount: 3}
			t.Retention = policy.Retention{Discarded: 2 * day, Completed: day}
		}
		return t
	}
	p := b.pruner(t, pol, maintenance.PrunerConfig{BatchSize: 2})
	res, err := p.RunOnce(ctx)
	mustNoErr(t, err)
	if !res.Leader {
		t.Fatal("not leader")
	}
	want := []maintenance.PruneCount{
		{Queue: "orders", Reason: maintenance.ReasonMaxAge, State: dlq.StateDiscarded, Count: 3},
		{Queue: "orders", Reason: maintenance.ReasonMaxCount, State: dlq.StateDiscarded, Count: 2},
		{Queue: "orders", Reason: maintenance.ReasonRetentionDiscarded, State: dlq.StateDiscarded, Count: 1},
		{Queue: "orders", Reason: maintenance.ReasonRetentionCompleted, State: dlq.StateCompleted, Count: 1},
	}
	if !slices.Equal(res.Pruned, want) {
		t.Fatalf("pruned %+v, want %+v", res.Pruned, want)
	}
	for _, id := range append(old, young[:2]...) {
		if _, err := b.store.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("record %s should be pruned: %v", id, err)
		}
	}
	for _, id := range young[2:] {
		if _, err := b.store.Get(ctx, id); err != nil {
			t.Errorf("record %s should be kept: %v", id, err)
		}
	}
	if n := b.count(t, "queue = 'orders'"); n != 3+1+1+1 {
		t.Errorf("orders keeps %d records, want 6", n)
	}
	if n := b.count(t, "queue = 'billing'"); n != 1 {
		t.Errorf("billing keeps %d records, want 1", n)
	}
	if got := value(t, b.metrics.PrunedTotal.WithLabelValues("orders")); got != 5 {
		t.Errorf("ojs_dead_letter_pruned_total{orders} = %v, want 5", got)
	}
	if got := value(t, b.metrics.RecordsPruned.WithLabelValues("orders", "completed", "retention.completed")); got != 1 {
		t.Errorf("completed pruned = %v, want 1", got)
	}
	evs := b.nextEvents(t, 4)
	for i, ev := range evs {
		d := ev.Data.(events.PrunedData)
		if ev.Type != events.DeadLetterPruned || ev.Subject != "orders" || ev.Queue != "orders" ||
			d.Count != want[i].Count || d.Reason != want[i].Reason || d.PruningPolicy != "delete" {
			t.Errorf("event %d = %+v", i, ev)
		}
	}
	b.noMoreEvents(t)

	// A second pass finds nothing; time passing makes more records expire.
	res, err = p.RunOnce(ctx)
	mustNoErr(t, err)
	if res.Total() != 0 {
		t.Fatalf("second pass pruned %+v", res.Pruned)
	}
	b.clock.advance(4 * day) // the -7d dead letter becomes -11d; the rest expire too
	res, err = p.RunOnce(ctx)
	mustNoErr(t, err)
	want = []maintenance.PruneCount{
		{Queue: "orders", Reason: maintenance.ReasonMaxAge, State: dlq.StateDiscarded, Count: 1},
		{Queue: "orders", Reason: maintenance.ReasonRetentionDiscarded, State: dlq.StateDiscarded, Count: 1},
		{Queue: "orders", Reason: maintenance.ReasonRetentionCompleted, State: dlq.StateCompleted, Count: 1},
	}
	if !slices.Equal(res.Pruned, want) {
		t.Fatalf("after 4 days pruned %+v, want %+v", res.Pruned, want)
	}
}

func TestPruneArchive(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	brokers := kafkatest.New(t, "dead_letter_queue.archive")
	cl := kafkatest.Client(t, brokers)
	now := b.clock.now()
	ids := b.insert(t, deadLetter("orders", now.Add(-20*day)), deadLetter("orders", now.Add(-15*day)), deadLetter("orders", now.Add(-1*day)))
	pol := topicPolicy(func(t *policy.Topic) {
		t.DeadLetter.Retention.MaxAge = 10 * day
		t.PruningPolicy = policy.PruneArchive
	})
	p := b.pruner(t, pol, maintenance.PrunerConfig{Archive: cl, BatchSize: 1})
	res, err := p.RunOnce(ctx)
	mustNoErr(t, err)
	if res.Total() != 2 {
		t.Fatalf("pruned %+v, want 2", res.Pruned)
	}
	if n := b.count(t, "TRUE"); n != 1 {
		t.Fatalf("%d records left, want 1", n)
	}
	got := kafkatest.Consume(t, brokers, "dead_letter_queue.archive", 2, 10*time.Second)
	seen := map[string]bool{}
	for _, r := range got {
		h := headers(r)
		seen[h[envelope.HeaderID]] = true
		var hist []dlq.ErrorEntry
		if err := json.Unmarshal([]byte(h[envelope.HeaderErrors]), &hist); err != nil || len(hist) != 2 ||
			hist[0].Message != "first" || hist[1].Message != "second" {
			t.Errorf("archived history %q: %v", h[envelope.HeaderErrors], err)
		}
		if string(r.Key) != "k" || string(r.Value) != `{"n":1}` || h["traceparent"] != "00-abc" {
			t.Errorf("archived record lost its original key/value/headers: %q %q %v", r.Key, r.Value, h)
		}
	}
	if !seen[ids[0]] || !seen[ids[1]] {
		t.Errorf("archived %v, want %v", seen, ids[:2])
	}
	ev := b.nextEvents(t, 1)[0]
	if d := ev.Data.(events.PrunedData); d.Count != 2 || d.PruningPolicy != "archive" {
		t.Errorf("event %+v", ev)
	}
}

func TestPruneArchiveFailureKeepsRecords(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	now := b.clock.now()
	b.insert(t, deadLetter("orders", now.Add(-20*day)))
	pol := topicPolicy(func(t *policy.Topic) {
		t.DeadLetter.Retention.MaxAge = 10 * day
		t.PruningPolicy = policy.PruneArchive
	})
	// No archive producer: the record must stay rather than vanish uncopied.
	p := b.pruner(t, pol, maintenance.PrunerConfig{})
	if _, err := p.RunOnce(ctx); err == nil {
		t.Fatal("want an error")
	}
	// A broker that refuses the produce (topic missing, no auto-creation).
	brokers := kafkatest.New(t)
	cl := kafkatest.Client(t, brokers, kgo.RecordDeliveryTimeout(time.Second))
	p = b.pruner(t, pol, maintenance.PrunerConfig{Archive: cl, ArchiveTopic: func(*dlq.Record) string { return "missing.archive" }})
	if _, err := p.RunOnce(ctx); err == nil {
		t.Fatal("want an error")
	}
	if n := b.count(t, "TRUE"); n != 1 {
		t.Fatalf("%d records left, want 1", n)
	}
	if got := value(t, b.metrics.PrunerRuns.WithLabelValues("error")); got != 2 {
		t.Errorf("error runs = %v", got)
	}
}

func TestPrunerOneReplicaAtATime(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	b.insert(t, deadLetter("orders", b.clock.now().Add(-400*day)))
	p := b.pruner(t, maintenance.DefaultPolicy, maintenance.PrunerConfig{})
	// Another replica holds the lock.
	lock, ok, err := b.store.TryAdvisoryLock(ctx, 0x7265647269766501)
	if err != nil || !ok {
		t.Fatalf("lock: %v %v", ok, err)
	}
	res, err := p.RunOnce(ctx)
	mustNoErr(t, err)
	if res.Leader || res.Total() != 0 || b.count(t, "TRUE") != 1 {
		t.Fatalf("pruned while another replica held the lock: %+v", res)
	}
	lock.Release()
	res, err = p.RunOnce(ctx)
	mustNoErr(t, err)
	if !res.Leader || res.Total() != 1 {
		t.Fatalf("after release: %+v", res)
	}
	if got := value(t, b.metrics.PrunerRuns.WithLabelValues("not_leader")); got != 1 {
		t.Errorf("not_leader runs = %v", got)
	}
}

func TestPrunerRunSchedulesNextPrune(t *testing.T) {
	b := setup(t)
	p := b.pruner(t, maintenance.DefaultPolicy, maintenance.PrunerConfig{Interval: time.Hour})
	if p.NextPruneAt() != nil {
		t.Fatal("next prune before Run")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if at := p.NextPruneAt(); at != nil && at.Equal(t0.Add(time.Hour)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("next prune at %v, want %v", p.NextPruneAt(), t0.Add(time.Hour))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}

func headers(r *kgo.Record) map[string]string {
	m := map[string]string{}
	for _, h := range r.Headers {
		m[h.Key] = string(h.Value)
	}
	return m
}
