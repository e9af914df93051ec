package maintenance_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/store"
)

// Cancelled records (an operator discarded them by hand) are pruned per
// retention.cancelled (default P7D), apart from discards (P30D) and dead
// letters, which keep their own retention.
func TestPruneCancelledPerRetentionCancelled(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	now := b.clock.Now()
	old := b.insert(t, rec{queue: "orders", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionCancelled, at: now.Add(-8 * day)})
	kept := b.insert(t,
		rec{queue: "orders", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionCancelled, at: now.Add(-6 * day)},
		rec{queue: "orders", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDiscard, at: now.Add(-8 * day)},
		deadLetter("orders", now.Add(-8*day)))
	p := b.pruner(t, maintenance.DefaultPolicy, maintenance.PrunerConfig{})
	res, err := p.RunOnce(ctx)
	mustNoErr(t, err)
	want := []maintenance.PruneCount{{Queue: "orders", Reason: maintenance.ReasonRetentionCancelled, State: dlq.StateDiscarded, Count: 1}}
	if !slices.Equal(res.Pruned, want) {
		t.Fatalf("pruned %+v, want %+v", res.Pruned, want)
	}
	if _, err := b.store.Get(ctx, old[0]); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the cancelled record past P7D is still there: %v", err)
	}
	for _, id := range kept {
		if _, err := b.store.Get(ctx, id); err != nil {
			t.Errorf("record %s should be kept: %v", id, err)
		}
	}
	ev := b.nextEvents(t, 1)[0]
	if d := ev.Data.(events.PrunedData); d.Reason != "retention.cancelled" || d.Exhaustion != "cancelled" || d.Count != 1 {
		t.Errorf("event %+v", ev)
	}
	if got := value(t, b.metrics.RecordsPruned.WithLabelValues("orders", "discarded", "retention.cancelled")); got != 1 {
		t.Errorf("cancelled pruned = %v, want 1", got)
	}
}
