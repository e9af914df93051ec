package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/policy"
)

// A replay rule never replays the dead letters of a Kafka internal topic
// ("__…"): they have no topic to go back to, whatever the rule's filter.
func TestReplayRuleLeavesInternalTopicsAlone(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	now := b.clock.Now()
	dead := rec{state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, at: now.Add(-2 * time.Hour)}
	orders, internal := dead, dead
	orders.queue, internal.queue = "orders", "__consumer_offsets"
	ids := b.insert(t, orders, internal)
	everything := topicPolicy(func(t *policy.Topic) {
		t.ReplayRules = []policy.ReplayRule{{Name: "all", Filter: map[string]any{}, Delay: time.Hour, MaxReplays: 5, Enabled: true}}
	})
	r := b.replayer(t, everything, maintenance.ReplayerConfig{})
	res, err := r.RunOnce(ctx)
	mustNoErr(t, err)
	if len(res.Replayed) != 1 || res.Replayed[0].ID != ids[0] {
		t.Fatalf("replayed %+v; want the orders record only", res.Replayed)
	}
	got, err := b.store.Get(ctx, ids[1])
	mustNoErr(t, err)
	if got.State != dlq.StateDiscarded {
		t.Fatalf("the __consumer_offsets record was replayed: %s", got.State)
	}
}
