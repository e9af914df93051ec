package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// A record COPYed (the fast path) is stored exactly as one written by
// INSERT (the path of a re-consumed batch's new records): every column of
// the two rows is equal but the id and offset.
func TestCopiedRecordsAreStoredAsInsertedOnes(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	discarded := newRecord(2, "orders") // exercises the NULLs and the archive state
	discarded.State, discarded.Exhaustion, discarded.NextRetryAt = dlq.StateDiscarded, dlq.ExhaustionDeadLetter, nil
	discarded.DiscardedAt, discarded.Key = &discarded.CreatedAt, nil
	for _, want := range []dlq.Record{newRecord(1, "orders"), discarded} {
		if res, err := s.InsertRecords(ctx, []dlq.Record{want}); err != nil || res.N != 1 {
			t.Fatalf("InsertRecords = %+v, %v", res, err)
		}
		again := want
		again.ID, again.DLQ.Offset = dlq.NewID(testdate.Now()), want.DLQ.Offset+1000
		// With want, stored already, the batch is written by INSERT.
		res, err := s.InsertRecords(ctx, []dlq.Record{want, again})
		if err != nil || res.N != 1 || res.New(0) {
			t.Fatalf("InsertRecords with a duplicate = %+v, %v; want the new record only", res, err)
		}
		var diff []string
		if err := pool.QueryRow(ctx, `
			WITH a AS (SELECT to_jsonb(r) - 'id' - 'lifecycle_id' - 'dlq_offset' AS j FROM redrive_record r WHERE id = $1),
			     b AS (SELECT to_jsonb(r) - 'id' - 'lifecycle_id' - 'dlq_offset' AS j FROM redrive_record r WHERE id = $2)
			SELECT coalesce(array_agg(k), '{}') FROM a, b, jsonb_object_keys(a.j) k WHERE a.j->k IS DISTINCT FROM b.j->k`,
			want.ID, again.ID).Scan(&diff); err != nil {
			t.Fatal(err)
		}
		if len(diff) > 0 {
			t.Errorf("state %s: columns differ between COPY and INSERT: %v", want.State, diff)
		}
	}
}

// The fast path falls back: a re-consumed batch skips what is stored, JSON
// that jsonb rejects is kept as text, and a value shaped like JSON that is
// not (the COPY does not check it) is written the checked way.
func TestInsertRecordsFallsBack(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	if res, err := s.InsertRecords(ctx, []dlq.Record{newRecord(1, "orders"), newRecord(2, "orders")}); err != nil || res.N != 2 {
		t.Fatalf("first = %+v, %v", res, err)
	}
	huge := newRecord(3, "orders")
	huge.Value = []byte(`{"amount":1e999999}`)
	res, err := s.InsertRecords(ctx, []dlq.Record{newRecord(1, "orders"), newRecord(2, "orders"), huge})
	if err != nil || res.N != 1 || res.New(0) || res.New(1) || !res.New(2) {
		t.Fatalf("re-consumed batch = %+v, %v; want only the third stored", res, err)
	}
	got, err := s.Get(ctx, huge.ID)
	if err != nil || string(got.Value) != `{"amount":1e999999}` {
		t.Fatalf("value not kept byte for byte: %q %v", got.Value, err)
	}
	fake, fine := newRecord(4, "orders"), newRecord(5, "orders")
	fake.Value = []byte(`{"not": json}`)
	if res, err := s.InsertRecords(ctx, []dlq.Record{fake, fine}); err != nil || res.N != 2 {
		t.Fatalf("batch with a fake JSON value = %+v, %v", res, err)
	}
	var payloads int
	if err := pool.QueryRow(ctx, `SELECT count(payload) FROM redrive_record WHERE id IN ($1, $2)`, fake.ID, fine.ID).Scan(&payloads); err != nil || payloads != 1 {
		t.Fatalf("%d payloads, %v; want only the real JSON searchable", payloads, err)
	}
}

// The encoder writes binary values of the types DataOIDs and LifecycleOIDs
// name; a column whose type a migration changes must change there too (else
// every batch would fail its COPY and take the slow path).
func TestRecordOIDsMatchTheTables(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	for _, tc := range []struct {
		table   string
		columns []string
		oids    []uint32
	}{
		{"redrive_record_data", store.DataColumns, store.DataOIDs},
		{"redrive_lifecycle", store.LifecycleColumns, store.LifecycleOIDs},
	} {
		var got []uint32
		if err := pool.QueryRow(context.Background(), `
			SELECT array_agg(a.atttypid::int8 ORDER BY c.i)
			FROM unnest($1::text[]) WITH ORDINALITY AS c(name, i)
			JOIN pg_attribute a ON a.attrelid = $2::regclass AND a.attname = c.name AND NOT a.attisdropped`, tc.columns, tc.table).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.oids) {
			t.Fatalf("%s: OIDs = %v, the table has %v (columns %v)", tc.table, tc.oids, got, tc.columns)
		}
	}
}
