package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
)

// A failure that is about Postgres, not the rows, is returned as it is (the
// caller pauses and tries again): no row is degraded or half-written for it,
// not even in a batch that holds a row Postgres would refuse. Once the
// server is well, the same batch is stored with every good row intact.
func TestServerFaultsNeverDegradeRows(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"53100", "53200", "57014", "58030", "40001", "XX000", "25006", "42501"} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			pool := pgtest.New(t)
			s := store.New(pool)
			ctx := context.Background()
			bad := newRecord(2, "orders")
			bad.Value = nested(20000, false)
			surrogate := newRecord(3, "orders")
			surrogate.Value = []byte(`{"s":"\ud800"}`)
			batch := []dlq.Record{newRecord(1, "orders"), bad, surrogate, newRecord(4, "orders")}
			// Postgres failing with code on every write, the way a full
			// disk or a failover would.
			if _, err := pool.Exec(ctx, fmt.Sprintf(`
				CREATE FUNCTION fail() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN RAISE EXCEPTION 'server trouble' USING ERRCODE = '%s'; END $$;
				CREATE TRIGGER fail BEFORE INSERT ON redrive_record_data FOR EACH ROW EXECUTE FUNCTION fail()`, code)); err != nil {
				t.Fatal(err)
			}
			res, err := s.InsertRecords(ctx, batch)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != code || res.N != 0 {
				t.Fatalf("InsertRecords = %+v, %v; want the server's error %s", res, err, code)
			}
			if _, err := pool.Exec(ctx, `DROP TRIGGER fail ON redrive_record_data`); err != nil {
				t.Fatal(err)
			}
			if res, err := s.InsertRecords(ctx, batch); err != nil || res.N != len(batch) {
				t.Fatalf("once the server is well: %+v, %v", res, err)
			}
			checkPayloads(t, pool, batch, true, false, false, true)
		})
	}
}

// A database that turned read-only (a failover in progress) is a server
// condition too; once it is writable, the batch is stored.
func TestReadOnlyDatabaseIsAServerFault(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var db string
	if err := admin.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+db+" SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	ro, err := pgxpool.New(ctx, url) // new sessions get the setting
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	huge, deep := newRecord(2, "orders"), newRecord(3, "orders")
	huge.Value, deep.Value = []byte(`{"n":1e999999}`), nested(20000, false)
	batch := []dlq.Record{newRecord(1, "orders"), deep, huge}
	res, err := store.New(ro).InsertRecords(ctx, batch)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25006" || res.N != 0 {
		t.Fatalf("InsertRecords on a read-only database = %+v, %v; want 25006", res, err)
	}
	var n int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM redrive_record").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows stored, %v", n, err)
	}
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+db+" RESET default_transaction_read_only"); err != nil {
		t.Fatal(err)
	}
	rw, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if res, err := store.New(rw).InsertRecords(ctx, batch); err != nil || res.N != len(batch) {
		t.Fatalf("once writable: %+v, %v", res, err)
	}
	checkPayloads(t, rw, batch, true, false, false)
}

// checkPayloads checks which records of batch have a payload.
func checkPayloads(t *testing.T, pool *pgxpool.Pool, batch []dlq.Record, want ...bool) {
	t.Helper()
	for i := range batch {
		var has bool
		if err := pool.QueryRow(context.Background(), "SELECT payload IS NOT NULL FROM redrive_record WHERE id = $1", batch[i].ID).Scan(&has); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if has != want[i] {
			t.Errorf("record %d: payload %v, want %v", i, has, want[i])
		}
	}
}

// A server fault met while the slow path isolates a bad row ends the whole
// write: nothing of the batch is stored (no good row stored twice, none
// reported new and lost), and the caller tries the batch again. The fault
// is the lifecycle's, written after the wide rows: their rows go too.
func TestServerFaultWhileIsolatingWritesNothing(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	surrogate := newRecord(2, "orders")
	surrogate.Value = []byte(`{"s":"\ud800"}`)
	batch := []dlq.Record{newRecord(1, "orders"), surrogate, newRecord(3, "doomed"), newRecord(4, "orders")}
	if _, err := pool.Exec(ctx, `
		CREATE FUNCTION fail() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.queue = 'doomed' THEN RAISE EXCEPTION 'disk full' USING ERRCODE = '53100'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER fail BEFORE INSERT ON redrive_lifecycle FOR EACH ROW EXECUTE FUNCTION fail()`); err != nil {
		t.Fatal(err)
	}
	res, err := s.InsertRecords(ctx, batch)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "53100" || res.N != 0 {
		t.Fatalf("InsertRecords = %+v, %v; want the server's error", res, err)
	}
	if n, err := s.Count(ctx, &filter.Filter{}); err != nil || n != 0 {
		t.Fatalf("%d records stored, %v; want none", n, err)
	}
	var wide int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM redrive_record_data").Scan(&wide); err != nil || wide != 0 {
		t.Fatalf("%d wide rows stored, %v; want none", wide, err)
	}
	if _, err := pool.Exec(ctx, `DROP TRIGGER fail ON redrive_lifecycle`); err != nil {
		t.Fatal(err)
	}
	if res, err := s.InsertRecords(ctx, batch); err != nil || res.N != len(batch) {
		t.Fatalf("once the server is well: %+v, %v", res, err)
	}
	checkPayloads(t, pool, batch, true, false, true, true)
}
