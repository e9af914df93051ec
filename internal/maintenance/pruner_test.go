package maintenance_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/redeliver"
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
	cfg.Deps = b.deps(pol)
	p, err := maintenance.NewPruner(cfg)
	mustNoErr(t, err)
	return p
}

func TestPruneByAgeThenCount(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	now := b.clock.Now()
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
	b.clock.Advance(4 * day) // the -7d dead letter becomes -11d; the rest expire too
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

// archiver returns an Archiver on the bundle's store and clock.
func (b *bundle) archiver(t *testing.T, brokers []string, topic string) *redeliver.Archiver {
	t.Helper()
	a, err := redeliver.NewArchiver(redeliver.ArchiverConfig{Brokers: brokers, ClientOpts: kafkatest.ClientOpts(brokers),
		Topic: func(string) string { return topic }, Clock: b.clock}, b.store)
	mustNoErr(t, err)
	t.Cleanup(func() { _ = a.Stop() })
	return a
}

func TestPruneArchive(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	brokers := kafkatest.New(t, "dead_letter_queue.archive")
	now := b.clock.Now()
	ids := b.insert(t, deadLetter("orders", now.Add(-20*day)), deadLetter("orders", now.Add(-15*day)), deadLetter("orders", now.Add(-1*day)),
		rec{queue: "orders", state: dlq.StateCompleted, at: now.Add(-10 * day)})
	pol := topicPolicy(func(t *policy.Topic) {
		t.DeadLetter.Retention.MaxAge = 10 * day
		t.Retention.Completed = 2 * day
		t.PruningPolicy = policy.PruneArchive
	})
	woken := 0
	p := b.pruner(t, pol, maintenance.PrunerConfig{Archiving: true, BatchSize: 1, WakeArchiver: func() { woken++ }})

	// Nothing is copied yet: nothing is pruned, and the completed record,
	// which no discard made due, gets its copy asked for.
	res, err := p.RunOnce(ctx)
	mustNoErr(t, err)
	if res.Total() != 0 || woken != 1 || b.count(t, "TRUE") != 4 {
		t.Fatalf("before the archiver ran: pruned %+v, woken %d, %d left; want nothing pruned, archiver woken once, 4 left",
			res.Pruned, woken, b.count(t, "TRUE"))
	}
	if n := b.count(t, "archive_state = 'pending'"); n != 4 {
		t.Fatalf("%d copies pending, want 4 (3 dead letters, 1 completed)", n)
	}

	// The one archiver copies them; then they go.
	if n, err := b.archiver(t, brokers, "dead_letter_queue.archive").RunOnce(ctx); err != nil || n != 4 {
		t.Fatalf("archived %d, %v; want 4", n, err)
	}
	res, err = p.RunOnce(ctx)
	mustNoErr(t, err)
	if res.Total() != 3 {
		t.Fatalf("pruned %+v, want the 2 old dead letters and the completed record", res.Pruned)
	}
	if n := b.count(t, "TRUE"); n != 1 {
		t.Fatalf("%d records left, want 1", n)
	}
	got := kafkatest.Consume(t, brokers, "dead_letter_queue.archive", 4, 10*time.Second)
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
	if len(seen) != 4 || !seen[ids[0]] || !seen[ids[1]] || !seen[ids[3]] {
		t.Errorf("archived %v, want each of %v once", seen, ids)
	}
	evs := b.nextEvents(t, 2)
	if d := evs[0].Data.(events.PrunedData); d.Count != 2 || d.PruningPolicy != "archive" {
		t.Errorf("event %+v", evs[0])
	}
}

func TestPrunerKeepsADiscardedRecordUntilItsArchiveCopyExists(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	now := b.clock.Now()
	id := b.insert(t, rec{queue: "orders", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDiscard, at: now.Add(-40 * day)})[0]
	pol := topicPolicy(func(t *policy.Topic) { t.Retention.Discarded = day }) // pruning_policy delete
	p := b.pruner(t, pol, maintenance.PrunerConfig{Archiving: true})

	// The archive topic is missing (no auto-creation): the copy fails, is
	// kept as failed with its reason, and the record is not pruned.
	brokers := kafkatest.New(t)
	a := b.archiver(t, brokers, "orders.archive")
	if n, err := a.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("archived %d, %v; want 0 (topic missing)", n, err)
	}
	r, err := b.store.Get(ctx, id)
	mustNoErr(t, err)
	if r.Archive == nil || r.Archive.State != dlq.ArchiveFailed || r.Archive.Reason != dlq.ReasonUnknownTopic ||
		r.Archive.Failure == nil || r.Archive.Failure.Failures != 1 || !r.Archive.Failure.NextAttemptAt.Equal(now.Add(5*time.Second)) {
		t.Fatalf("archive after a failed copy: %+v", r.Archive)
	}
	for range 2 {
		res, err := p.RunOnce(ctx)
		mustNoErr(t, err)
		if res.Total() != 0 || b.count(t, "TRUE") != 1 {
			t.Fatalf("pruned %+v a record whose archive copy does not exist", res.Pruned)
		}
	}
	// Its own backoff: not tried again before it passes.
	if n, err := a.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("archived %d, %v before the backoff passed", n, err)
	}

	// Once the topic exists and the backoff passed, the copy is made and the
	// record pruned.
	adm := kadm.NewClient(kafkatest.Client(t, brokers))
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "orders.archive")
	mustNoErr(t, err)
	b.clock.Advance(5 * time.Second)
	if n, err := a.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("archived %d, %v after the topic was created; want 1", n, err)
	}
	r, err = b.store.Get(ctx, id)
	mustNoErr(t, err)
	if r.Archive.State != dlq.ArchiveDone || r.Archive.Failure != nil || r.ArchivedAt == nil {
		t.Fatalf("archive after the copy: %+v archived_at %v", r.Archive, r.ArchivedAt)
	}
	res, err := p.RunOnce(ctx)
	mustNoErr(t, err)
	if res.Total() != 1 || b.count(t, "TRUE") != 0 {
		t.Fatalf("pruned %+v after the copy was made, want 1", res.Pruned)
	}
}

func TestPruneArchivePolicyWithArchivingOffKeepsRecords(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	now := b.clock.Now()
	b.insert(t, deadLetter("orders", now.Add(-20*day)))
	pol := topicPolicy(func(t *policy.Topic) {
		t.DeadLetter.Retention.MaxAge = 10 * day
		t.PruningPolicy = policy.PruneArchive
	})
	// Archiving off: the record must stay rather than vanish uncopied.
	p := b.pruner(t, pol, maintenance.PrunerConfig{})
	if _, err := p.RunOnce(ctx); err == nil {
		t.Fatal("want an error")
	}
	if n := b.count(t, "TRUE"); n != 1 {
		t.Fatalf("%d records left, want 1", n)
	}
	if got := value(t, b.metrics.PrunerRuns.WithLabelValues("error")); got != 1 {
		t.Errorf("error runs = %v", got)
	}
	// Under pruning_policy delete with archiving off, a copy that is due
	// keeps nothing: there is no archive to wait for.
	p = b.pruner(t, topicPolicy(func(t *policy.Topic) { t.DeadLetter.Retention.MaxAge = 10 * day }), maintenance.PrunerConfig{})
	if res, err := p.RunOnce(ctx); err != nil || res.Total() != 1 {
		t.Fatalf("pruned %+v, %v; want 1", res, err)
	}
}

func TestPrunerOneReplicaAtATime(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	b.insert(t, deadLetter("orders", b.clock.Now().Add(-400*day)))
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
		t.Fatal("next prune before Start")
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { mustNoErr(t, p.Stop()) }()
	// The first pass runs at once; then the pruner waits an hour on the clock.
	mustNoErr(t, b.clock.BlockUntil(context.Background(), 1))
	if at := p.NextPruneAt(); at == nil || !at.Equal(t0.Add(time.Hour)) {
		t.Fatalf("next prune at %v, want %v", at, t0.Add(time.Hour))
	}
	b.clock.Advance(time.Hour)
	// The second pass ran, and the pruner waits again: the next is due an hour later.
	eventually.True(t, "the second pass", func() bool {
		at := p.NextPruneAt()
		return at != nil && at.Equal(t0.Add(2*time.Hour)) && b.clock.Timers() == 1
	})
}

func headers(r *kgo.Record) map[string]string {
	m := map[string]string{}
	for _, h := range r.Headers {
		m[h.Key] = string(h.Value)
	}
	return m
}
