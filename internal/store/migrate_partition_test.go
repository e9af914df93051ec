package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// Partitioning a populated database (migrations 00210 and 00211), and
// undoing it, keeps its
// records where they are, as the partition "old": every record reads the
// same, the statistics stay exact, listing and redelivery work, the
// records' DLQ coordinates still refuse a re-consumed batch, and new
// records go to this week's partition.
func TestPartitioningAPopulatedDatabase(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	m, err := store.NewMigrator(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	below := func() bool {
		st, err := m.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range st {
			if v.Version >= 210 && v.Applied {
				return false
			}
		}
		return true
	}
	recs := make([]dlq.Record, 6)
	for i := range recs {
		recs[i] = newRecord(int64(i), "orders")
	}
	recs[5].State, recs[5].Exhaustion, recs[5].NextRetryAt = dlq.StateDiscarded, dlq.ExhaustionDeadLetter, nil
	recs[5].DiscardedAt = &recs[5].CreatedAt
	if _, err := s.InsertRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	before := snapshotRecords(t, pool)
	// Down to one table each (00211's Down copies the rows back), then up.
	for !below() {
		if err := m.Down(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var kind string
	if err := pool.QueryRow(ctx, `SELECT relkind::text FROM pg_class WHERE relname = 'redrive_lifecycle'`).Scan(&kind); err != nil || kind != "r" {
		t.Fatalf("below 00210 redrive_lifecycle is of kind %q (%v), want a plain table", kind, err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT relkind::text FROM pg_class WHERE relname = 'redrive_lifecycle'`).Scan(&kind); err != nil || kind != "p" {
		t.Fatalf("after 00211 redrive_lifecycle is of kind %q (%v), want partitioned", kind, err)
	}
	after := snapshotRecords(t, pool)
	if len(after) != len(before) {
		t.Fatalf("%d records after, %d before", len(after), len(before))
	}
	for id, w := range before {
		if after[id] != w {
			t.Errorf("record %s is\n%s\nwant\n%s", id, after[id], w)
		}
	}
	var inOld, coords int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM redrive_lifecycle_old), (SELECT count(*) FROM redrive_record_coord)`).Scan(&inOld, &coords); err != nil {
		t.Fatal(err)
	}
	if inOld != len(recs) || coords != len(recs) {
		t.Errorf("old partition holds %d records, coordinates %d; want %d each", inOld, coords, len(recs))
	}
	checkCounts(t, pool, s)
	page, err := s.List(ctx, &store.ListParams{Limit: 10})
	if err != nil || len(page.Records) != len(recs) || page.Total != int64(len(recs)) {
		t.Fatalf("list: %v, %v", page, err)
	}
	// The migrated records are redelivered as before.
	c := claim(t, s, recs[0].NextRetryAt.Add(time.Second), time.Minute)
	if len(c.Records) != 5 {
		t.Fatalf("claimed %d records, want the 5 retryable ones", len(c.Records))
	}
	if err := s.Settle(ctx, c, nil, recs[0].NextRetryAt.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	// A re-consumed copy of a migrated record is refused, its new id in
	// next week's partition; new records are stored in the old partition
	// until this week ends, then in their week's.
	again := recs[0]
	again.ID = idAt(t, testdate.Now().AddDate(0, 0, 7))
	// The old range ends with the week the migration ran in (which may have
	// ended since, when the test runs at a week's last minute): fresh is
	// stored its last second.
	var oldEnd time.Time
	if err := pool.QueryRow(ctx, "SELECT hi_at FROM redrive_partition WHERE name = 'old'").Scan(&oldEnd); err != nil {
		t.Fatal(err)
	}
	fresh, later := newRecord(100, "orders"), newRecord(101, "orders")
	fresh.ID = idAt(t, oldEnd.Add(-time.Second))
	nextWeek := testdate.Now().AddDate(0, 0, 7)
	later.ID = idAt(t, nextWeek)
	res, err := s.InsertRecords(ctx, []dlq.Record{again, fresh, later})
	if err != nil || res.N != 2 || res.New(0) {
		t.Fatalf("insert after the migration: %+v, %v; want the two new records only", res, err)
	}
	for id, want := range map[string]string{fresh.ID: "redrive_lifecycle_old",
		later.ID: "redrive_lifecycle_w" + weekOf(nextWeek).Format("20060102")} {
		var part string
		if err := pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM redrive_lifecycle WHERE id = $1`, id).Scan(&part); err != nil {
			t.Fatal(err)
		}
		if part != want {
			t.Errorf("record %s went to %s, want %s", id, part, want)
		}
	}
	checkCounts(t, pool, s)
}

// snapshotRecords is every record as the view reads it, by id.
func snapshotRecords(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id::text, (to_jsonb(r) - 'lifecycle_queue' - 'lifecycle_id')::text FROM redrive_record r`)
	if err != nil {
		t.Fatal(err)
	}
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
