package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
)

// A replay and a retry make a record available again the same way (one
// definition, makeAvailable): a dead letter whose redelivery was refused
// comes back without its redelivery failure, whichever brought it back.
func TestReplayAndRetryClearTheRedeliveryFailure(t *testing.T) {
	t.Parallel()
	s := store.New(pgtest.New(t))
	ctx := context.Background()
	a, b := newRecord(1, "orders"), newRecord(2, "orders")
	if _, err := s.InsertRecords(ctx, []dlq.Record{a, b}); err != nil {
		t.Fatal(err)
	}
	now := a.NextRetryAt.Add(time.Second)
	c, err := s.ClaimDue(ctx, &store.ClaimParams{Queue: "orders", Now: now, Limit: 10, Owner: "test", Lease: time.Minute})
	if err != nil || len(c.Records) != 2 {
		t.Fatalf("claim: %v, %v", c, err)
	}
	// Nowhere to deliver them: both become dead letters with the failure.
	failure := dlq.DeliveryFailure{Reason: dlq.ReasonNotRoutable, Message: "no route", FailedAt: now, Failures: 1}
	if err := s.Settle(ctx, c, []store.FailedDelivery{{ID: a.ID, Failure: failure, Discard: true},
		{ID: b.ID, Failure: failure, Discard: true}}, now); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a.ID, b.ID} {
		if r := get(t, s, id); r.State != dlq.StateDiscarded || r.RedeliveryFailure == nil {
			t.Fatalf("refused record %s: %s, failure %v", id, r.State, r.RedeliveryFailure)
		}
	}

	later := now.Add(time.Minute)
	replayed, err := s.Replay(ctx, filter.Scope{}, &store.ReplayParams{Rule: "again", Queue: "orders", DiscardedBefore: later,
		MaxReplays: 5, Limit: 1, Now: later})
	if err != nil || len(replayed) != 1 {
		t.Fatalf("replay: %v, %v", replayed, err)
	}
	other := b.ID
	if replayed[0].ID == b.ID {
		other = a.ID
	}
	if _, err := s.RetryRecord(ctx, &store.RetryParams{ID: other}); err != nil {
		t.Fatal(err)
	}
	for what, id := range map[string]string{"replayed": replayed[0].ID, "retried": other} {
		r := get(t, s, id)
		if r.State != dlq.StateAvailable || r.Attempt != 0 || r.Exhaustion != "" || r.DiscardedAt != nil ||
			r.NextRetryAt == nil || r.RedeliveryFailure != nil || r.CompletedAt != nil || r.AckDueAt != nil {
			t.Errorf("%s record: %s attempt %d exhaustion %q discarded %v next %v failure %v completed %v ack due %v",
				what, r.State, r.Attempt, r.Exhaustion, r.DiscardedAt, r.NextRetryAt, r.RedeliveryFailure, r.CompletedAt, r.AckDueAt)
		}
	}
}
