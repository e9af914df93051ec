package maintenance_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/store"
)

func (b *bundle) replayer(t *testing.T, pol maintenance.PolicyFunc, cfg maintenance.ReplayerConfig) *maintenance.Replayer {
	t.Helper()
	cfg.Deps = b.deps(pol)
	r, err := maintenance.NewReplayer(cfg)
	mustNoErr(t, err)
	return r
}

// rediscard makes a replayed record fail for good again, as the scheduler and
// ingest would after its redelivery failed.
func (b *bundle) rediscard(t *testing.T, id string) {
	t.Helper()
	now := b.clock.Now()
	_, err := b.pool.Exec(context.Background(), `UPDATE redrive_lifecycle SET state = 'discarded', exhaustion = 'dead_letter',
		discarded_at = $2, next_retry_at = NULL, attempt = 3, updated_at = $2 WHERE id = $1`, id, now)
	mustNoErr(t, err)
}

func connectionRule(enabled bool) maintenance.PolicyFunc {
	return topicPolicy(func(t *policy.Topic) {
		t.ReplayRules = []policy.ReplayRule{{
			Name: "retry-connection-errors", Filter: filter.Filter{ErrorType: "ConnectionError"},
			Delay: time.Hour, MaxReplays: 2, Enabled: enabled,
		}}
	})
}

func TestReplayRuleAfterDelayUpToMaxReplays(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	now := b.clock.Now()
	id := b.insert(t, rec{queue: "orders", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, at: now, errorType: "ConnectionError", typ: "order.created"})[0]
	other := b.insert(t,
		rec{queue: "orders", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, at: now.Add(-day), errorType: "ValidationError"},
		rec{queue: "orders", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDiscard, at: now.Add(-day), errorType: "ConnectionError"},
	)
	woken := atomic.Int32{}
	r := b.replayer(t, connectionRule(true), maintenance.ReplayerConfig{Wake: func() { woken.Add(1) }})

	// Before the delay: nothing.
	b.clock.Advance(59 * time.Minute)
	res, err := r.RunOnce(ctx)
	mustNoErr(t, err)
	if !res.Leader || len(res.Replayed) != 0 {
		t.Fatalf("replayed before the delay: %+v", res)
	}
	// After it: the matching dead letter only (not the other error type, not the discard).
	b.clock.Advance(time.Minute)
	res, err = r.RunOnce(ctx)
	mustNoErr(t, err)
	if len(res.Replayed) != 1 || res.Replayed[0].ID != id || res.Replayed[0].Rule != "retry-connection-errors" || res.Replayed[0].ReplayCount != 1 {
		t.Fatalf("replayed %+v", res.Replayed)
	}
	if woken.Load() != 1 {
		t.Errorf("scheduler woken %d times, want 1", woken.Load())
	}
	got, err := b.store.Get(ctx, id)
	mustNoErr(t, err)
	replayedAt := b.clock.Now()
	if got.State != dlq.StateAvailable || got.Attempt != 0 || got.Exhaustion != "" || got.DiscardedAt != nil ||
		got.NextRetryAt == nil || !got.NextRetryAt.Equal(replayedAt) || got.EnqueuedAt == nil || !got.EnqueuedAt.Equal(replayedAt) ||
		len(got.Errors) != 2 {
		t.Fatalf("replayed record = %+v", got)
	}
	var meta map[string]any
	mustNoErr(t, json.Unmarshal(got.Meta, &meta))
	if meta["ojs.replay_count"] != 1.0 || meta["ojs.replay_rule"] != "retry-connection-errors" ||
		meta["ojs.last_replayed_at"] != replayedAt.Format(time.RFC3339Nano) {
		t.Errorf("meta = %v", meta)
	}
	for _, o := range other {
		if r, _ := b.store.Get(ctx, o); r.State != dlq.StateDiscarded {
			t.Errorf("record %s replayed: %s", o, r.State)
		}
	}
	ev := b.nextEvents(t, 1)[0]
	d := ev.Data.(events.RecordData)
	if ev.Type != events.DeadLetterReplayed || ev.Subject != id || ev.Queue != "orders" || d.Rule != "retry-connection-errors" ||
		d.ReplayCount != 1 || d.Type != "order.created" || d.ErrorType != "ConnectionError" {
		t.Errorf("event %+v", ev)
	}
	if v := value(t, b.metrics.ReplayedTotal.WithLabelValues("orders", "retry-connection-errors")); v != 1 {
		t.Errorf("replayed_total = %v", v)
	}

	// It fails for good again: replayed once more after the delay, then parked.
	b.rediscard(t, id)
	b.clock.Advance(30 * time.Minute)
	if res, _ := r.RunOnce(ctx); len(res.Replayed) != 0 {
		t.Fatalf("replayed again before the delay: %+v", res.Replayed)
	}
	b.clock.Advance(30 * time.Minute)
	if res, _ := r.RunOnce(ctx); len(res.Replayed) != 1 || res.Replayed[0].ReplayCount != 2 {
		t.Fatalf("second replay: %+v", res.Replayed)
	}
	b.rediscard(t, id)
	b.clock.Advance(10 * day)
	if res, _ := r.RunOnce(ctx); len(res.Replayed) != 0 {
		t.Fatalf("replayed beyond max_replays: %+v", res.Replayed)
	}
	got, _ = b.store.Get(ctx, id)
	if got.State != dlq.StateDiscarded || got.Exhaustion != dlq.ExhaustionDeadLetter {
		t.Fatalf("record not parked: %+v", got)
	}
	b.nextEvents(t, 1)
	b.noMoreEvents(t)
}

func TestReplayRuleDisabledOrDraining(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	b.insert(t, rec{queue: "orders", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, at: b.clock.Now().Add(-day), errorType: "ConnectionError"})
	if res, _ := b.replayer(t, connectionRule(false), maintenance.ReplayerConfig{}).RunOnce(ctx); len(res.Replayed) != 0 {
		t.Fatalf("disabled rule replayed %+v", res.Replayed)
	}
	draining := func(q string) policy.Topic {
		tp := connectionRule(true)(q)
		tp.State = policy.TopicDraining
		return tp
	}
	r := b.replayer(t, draining, maintenance.ReplayerConfig{})
	mustNoErr(t, b.store.CreateReplayRule(ctx, &store.ReplayRule{Name: "api-all", Filter: []byte(`{}`), MaxReplays: 1, Enabled: true,
		TimeZone: "UTC", CreatedAt: t0}))
	if res, _ := r.RunOnce(ctx); len(res.Replayed) != 0 {
		t.Fatalf("draining topic replayed %+v", res.Replayed)
	}
}

func TestReplayRuleWindowAndRateLimit(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	b.clock.Set(time.Date(2026, 3, 1, 1, 0, 0, 0, time.UTC))
	var batch []rec
	for range 50 {
		batch = append(batch, rec{queue: "billing", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, at: b.clock.Now().Add(-day), errorType: "TimeoutError"})
	}
	b.insert(t, batch...)
	// An API rule: only 02:00–04:00 in Berlin (01:00–03:00 UTC in March), 1 replay/s.
	mustNoErr(t, b.store.CreateReplayRule(ctx, &store.ReplayRule{
		Name: "night", Filter: []byte(`{"queue":"billing","error_type":"TimeoutError"}`), Delay: time.Hour, MaxReplays: 1,
		Enabled: true, RateLimit: 1, WindowStart: "02:00", WindowEnd: "04:00", TimeZone: "Europe/Berlin", CreatedAt: t0,
	}))
	r := b.replayer(t, maintenance.DefaultPolicy, maintenance.ReplayerConfig{Interval: 10 * time.Second})
	b.clock.Set(time.Date(2026, 3, 1, 0, 59, 0, 0, time.UTC)) // 01:59 in Berlin
	if res, _ := r.RunOnce(ctx); len(res.Replayed) != 0 {
		t.Fatalf("replayed outside the window: %d", len(res.Replayed))
	}
	b.clock.Set(time.Date(2026, 3, 1, 1, 0, 0, 0, time.UTC)) // 02:00 in Berlin
	res, err := r.RunOnce(ctx)
	mustNoErr(t, err)
	if len(res.Replayed) != 10 { // 1/s × the 10 s interval
		t.Fatalf("first pass replayed %d, want 10", len(res.Replayed))
	}
	b.clock.Advance(3 * time.Second)
	if res, _ := r.RunOnce(ctx); len(res.Replayed) != 3 {
		t.Fatalf("3 s later replayed %d, want 3", len(res.Replayed))
	}
	b.clock.Set(time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC)) // 04:00 in Berlin: closed
	if res, _ := r.RunOnce(ctx); len(res.Replayed) != 0 {
		t.Fatalf("replayed after the window: %d", len(res.Replayed))
	}
	if n := b.count(t, "state = 'available'"); n != 13 {
		t.Fatalf("%d available, want 13", n)
	}
}

func TestReplayTwoReplicasNeverReplayTwice(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	const n = 300
	var batch []rec
	for range n {
		batch = append(batch, rec{queue: "orders", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, at: b.clock.Now().Add(-day), errorType: "ConnectionError"})
	}
	b.insert(t, batch...)
	b.clock.Advance(time.Hour)

	// Without the replicas' lock: concurrent statements, small batches.
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				done, err := b.store.Replay(ctx, filter.Scope{}, &store.ReplayParams{Rule: "r", DiscardedBefore: b.clock.Now(), MaxReplays: 1, Limit: 7, Now: b.clock.Now()})
				if err != nil {
					t.Error(err)
					return
				}
				if len(done) == 0 {
					return
				}
				mu.Lock()
				for _, d := range done {
					seen[d.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("replayed %d distinct records, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("record %s replayed %d times", id, c)
		}
	}
	if c := b.count(t, "(meta->>'ojs.replay_count')::int = 1 AND state = 'available'"); c != n {
		t.Fatalf("%d records with replay_count 1, want %d", c, n)
	}

	// Two Replayers (two replicas) on the same rule, passes at the same time.
	_, err := b.pool.Exec(ctx, `UPDATE redrive_lifecycle SET state = 'discarded', exhaustion = 'dead_letter', discarded_at = $1, next_retry_at = NULL`, b.clock.Now().Add(-day))
	mustNoErr(t, err)
	pol := connectionRule(true)
	replicas := []*maintenance.Replayer{
		b.replayer(t, pol, maintenance.ReplayerConfig{BatchSize: 1000}),
		b.replayer(t, pol, maintenance.ReplayerConfig{BatchSize: 1000}),
	}
	total := atomic.Int64{}
	for range 3 {
		for _, r := range replicas {
			wg.Go(func() {
				res, err := r.RunOnce(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				total.Add(int64(len(res.Replayed)))
			})
		}
	}
	wg.Wait()
	if total.Load() != n {
		t.Fatalf("replicas replayed %d records, want %d", total.Load(), n)
	}
	if c := b.count(t, "(meta->'redrive.replays'->>'retry-connection-errors')::int = 1"); c != n {
		t.Fatalf("%d records replayed once by the rule, want %d", c, n)
	}
}

// A rule's filter is read by the filter package (see its tests); a rule's
// window by policy.ParseWindow.
func TestParseWindow(t *testing.T) {
	t.Parallel()
	w, err := policy.ParseWindow("22:00", "02:00", "")
	mustNoErr(t, err)
	for h, want := range map[int]bool{21: false, 22: true, 23: true, 0: true, 1: true, 2: false, 12: false} {
		if got := w.Contains(time.Date(2026, 1, 1, h, 30, 0, 0, time.UTC)); got != want {
			t.Errorf("%02d:30 in 22:00–02:00 = %v", h, got)
		}
	}
	for _, bad := range [][3]string{{"25:00", "01:00", ""}, {"01:00", "", ""}, {"01:00", "01:00", ""}, {"01:00", "02:00", "Mars/Base"}} {
		if _, err := policy.ParseWindow(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("window %v accepted", bad)
		}
	}
}
