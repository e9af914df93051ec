package redeliver_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/redeliver"
)

// A batch holds at most BatchBytes of keys and values and one more record:
// a backlog of larger records drains in more, smaller batches, all of it in
// one run (a claim cut at its bytes counts as full).
func TestBatchesAreBoundedByTheirBytes(t *testing.T) {
	b := setup(t, "orders")
	ctx := context.Background()
	b.due(t, "orders", 9) // keys "k0"…"k8" and values {"n":0}…: 9 bytes each
	s := b.scheduler(t, nil, func(c *redeliver.Config) { c.BatchBytes, c.Workers = 20, 1 })
	var (
		mu      sync.Mutex
		batches int
	)
	redeliver.SetAfterProduce(s, func() {
		mu.Lock()
		batches++
		mu.Unlock()
	})
	if n, err := s.RunOnce(ctx); err != nil || n != 9 {
		t.Fatalf("the run redelivered %d records (%v), want 9", n, err)
	}
	// 0, 9 and 18 bytes before the first three of each batch: the fourth
	// would start at 27, past 20.
	if batches != 3 {
		t.Fatalf("the run produced %d batches, want 3 of 3 records", batches)
	}
	if got := len(kafkatest.Consume(t, b.brokers, "orders", 9, 30*time.Second)); got != 9 {
		t.Fatalf("orders has %d records, want 9", got)
	}
}

// A claim cut at its bytes counts as full: while its batch is still being
// produced, the queue's next batch is claimed at once, not once the batch
// ends or at the next poll.
func TestAClaimCutAtItsBytesIsFollowedAtOnce(t *testing.T) {
	b := setup(t, "orders")
	b.due(t, "orders", 9)
	s := b.scheduler(t, nil, func(c *redeliver.Config) {
		c.BatchBytes, c.Workers, c.Clock, c.PollInterval = 20, 1, clock.Wall, time.Minute
	})
	produced, release := make(chan struct{}, 3), make(chan struct{})
	redeliver.SetAfterProduce(s, func() {
		produced <- struct{}{}
		<-release // the first batch is held here until the second is produced
	})
	defer close(release)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		select {
		case <-produced:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d batches produced while the first was held, want 2: the cut claim was not followed at once", i)
		}
	}
}
