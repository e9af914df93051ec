package redeliver_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/redeliver"
)

// While a backlog drains, each claim starts after the last record claimed
// (store.ClaimParams.After). A record left before that place is still
// redelivered: one that became due earlier than the place while the backlog
// drained is claimed in the same run once the claims from the place come up
// empty, and one another transaction held locked when the claims passed it
// is claimed by the next run, from the start.
func TestRecordsLeftBeforeTheClaimsPlaceAreStillRedelivered(t *testing.T) {
	b := setup(t, "orders")
	ctx := context.Background()
	recs := b.due(t, "orders", 31) // one locked, then three full batches of 10
	s := b.scheduler(t, nil, func(c *redeliver.Config) { c.BatchSize, c.Workers = 10, 1 })

	// The first record in due order is held locked by an operator's
	// transaction while the backlog drains.
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // released below; a failed test leaves it to the pool
	if _, err := tx.Exec(ctx, "SELECT 1 FROM redrive_lifecycle WHERE id = $1 FOR UPDATE", recs[0].ID); err != nil {
		t.Fatal(err)
	}
	// Once the first batch is produced, a record waiting for later becomes
	// due a minute before the place the next claim starts at (as an
	// operator's retry of it would make it due).
	straggler := b.due(t, "orders", 1)[0]
	setDue := func(at time.Time) error {
		_, err := b.pool.Exec(ctx, "UPDATE redrive_lifecycle SET next_retry_at = $2 WHERE id = $1", straggler.ID, at)
		return err
	}
	if err := setDue(straggler.NextRetryAt.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	redeliver.SetAfterProduce(s, func() {
		once.Do(func() {
			if err := setDue(straggler.NextRetryAt.Add(-time.Minute)); err != nil {
				t.Error(err)
			}
		})
	})

	n, err := s.RunOnce(ctx)
	if err != nil || n != 31 {
		t.Fatalf("the first run redelivered %d records (%v), want the 30 unlocked ones and the straggler", n, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := s.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("the run after the lock was released redelivered %d records (%v), want the one that was locked", n, err)
	}
	ids := map[string]bool{}
	for _, r := range kafkatest.Consume(t, b.brokers, "orders", 32, 30*time.Second) {
		ids[header(r, "redrive.id")] = true
	}
	if len(ids) != 32 || !ids[recs[0].ID] || !ids[straggler.ID] {
		t.Fatalf("orders has %d distinct records (locked one: %t, straggler: %t), want 32 with both",
			len(ids), ids[recs[0].ID], ids[straggler.ID])
	}
}
