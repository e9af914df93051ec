package store_test

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// A claim runs as a prepared statement whose plan no value changes: after
// Postgres's first five calls planned with their values, the connection
// keeps one plan (its generic plan) instead of planning every claim, and that
// plan reads the claimed records' lifecycle and wide rows by their primary
// keys in the one week each record's id falls in, whatever the claim's size.
// Its rows come in due order.
func TestAClaimKeepsOnePlanThatReadsByKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1 // every statement on the connection whose plans are read
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := store.New(pool)
	recs := make([]dlq.Record, 3000)
	due := testdate.Now().UTC().Truncate(time.Microsecond).Add(-time.Hour)
	for i := range recs {
		recs[i] = newRecord(int64(i), "orders")
		at := due.Add(time.Duration(len(recs)-i) * time.Millisecond) // inserted in the reverse of due order
		recs[i].NextRetryAt = &at
	}
	// Records of next week, due later: their week's rows are never read.
	nextWeek := make([]dlq.Record, 100)
	for i := range nextWeek {
		nextWeek[i] = newRecord(int64(len(recs)+i), "orders")
		nextWeek[i].ID = idAt(t, testdate.Now().Add(7*24*time.Hour))
		at := due.Add(2 * time.Hour)
		nextWeek[i].NextRetryAt = &at
	}
	if _, err := s.InsertRecords(ctx, append(recs, nextWeek...)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE redrive_record_data, redrive_lifecycle"); err != nil {
		t.Fatal(err)
	}
	now := due.Add(time.Hour)
	const claims = 8
	for i := range claims {
		c, err := s.ClaimDue(ctx, &store.ClaimParams{Queue: "orders", Now: now, Limit: 100, Owner: "test", Lease: time.Minute})
		if err != nil || len(c.Records) != 100 {
			t.Fatalf("claim %d: %d records, %v; want 100", i, len(c.Records), err)
		}
		for j := 1; j < len(c.Records); j++ {
			if !c.Records[j].NextRetryAt.After(*c.Records[j-1].NextRetryAt) {
				t.Fatalf("claim %d: record %d was due at %v, after the one before it (%v)", i, j,
					*c.Records[j].NextRetryAt, *c.Records[j-1].NextRetryAt)
			}
		}
	}
	var generic, custom int64
	if err := pool.QueryRow(ctx, "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1",
		store.ClaimSQL).Scan(&generic, &custom); err != nil {
		t.Fatalf("the claim is not a prepared statement of the connection: %v", err)
	}
	if generic+custom != claims || generic < claims-5 {
		t.Errorf("%d claims made %d generic and %d custom plans; want every claim after the fifth on the generic plan",
			claims, generic, custom)
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // the EXPLAIN ANALYZE's claim is undone
	for _, q := range []string{"SET LOCAL plan_cache_mode = force_generic_plan", "PREPARE claim_plan AS " + store.ClaimSQL} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// EXECUTE takes no parameters of the protocol: the values are literals.
	p := withoutEmptyScans(explain(t, ctx, tx, fmt.Sprintf("(ANALYZE) EXECUTE claim_plan('orders', '%s', 2000, false, 0, "+
		"'00000000-0000-7000-8000-000000000000', 'test', 60000, %d)", now.Format(time.RFC3339Nano), int64(math.MaxInt64))))
	// The wide table's primary key kept the name it had before the split.
	for _, want := range []string{"redrive_lifecycle_pkey", "redrive_record_pkey", "rows=2000"} {
		if !strings.Contains(p, want) {
			t.Errorf("the generic plan of a claim of 2,000 does not use %s:\n%s", want, p)
		}
	}
	if strings.Contains(p, "Seq Scan") || strings.Contains(p, "Bitmap") {
		t.Errorf("the generic plan of a claim of 2,000 reads a table through:\n%s", p)
	}
	// One week's primary keys are read, once a record: the other weeks are
	// pruned, record by record.
	if read := executedKeyScan.FindAllString(p, -1); len(read) != 2 {
		t.Errorf("the generic plan of a claim of 2,000 read %d primary keys; want 2 (a week's, each table's):\n%s", len(read), p)
	}
	for _, table := range []string{"redrive_lifecycle_pkey", "redrive_record_pkey"} {
		if !regexp.MustCompile(table + ` on \S+ \S+\s+\(.*actual .* rows=1 loops=2000\)`).MatchString(p) {
			t.Errorf("the generic plan of a claim of 2,000 does not look each record up in %s:\n%s", table, p)
		}
	}
}

// A claim's arrays (its records' ids, prior states and prior redelivered_at)
// are moved out of line without an attempt to compress them first: UUIDs
// do not compress, and the attempt cost about 1 ms a claim of 1,000
// (migration 00240).
func TestAClaimsArraysAreNotCompressed(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	var storage string
	if err := pool.QueryRow(context.Background(), `SELECT string_agg(attname || '=' || attstorage::text, ' ' ORDER BY attname)
		FROM pg_attribute WHERE attrelid = 'redrive_claim'::regclass AND attname IN ('ids', 'prior_states', 'prior_redelivered_at')`,
	).Scan(&storage); err != nil {
		t.Fatal(err)
	}
	// e: EXTERNAL, out of line and not compressed.
	if want := "ids=e prior_redelivered_at=e prior_states=e"; storage != want {
		t.Errorf("redrive_claim's arrays are stored %q; want %q", storage, want)
	}
}

// executedKeyScan matches a plan's scan of a primary key that ran.
var executedKeyScan = regexp.MustCompile(`Index Scan using redrive_(lifecycle|record)_pkey on .*\(actual [^)]*\)`)
