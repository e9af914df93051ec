package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// Upgrading to completion policies (migration 00090): records redelivered
// before it and still available never had an acknowledgement — nothing else
// completed a record — so the first scheduler pass marks them
// unacknowledged, to be seen and retried; completed records were all
// acknowledged. Records being produced right now are left to their claim.
func TestMigrationMarksOldRedeliveriesForAcknowledgement(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	m, err := store.NewMigrator(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// Stored with today's columns (later migrations add some), then back to
	// before 00090.
	s := store.New(pool)
	old, done, flying := newRecord(1, "orders"), newRecord(2, "orders"), newRecord(3, "orders")
	if _, err := s.InsertRecords(ctx, []dlq.Record{old, done, flying}); err != nil {
		t.Fatal(err)
	}
	// Back to before 00090.
	for {
		st, err := m.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		applied := false
		for _, s := range st {
			applied = applied || s.Version >= 90 && s.Applied
		}
		if !applied {
			break
		}
		if err := m.Down(ctx); err != nil {
			t.Fatal(err)
		}
	}
	redelivered := testdate.Now().Add(-24 * time.Hour).UTC().Truncate(time.Microsecond)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`UPDATE redrive_record SET state = 'available', next_retry_at = NULL, redelivered_at = $2 WHERE id = $1`, old.ID, redelivered)
	exec(`UPDATE redrive_record SET state = 'completed', next_retry_at = NULL, completed_at = $2 WHERE id = $1`, done.ID, redelivered)
	exec(`INSERT INTO redrive_claim (token, owner, queue, claimed_at, expires_at, ids, prior_states)
		VALUES ('01a2155f-0000-7000-8000-0000000000aa', 'old', 'orders', now(), now() + interval '30 seconds', ARRAY[$1::uuid], ARRAY['retryable'])`, flying.ID)
	exec(`UPDATE redrive_record SET state = 'available', next_retry_at = NULL, redelivered_at = now(),
		claim_token = '01a2155f-0000-7000-8000-0000000000aa' WHERE id = $1`, flying.ID)
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}

	if r := get(t, s, done.ID); r.CompletedBy != dlq.CompletedByAck {
		t.Errorf("a completed record stored before: completed_by %q, want ack", r.CompletedBy)
	}
	if r := get(t, s, old.ID); r.AckDueAt == nil || !r.AckDueAt.Equal(redelivered) {
		t.Errorf("an old redelivery: ack due %v, want its redelivery time %v", r.AckDueAt, redelivered)
	}
	marked, err := s.MarkUnacknowledged(ctx, testdate.Now(), 100)
	if err != nil || len(marked) != 1 || marked[0].ID != old.ID {
		t.Fatalf("marked %v (%v), want the old redelivery alone", marked, err)
	}
	if r := get(t, s, flying.ID); r.AckDueAt != nil || !r.InFlight {
		t.Errorf("a record in flight during the upgrade: ack due %v, in flight %t; want it left to its claim", r.AckDueAt, r.InFlight)
	}
}
