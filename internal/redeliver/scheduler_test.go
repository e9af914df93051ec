package redeliver_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/redeliver"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild() // a child process of TestCrashBetweenProduceAndSettleRedeliversAgain
		return
	}
	pgtest.Main(m)
}

const dlqTopic = "dead_letter_queue"

type bundle struct {
	brokers []string
	url     string
	pool    *pgxpool.Pool
	store   *store.Store
	clock   *clock.Fake // the test moves it by hand; its timers also fire in wall time
}

func setup(t *testing.T, topics ...string) *bundle {
	t.Helper()
	t.Parallel()
	url := pgtest.URL(t)
	pool := pgtest.Pool(t, url)
	return &bundle{
		brokers: kafkatest.New(t, append([]string{dlqTopic, dlqTopic + ".archive"}, topics...)...),
		url:     url, pool: pool, store: store.New(pool), clock: clock.NewPinned(testdate.Now().UTC().Truncate(time.Millisecond)),
	}
}

// policies loads a policy file written for the test.
func policies(t *testing.T, yaml string) *policy.Set {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "test.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := policy.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func (b *bundle) scheduler(t *testing.T, set *policy.Set, mod ...func(*redeliver.Config)) *redeliver.Scheduler {
	t.Helper()
	cfg := redeliver.Config{Brokers: b.brokers, ClientOpts: kafkatest.ClientOpts(b.brokers), Policies: set,
		Clock: b.clock, BatchSize: 50}
	for _, f := range mod {
		f(&cfg)
	}
	s, err := redeliver.New(cfg, b.store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func (b *bundle) archiver(t *testing.T, mod ...func(*redeliver.ArchiverConfig)) *redeliver.Archiver {
	t.Helper()
	cfg := redeliver.ArchiverConfig{Brokers: b.brokers, ClientOpts: kafkatest.ClientOpts(b.brokers), Clock: b.clock}
	for _, f := range mod {
		f(&cfg)
	}
	a, err := redeliver.NewArchiver(cfg, b.store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop() })
	return a
}

// due stores n records of queue that are due for redelivery now.
func (b *bundle) due(t *testing.T, queue string, n int) []dlq.Record {
	t.Helper()
	return b.dueEach(t, queue, n, nil)
}

// dueEach is due with each record changed by change before it is stored.
func (b *bundle) dueEach(t *testing.T, queue string, n int, change func(i int, r *dlq.Record)) []dlq.Record {
	t.Helper()
	now := b.clock.Now()
	past := now.Add(-time.Second)
	recs := make([]dlq.Record, n)
	for i := range recs {
		recs[i] = dlq.Record{
			ID: dlq.NewID(testdate.Now()), Queue: queue, State: dlq.StateRetryable, Attempt: 1, MaxAttempts: 5,
			Source: dlq.Source{Topic: queue, Partition: 0, Offset: int64(i)},
			DLQ:    dlq.Coord{Topic: dlqTopic, Partition: 0, Offset: int64(i) + testdate.Now().UnixNano()%1e12},
			Format: dlq.FormatRedrive, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf(`{"n":%d}`, i)),
			Errors:    []dlq.ErrorEntry{{Attempt: 1, Type: "db.down", Code: dlq.CodeRetry, OccurredAt: past}},
			CreatedAt: past, UpdatedAt: past, NextRetryAt: &past,
		}
		if change != nil {
			change(i, &recs[i])
		}
	}
	if _, err := b.store.InsertRecords(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	return recs
}

func (b *bundle) countState(t *testing.T, queue string, state dlq.State) int64 {
	t.Helper()
	n, err := b.store.Count(context.Background(), &filter.Filter{Queue: queue, State: state})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func TestTwoSchedulersUnderContentionNeverRedeliverTheSameRecordTwice(t *testing.T) {
	b := setup(t, "orders")
	const n = 1000
	b.due(t, "orders", n)
	small := func(c *redeliver.Config) { c.BatchSize = 10 }
	s1, s2 := b.scheduler(t, nil, small), b.scheduler(t, nil, small)
	// Each scheduler's first batch waits, produced, until the other one
	// has produced a batch too: both claim while the other holds a claim,
	// however fast one of them starts (on a busy machine one used to claim
	// every record before the other's first claim).
	var both sync.WaitGroup
	both.Add(2)
	for _, s := range []*redeliver.Scheduler{s1, s2} {
		var first sync.Once
		redeliver.SetAfterProduce(s, func() { first.Do(func() { both.Done(); both.Wait() }) })
	}

	var wg sync.WaitGroup
	start := make(chan struct{})
	counts := make([]int, 2)
	for i, s := range []*redeliver.Scheduler{s1, s2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			n, err := s.RunOnce(context.Background())
			if err != nil {
				t.Error(err)
			}
			counts[i] = n
		}()
	}
	close(start)
	wg.Wait()
	if counts[0]+counts[1] != n || counts[0] == 0 || counts[1] == 0 {
		t.Fatalf("schedulers claimed %v records, want %d in all with both claiming some", counts, n)
	}
	recs := kafkatest.Consume(t, b.brokers, "orders", n, 30*time.Second)
	ids := map[string]bool{}
	for _, r := range recs {
		ids[header(r, "redrive.id")] = true
	}
	if len(recs) != n || len(ids) != n {
		t.Fatalf("orders has %d records with %d distinct ids, want %d and %d", len(recs), len(ids), n, n)
	}
	if got := b.countState(t, "orders", dlq.StateCompleted); got != n {
		t.Fatalf("%d records redelivered (completed), want %d", got, n)
	}
}

func TestRateLimitHoldsAcrossConcurrentWorkers(t *testing.T) {
	b := setup(t, "slow")
	set := policies(t, "topics:\n  slow: {redelivery: {rate_limit: 20}}\n")
	b.due(t, "slow", 200)
	s := b.scheduler(t, set, func(c *redeliver.Config) { c.BatchSize = 3 })
	// Two workers of one scheduler at the same frozen instant: together they
	// may take one second's worth, not one each.
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if _, err := s.RunOnce(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if got := b.countState(t, "slow", dlq.StateCompleted); got != 20 {
		t.Fatalf("%d redelivered in the first second, want 20 (rate_limit 20/s)", got)
	}
}

func TestPausedTopicsAreSkippedAndRateLimitsHold(t *testing.T) {
	b := setup(t, "slow", "frozen", "fast")
	set := policies(t, `
topics:
  slow: {redelivery: {rate_limit: 5}}
  frozen: {state: paused}
`)
	b.due(t, "slow", 20)
	b.due(t, "frozen", 5)
	b.due(t, "fast", 30)
	s := b.scheduler(t, set)
	ctx := context.Background()

	if _, err := s.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if slow, frozen, fast := b.countState(t, "slow", dlq.StateCompleted), b.countState(t, "frozen", dlq.StateCompleted),
		b.countState(t, "fast", dlq.StateCompleted); slow != 5 || frozen != 0 || fast != 30 {
		t.Fatalf("after the first second: slow %d (want 5), frozen %d (want 0), fast %d (want 30)", slow, frozen, fast)
	}
	b.clock.Advance(time.Second)
	if _, err := s.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if slow := b.countState(t, "slow", dlq.StateCompleted); slow != 10 {
		t.Fatalf("after two seconds slow has %d redelivered, want 10 (5/s)", slow)
	}
	b.clock.Advance(time.Hour)
	if _, err := s.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if frozen := b.countState(t, "frozen", dlq.StateCompleted); frozen != 0 {
		t.Fatalf("a paused topic was redelivered: %d", frozen)
	}
}

func TestRunWakesWhenARecordBecomesDue(t *testing.T) {
	b := setup(t, "orders")
	s := b.scheduler(t, nil, func(c *redeliver.Config) { c.Clock = clock.Wall; c.PollInterval = time.Minute })
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stopping: %v", err)
		}
	}()

	// A record due shortly: the scheduler, woken as ingest wakes it, sleeps
	// until the due time rather than until its next poll a minute away.
	b.clock = clock.NewFake(testdate.Now().Add(time.Second + 300*time.Millisecond)) // due() schedules at clock - 1s
	rec := b.due(t, "orders", 1)[0]
	dueAt := *rec.NextRetryAt
	s.Wake()
	got := kafkatest.Consume(t, b.brokers, "orders", 1, 10*time.Second)
	if header(got[0], "redrive.id") != rec.ID {
		t.Fatalf("redelivered %q, want %s", header(got[0], "redrive.id"), rec.ID)
	}
	at, _ := time.Parse(time.RFC3339Nano, header(got[0], "redrive.redelivered_at"))
	if at.Before(dueAt.Truncate(time.Millisecond)) || at.Sub(dueAt) > 5*time.Second {
		t.Fatalf("redelivered at %v for a record due at %v", at, dueAt)
	}
}

func TestFailedProduceKeepsTheRecordDueOnItsOwnBackoff(t *testing.T) {
	b := setup(t) // no "orders" topic and no auto-create: produce fails
	rec := b.due(t, "orders", 1)[0]
	s := b.scheduler(t, nil, func(c *redeliver.Config) {
		c.FailureBackoff = redeliver.Backoff{Min: time.Minute, Max: 3 * time.Minute}
	})
	ctx := context.Background()
	for i, wait := range []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute, 3 * time.Minute} {
		if _, err := s.RunOnce(ctx); err != nil {
			t.Fatalf("a failed produce is not a scheduler error: %v", err)
		}
		r, err := b.store.Get(ctx, rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		now := b.clock.Now()
		f := r.RedeliveryFailure
		if r.State != dlq.StateRetryable || r.Attempt != 1 || r.NextRetryAt == nil || !r.NextRetryAt.Equal(now.Add(wait)) ||
			f == nil || f.Reason != dlq.ReasonUnknownTopic || f.Failures != i+1 || !f.NextAttemptAt.Equal(now.Add(wait)) || f.Message == "" {
			t.Fatalf("after failure %d: state %s attempt %d next %v failure %+v; want retryable, attempt 1 (no policy attempt used), due in %s, unknown_topic",
				i+1, r.State, r.Attempt, r.NextRetryAt, f, wait)
		}
		b.clock.Advance(wait)
	}
	if n, _ := b.pool.Exec(ctx, "SELECT 1 FROM redrive_claim"); n.RowsAffected() != 0 {
		t.Fatalf("%d claims left open", n.RowsAffected())
	}
}

// TestAnInFlightRedeliveryIsShownAsItWasUntilItsProduceSucceeds: while a
// produce is pending, a reader sees the record in flight with its state,
// attempt and redelivered_at from before the claim, and its last
// redelivery failure; only a produce that succeeds completes it and clears
// the failure.
func TestAnInFlightRedeliveryIsShownAsItWasUntilItsProduceSucceeds(t *testing.T) {
	b := setup(t) // no "orders" topic and no auto-create: the produce waits, then fails
	rec := b.due(t, "orders", 1)[0]
	s := b.scheduler(t, nil, func(c *redeliver.Config) {
		c.FailureBackoff = redeliver.Backoff{Min: time.Minute, Max: time.Minute}
		c.ProduceTimeout, c.Lease = 1500*time.Millisecond, time.Minute
	})
	ctx := context.Background()
	get := func() *dlq.Record {
		t.Helper()
		r, err := b.store.Get(ctx, rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	listed := func() *dlq.Record {
		t.Helper()
		page, err := b.store.List(ctx, &store.ListParams{Filter: filter.Filter{Queue: "orders"}, Limit: 10})
		if err != nil || len(page.Records) != 1 {
			t.Fatalf("list: %v, %d records", err, len(page.Records))
		}
		return &page.Records[0]
	}
	// runWatching runs one pass and checks the record, read and listed,
	// while its produce is pending.
	runWatching := func(wantFailures int) {
		t.Helper()
		done := make(chan error, 1)
		go func() { _, err := s.RunOnce(ctx); done <- err }()
		seen := 0
		for {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				if seen == 0 {
					t.Fatal("the record was never seen in flight while its produce was pending")
				}
				return
			case <-time.After(20 * time.Millisecond):
			}
			for _, r := range []*dlq.Record{get(), listed()} {
				if !r.InFlight {
					continue
				}
				seen++
				failures := 0
				if r.RedeliveryFailure != nil {
					failures = r.RedeliveryFailure.Failures
				}
				if r.State != dlq.StateRetryable || r.Attempt != 1 || r.RedeliveredAt != nil || r.CompletedAt != nil || failures != wantFailures {
					t.Fatalf("in flight: state %s attempt %d redelivered_at %v completed_at %v failures %d; want retryable, 1, none, none, %d",
						r.State, r.Attempt, r.RedeliveredAt, r.CompletedAt, failures, wantFailures)
				}
			}
		}
	}
	runWatching(0)
	if r := get(); r.InFlight || r.RedeliveryFailure == nil || r.RedeliveredAt != nil || r.State != dlq.StateRetryable {
		t.Fatalf("after a failed produce: in flight %v, failure %+v, redelivered_at %v, state %s", r.InFlight, r.RedeliveryFailure, r.RedeliveredAt, r.State)
	}
	b.clock.Advance(time.Minute)
	runWatching(1) // the second try keeps the first failure in sight while it is pending

	// The topic exists now: the next produce succeeds, completes the record
	// and clears its failure.
	kafkatest.CreateTopics(t, b.brokers, "orders")
	b.clock.Advance(time.Minute)
	if _, err := s.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	r := get()
	if r.InFlight || r.State != dlq.StateCompleted || r.Attempt != 2 || r.RedeliveredAt == nil || r.RedeliveryFailure != nil {
		t.Fatalf("after a produce that succeeded: in flight %v, state %s, attempt %d, redelivered_at %v, failure %+v; want completed, 2, set, none",
			r.InFlight, r.State, r.Attempt, r.RedeliveredAt, r.RedeliveryFailure)
	}
}
