package redeliver_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/logtest"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/redeliver"
	"github.com/redrive/redrive/internal/store"
)

// A topic that does not exist is parked as a whole, found by a look-up
// before its first batch: one record is claimed as a probe, which fails and
// shows why; the queue's other due records are not claimed (they keep their
// due time, no failure written), a healthy queue's records all go out, and
// one record is probed when the park ends, for twice as long after each
// failed probe. Once the topic exists, a probe is produced, the topic is unparked
// and its backlog goes out.
func TestAMissingTopicIsParkedAndProbed(t *testing.T) {
	b := setup(t, "orders")
	ctx := context.Background()
	healthy := b.due(t, "orders", 300)
	b.due(t, "ghost", 400)
	logs := &logtest.Buffer{}
	m := metrics.New()
	park := redeliver.Backoff{Min: time.Minute, Max: 4 * time.Minute}
	s := b.scheduler(t, nil, func(c *redeliver.Config) {
		c.Logger, c.Metrics, c.ParkBackoff, c.BatchSize, c.Workers = logs.TextLogger(slog.LevelInfo), m, park, 50, 1
		c.FailureBackoff = redeliver.Backoff{Min: time.Hour, Max: time.Hour} // a failed record is not due again here
	})
	failedGhosts := func() int {
		t.Helper()
		page, err := b.store.List(ctx, &store.ListParams{Filter: filter.Filter{Queue: "ghost"}, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range page.Records {
			if r.RedeliveryFailure != nil {
				n++
			}
		}
		return n
	}
	parked := func() float64 {
		var out dto.Metric
		if err := m.Redelivery.ParkedTopics.Write(&out); err != nil {
			t.Fatal(err)
		}
		return out.GetGauge().GetValue()
	}

	if _, err := s.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.countState(t, "orders", dlq.StateCompleted); n != int64(len(healthy)) {
		t.Fatalf("%d of %d healthy records redelivered beside the missing topic", n, len(healthy))
	}
	// The topic was looked up before its first batch and found missing:
	// one record was claimed as a probe and failed; the rest never was.
	if n := failedGhosts(); n != 1 {
		t.Fatalf("%d records of the missing topic failed, want the one probe", n)
	}
	first := failedGhosts()
	if parked() != 1 || len(logs.Lines("topic parked")) != 1 {
		t.Fatalf("parked topics %v, log %q; want ghost parked once", parked(), logs.Lines("topic parked"))
	}
	// Before the park ends, nothing; at its end one probe, which fails and
	// parks the topic for twice as long.
	b.clock.Advance(59 * time.Second)
	if _, err := s.RunOnce(ctx); err != nil || failedGhosts() != first {
		t.Fatalf("before the probe: %d failed (%v), want %d", failedGhosts(), err, first)
	}
	b.clock.Advance(time.Second)
	if _, err := s.RunOnce(ctx); err != nil || failedGhosts() != first+1 {
		t.Fatalf("the probe: %d failed (%v), want %d", failedGhosts(), err, first+1)
	}
	b.clock.Advance(time.Minute)
	if _, err := s.RunOnce(ctx); err != nil || failedGhosts() != first+1 {
		t.Fatalf("a minute after a failed probe: %d failed (%v), want %d (parked for 2 minutes)", failedGhosts(), err, first+1)
	}
	// The topic is made: the next probe goes out, and so does the backlog.
	kafkatest.CreateTopics(t, b.brokers, "ghost")
	b.clock.Advance(time.Minute)
	if _, err := s.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.countState(t, "ghost", dlq.StateCompleted); n != int64(400-first-1) {
		t.Fatalf("%d records of ghost redelivered once it exists, want the %d never tried", n, 400-first-1)
	}
	if parked() != 0 || len(logs.Lines("topic unparked")) != 1 {
		t.Fatalf("parked topics %v, log %q; want ghost unparked", parked(), logs.Lines("topic unparked"))
	}
}

// A producer that creates missing topics (redrive dev's) parks nothing: the
// topic is not looked up, and its first produce makes it, so a queue whose
// topic does not exist yet is redelivered whole at once.
func TestAProducerThatCreatesTopicsParksNone(t *testing.T) {
	b := setup(t)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	b.brokers = cluster.ListenAddrs()
	b.due(t, "fresh", 120)
	logs := &logtest.Buffer{}
	s := b.scheduler(t, nil, func(c *redeliver.Config) {
		c.Brokers, c.Logger = b.brokers, logs.TextLogger(slog.LevelInfo)
		c.ClientOpts = append(kafkatest.ClientOpts(b.brokers), kgo.AllowAutoTopicCreation())
	})
	if _, err := s.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := b.countState(t, "fresh", dlq.StateCompleted); n != 120 || len(logs.Lines("topic parked")) != 0 {
		t.Fatalf("%d of 120 redelivered to a topic the producer creates; parked: %q", n, logs.Lines("topic parked"))
	}
}
