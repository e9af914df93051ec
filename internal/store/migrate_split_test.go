package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
)

// The split of a record into its wide row and its lifecycle (migration
// 00180) keeps every record as it was, every column of it: records in every
// state (in flight, put back after a failed produce, discarded and archived,
// leased to a worker, acknowledged with a result) read the same through the
// view as from the single table before, down and up again, and the
// statistics stay exact.
func TestTheSplitKeepsEveryRecord(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	m, err := store.NewMigrator(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	recs := make([]dlq.Record, 8)
	for i := range recs {
		recs[i] = newRecord(int64(i), "orders")
	}
	recs[7].Queue, recs[7].Type = "payments", "payment.failed"
	if _, err := s.InsertRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	now := recs[6].NextRetryAt.Add(time.Second)
	c := claim(t, s, now, time.Minute)
	f := dlq.DeliveryFailure{Reason: dlq.ReasonBroker, Message: "down", FailedAt: now, Failures: 1, NextAttemptAt: now.Add(time.Minute)}
	if err := s.Settle(ctx, c, []store.FailedDelivery{{ID: recs[0].ID, Failure: f}, {ID: recs[1].ID, Failure: f, Discard: true}}, now); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE redrive_lifecycle SET state = 'retryable', next_retry_at = now() - interval '1 minute' WHERE id = '` + recs[2].ID + `'`,
		`UPDATE redrive_lifecycle SET archive_state = 'done', archived_at = now(), archive_reason = 'too_large' WHERE id = '` + recs[1].ID + `'`,
		`UPDATE redrive_lifecycle SET state = 'available', completed_at = NULL, completed_by = NULL, ack_due_at = now(),
			unacknowledged_at = now(), enqueued_at = now() WHERE id = '` + recs[3].ID + `'`,
		`UPDATE redrive_lifecycle SET lease_until = now(), worker_id = 'w1', result = '{"ok":1}' WHERE id = '` + recs[4].ID + `'`,
		`UPDATE redrive_record_data SET redelivery = '{"topic":"elsewhere"}', meta = '{"m":1}' WHERE id = '` + recs[5].ID + `'`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// One claim left open: the record is in flight across the migrations.
	if c := claim(t, s, now.Add(time.Hour), time.Hour); len(c.Records) == 0 {
		t.Fatal("nothing left to claim")
	}
	snapshot := func() map[string]string {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT id::text, (to_jsonb(r) - 'lifecycle_queue' - 'lifecycle_id')::text FROM redrive_record r`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]string{}
		for rows.Next() {
			var id, j string
			if err := rows.Scan(&id, &j); err != nil {
				t.Fatal(err)
			}
			out[id] = j
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	same := func(step string, want, got map[string]string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d records, want %d", step, len(got), len(want))
		}
		for id, w := range want {
			if got[id] != w {
				t.Errorf("%s: record %s is\n%s\nwant\n%s", step, id, got[id], w)
			}
		}
	}
	split := snapshot()
	checkCounts(t, pool, s)
	for {
		st, err := m.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		applied := false
		for _, v := range st {
			applied = applied || v.Version >= 180 && v.Applied
		}
		if !applied {
			break
		}
		if err := m.Down(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var kind string
	if err := pool.QueryRow(ctx, `SELECT relkind::text FROM pg_class WHERE relname = 'redrive_record'`).Scan(&kind); err != nil || kind != "r" {
		t.Fatalf("below 00180 redrive_record is of kind %q (%v), want a table", kind, err)
	}
	same("down to one table", split, snapshot())
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	same("split again", split, snapshot())
	checkCounts(t, pool, s)
}
