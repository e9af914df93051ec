package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/records"
)

// A replay rule never replays the dead letters of a Kafka internal topic
// ("__…") or of Redrive's own topics (records.Service, Reserved): they have no topic to go
// back to, whatever the rule's filter.
func TestReplayRuleLeavesInternalTopicsAlone(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	now := b.clock.Now()
	dead := rec{state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, at: now.Add(-2 * time.Hour)}
	orders, internal, own := dead, dead, dead
	orders.queue, internal.queue, own.queue = "orders", "__consumer_offsets", "dead_letter_queue"
	ids := b.insert(t, orders, internal, own)
	everything := topicPolicy(func(t *policy.Topic) {
		t.ReplayRules = []policy.ReplayRule{{Name: "all", Filter: filter.Filter{}, Delay: time.Hour, MaxReplays: 5, Enabled: true}}
	})
	rec, err := records.New(records.Config{Store: b.store, Reserved: dlq.NewReservedTopics("dead_letter_queue")})
	mustNoErr(t, err)
	r := b.replayer(t, everything, maintenance.ReplayerConfig{Records: rec})
	res, err := r.RunOnce(ctx)
	mustNoErr(t, err)
	if len(res.Replayed) != 1 || res.Replayed[0].ID != ids[0] {
		t.Fatalf("replayed %+v; want the orders record only", res.Replayed)
	}
	for _, id := range ids[1:] {
		got, err := b.store.Get(ctx, id)
		mustNoErr(t, err)
		if got.State != dlq.StateDiscarded {
			t.Fatalf("the %s record was replayed: %s", got.Queue, got.State)
		}
	}
}
