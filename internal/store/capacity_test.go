package store_test

import (
	"context"
	"testing"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

func discardAs(errType string) func(r *dlq.Record) {
	return func(r *dlq.Record) {
		now := testdate.Now().UTC()
		r.State, r.Exhaustion, r.NextRetryAt, r.DiscardedAt, r.UpdatedAt = dlq.StateDiscarded, dlq.ExhaustionDiscard, nil, &now, now
		r.Errors = append(r.Errors, dlq.ErrorEntry{Attempt: r.Attempt, Type: errType, Code: "QUEUE_FULL", OccurredAt: now})
	}
}

// A topic's size in records and bytes comes from the statistics table, kept
// by the triggers through inserts, updates and deletes; capacity turns away
// the newest of a batch (reject) or the oldest retryable records
// (drop_oldest), once: checked again (a batch consumed again after a crash
// between its insert and its check), nothing more changes.
func TestEnforceCapacity(t *testing.T) {
	s := setup(t)
	ctx := context.Background()
	var recs []dlq.Record
	for i := range 5 {
		recs = append(recs, newRecord(int64(i), "orders")) // key k0..k4 (2 bytes), value {"id":1} (8 bytes)
	}
	if _, err := s.InsertRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	size, err := s.QueueSize(ctx, "orders")
	if err != nil || size != (store.QueueSize{Records: 5, Bytes: 50}) {
		t.Fatalf("size %+v %v, want 5 records, 50 bytes", size, err)
	}
	coords := make([]dlq.Coord, len(recs))
	for i, r := range recs {
		coords[i] = r.DLQ
	}
	check := store.CapacityCheck{Queue: "orders", MaxSize: 3, Coords: coords}
	got, err := s.EnforceCapacity(ctx, check, discardAs("queue_full"))
	if err != nil || len(got) != 2 || got[0].ID != recs[4].ID || got[1].ID != recs[3].ID {
		t.Fatalf("reject: %d records %v; want the two newest", len(got), err)
	}
	if got, err := s.EnforceCapacity(ctx, check, discardAs("queue_full")); err != nil || len(got) != 0 {
		t.Fatalf("checked again: %d records %v; want none", len(got), err)
	}
	r, err := s.Get(ctx, recs[4].ID)
	if err != nil || r.State != dlq.StateDiscarded || r.LastError().Type != "queue_full" || r.NextRetryAt != nil || r.Archive == nil {
		t.Fatalf("rejected record: %+v %v", r, err)
	}
	if size, _ := s.QueueSize(ctx, "orders"); size != (store.QueueSize{Records: 3, Bytes: 30}) {
		t.Fatalf("size after reject %+v", size)
	}

	// Bytes: 25 bytes fit two records of 10; drop_oldest takes the oldest.
	if err := s.CompactCounts(ctx); err != nil { // the sizes survive compaction
		t.Fatal(err)
	}
	got, err = s.EnforceCapacity(ctx, store.CapacityCheck{Queue: "orders", MaxBytes: 25, DropOldest: true, Coords: coords}, discardAs("overflow"))
	if err != nil || len(got) != 1 || got[0].ID != recs[0].ID {
		t.Fatalf("drop_oldest by bytes: %d records %v; want the oldest", len(got), err)
	}
	if size, _ := s.QueueSize(ctx, "orders"); size != (store.QueueSize{Records: 2, Bytes: 20}) {
		t.Fatalf("size after drop_oldest %+v", size)
	}
	// Deletes count too.
	if _, err := s.DeleteRecord(ctx, recs[1].ID); err != nil {
		t.Fatal(err)
	}
	if size, _ := s.QueueSize(ctx, "orders"); size != (store.QueueSize{Records: 1, Bytes: 10}) {
		t.Fatalf("size after delete %+v", size)
	}
}
