package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// Under completion: ack a claimed record waits, available, for its
// acknowledgement until ack_timeout; past it the record is marked
// unacknowledged — once, and only once its claim is settled — shows in its
// queue's count and in a filter, and may be retried like any record that is
// neither in flight nor completed.
func TestAckTimeoutMarksRecordsUnacknowledged(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	a, b := newRecord(1, "orders"), newRecord(2, "orders")
	if _, err := s.InsertRecords(ctx, []dlq.Record{a, b}); err != nil {
		t.Fatal(err)
	}
	now := a.NextRetryAt.Add(time.Second)
	c, err := s.ClaimDue(ctx, &store.ClaimParams{Queue: "orders", Now: now, Limit: 10, Owner: "test", Lease: time.Minute,
		AwaitAck: true, AckTimeout: 10 * time.Minute})
	if err != nil || len(c.Records) != 2 {
		t.Fatalf("claim: %v, %v", c, err)
	}
	due := now.Add(10 * time.Minute)
	// Until the claim is settled the record is shown as it was, in flight:
	// no acknowledgement is awaited before its produce lands.
	r := get(t, s, a.ID)
	if r.State != dlq.StateRetryable || r.AckDueAt != nil || r.CompletedAt != nil || !r.InFlight {
		t.Fatalf("claimed record: %s ack due %v completed %v in flight %t; want retryable, none, none, in flight", r.State, r.AckDueAt, r.CompletedAt, r.InFlight)
	}
	// Being produced: not retried, alone or in bulk.
	if _, err := s.RetryRecord(ctx, &store.RetryParams{ID: a.ID}); !errors.Is(err, store.ErrInFlight) {
		t.Fatalf("retrying a record in flight: %v", err)
	}
	if n, err := s.CountRetryable(ctx, &filter.Filter{Queue: "orders"}, filter.Scope{}); err != nil || n != 0 {
		t.Fatalf("CountRetryable while in flight = %d, %v", n, err)
	}
	if res := retryBatch(t, pool, s, filter.Filter{Queue: "orders"}); res.N != 0 {
		t.Fatalf("bulk retry took %d records in flight", res.N)
	}
	// Overdue but still being produced: left for a later pass.
	if got, err := s.MarkUnacknowledged(ctx, due.Add(time.Second), 100); err != nil || len(got) != 0 {
		t.Fatalf("marked %v (%v) while in flight", got, err)
	}
	if err := s.Settle(ctx, c, nil, now); err != nil {
		t.Fatal(err)
	}
	if r := get(t, s, a.ID); r.State != dlq.StateAvailable || r.InFlight || r.UnacknowledgedAt != nil {
		t.Fatalf("settled record: %s in flight %t unacknowledged %v", r.State, r.InFlight, r.UnacknowledgedAt)
	}
	// Not due yet.
	if got, err := s.MarkUnacknowledged(ctx, due.Add(-time.Second), 100); err != nil || len(got) != 0 {
		t.Fatalf("marked %v (%v) before the ack was due", got, err)
	}
	got, err := s.MarkUnacknowledged(ctx, due, 1)
	if err != nil || len(got) != 1 || got[0].Queue != "orders" || got[0].Attempt != 2 {
		t.Fatalf("marked %v (%v), want one record (the limit)", got, err)
	}
	if got, err = s.MarkUnacknowledged(ctx, due, 100); err != nil || len(got) != 1 {
		t.Fatalf("marked %v (%v), want the other one", got, err)
	}
	if got, err = s.MarkUnacknowledged(ctx, due.Add(time.Hour), 100); err != nil || len(got) != 0 {
		t.Fatalf("marked %v (%v) twice", got, err)
	}
	if r := get(t, s, a.ID); r.State != dlq.StateAvailable || r.UnacknowledgedAt == nil || !r.UnacknowledgedAt.Equal(due) {
		t.Fatalf("unacknowledged record: %s at %v", r.State, r.UnacknowledgedAt)
	}
	n, err := s.UnacknowledgedQueues(ctx, []string{"orders", "other"})
	if err != nil || n["orders"] != 2 || len(n) != 1 {
		t.Fatalf("unacknowledged per queue: %v, %v", n, err)
	}
	yes := true
	if k, err := s.Count(ctx, &filter.Filter{Queue: "orders", Unacknowledged: &yes}); err != nil || k != 2 {
		t.Fatalf("unacknowledged=true counts %d, %v", k, err)
	}

	// An operator retries one: it is queued afresh, the mark gone.
	retried, err := s.RetryRecord(ctx, &store.RetryParams{ID: a.ID})
	if err != nil {
		t.Fatalf("retrying an unacknowledged record: %v", err)
	}
	if retried.State != dlq.StateAvailable || retried.NextRetryAt == nil || retried.UnacknowledgedAt != nil || retried.AckDueAt != nil || retried.Attempt != 0 {
		t.Fatalf("retried: %s next %v unacknowledged %v ack due %v attempt %d", retried.State, retried.NextRetryAt,
			retried.UnacknowledgedAt, retried.AckDueAt, retried.Attempt)
	}
	if n, _ := s.UnacknowledgedQueues(ctx, []string{"orders"}); n["orders"] != 1 {
		t.Fatalf("after the retry: %v unacknowledged", n)
	}
	// The other one by a bulk retry of the unacknowledged records.
	res := retryBatch(t, pool, s, filter.Filter{Queue: "orders", Unacknowledged: &yes})
	if res.N != 1 || res.Rows[0].ID != b.ID {
		t.Fatalf("bulk retry of unacknowledged records: %+v", res)
	}
}

// An operator may retry any record that is neither in flight nor completed:
// single and bulk retries agree, and the conflict says which it is.
func TestRetryLeavesOutRecordsInFlightAndCompleted(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	done := newRecord(1, "orders") // due first
	flying, waiting := newRecord(2, "orders"), newRecord(3, "orders")
	acked := newRecord(4, "payments")
	later := testdate.Now().Add(time.Hour)
	waiting.NextRetryAt = &later // not due: not claimed
	if _, err := s.InsertRecords(ctx, []dlq.Record{done, flying, waiting, acked}); err != nil {
		t.Fatal(err)
	}
	now := flying.NextRetryAt.Add(time.Second)
	// done is claimed and settled (completed by its redelivery); flying is
	// claimed and still being produced.
	for i, want := range []string{done.ID, flying.ID} {
		c, err := s.ClaimDue(ctx, &store.ClaimParams{Queue: "orders", Now: now, Limit: 1, Owner: "test", Lease: time.Minute})
		if err != nil || len(c.Records) != 1 || c.Records[0].ID != want {
			t.Fatalf("claim %d: %v, %v", i, c, err)
		}
		if i == 0 {
			if err := s.Settle(ctx, c, nil, now); err != nil {
				t.Fatal(err)
			}
		} else {
			defer func() {
				// Once its claim is settled, the record is no longer in
				// flight: it completed, and stays so.
				if err := s.Settle(ctx, c, nil, now); err != nil {
					t.Fatal(err)
				}
				if _, err := s.RetryRecord(ctx, &store.RetryParams{ID: flying.ID}); !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrInFlight) {
					t.Errorf("retrying a settled completed record: %v, want ErrConflict", err)
				}
			}()
		}
	}
	// acked is completed by an acknowledgement (completion: ack).
	ca, err := s.ClaimDue(ctx, &store.ClaimParams{Queue: "payments", Now: now, Limit: 10, Owner: "test", Lease: time.Minute, AwaitAck: true, AckTimeout: time.Hour})
	if err != nil || len(ca.Records) != 1 {
		t.Fatalf("payments claim: %v, %v", ca, err)
	}
	if err := s.Settle(ctx, ca, nil, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateLocked(ctx, []string{acked.ID}, func(rs map[string]*dlq.Record) ([]*dlq.Record, error) {
		r := rs[acked.ID]
		r.State, r.CompletedAt, r.CompletedBy, r.AckDueAt = dlq.StateCompleted, &now, dlq.CompletedByAck, nil
		return []*dlq.Record{r}, nil
	}); err != nil {
		t.Fatal(err)
	}

	if _, err := s.RetryRecord(ctx, &store.RetryParams{ID: flying.ID}); !errors.Is(err, store.ErrInFlight) || !errors.Is(err, store.ErrConflict) {
		t.Errorf("retrying a record in flight: %v, want ErrInFlight", err)
	}
	for _, id := range []string{done.ID, acked.ID} {
		if _, err := s.RetryRecord(ctx, &store.RetryParams{ID: id}); !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrInFlight) {
			t.Errorf("retrying a completed record: %v, want ErrConflict", err)
		}
	}
	if n, err := s.CountRetryable(ctx, &filter.Filter{}, filter.Scope{}); err != nil || n != 1 {
		t.Errorf("CountRetryable = %d, %v; want 1 (the waiting record)", n, err)
	}
	if n, err := s.CountRetryable(ctx, &filter.Filter{State: dlq.StateCompleted}, filter.Scope{}); err != nil || n != 0 {
		t.Errorf("CountRetryable(completed) = %d, %v", n, err)
	}
	res := retryBatch(t, pool, s, filter.Filter{})
	if res.N != 1 || res.Rows[0].ID != waiting.ID {
		t.Errorf("bulk retry retried %+v, want only the waiting record", res.Rows)
	}
	if more, err := s.RemainsAfter(ctx, "retry", &filter.Filter{}, filter.Scope{}, res.LastID); err != nil || more {
		t.Errorf("RemainsAfter = %t, %v", more, err)
	}
}

func retryBatch(t *testing.T, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, s *store.Store, f filter.Filter) store.BatchResult {
	t.Helper()
	var res store.BatchResult
	err := s.WithTx(context.Background(), func(ctx context.Context, tx *store.Tx) error {
		var err error
		res, err = s.RetryBatch(ctx, tx, &store.BatchParams{Filter: f, Limit: 100})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}
