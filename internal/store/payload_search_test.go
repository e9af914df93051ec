package store_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// payloadWeeks stores perWeek records in each of the three weeks before
// this one, as a running Redrive has them (each with an id of its time),
// with a payload {"customer": {"id": N}} whose N is unique but for the
// records of customer 7, and analyzes the tables. It returns the records
// in id order. The weeks are whole, whatever day it is: three weeks back
// from now would put a few records in this week's partition on a Monday,
// where a scan of a hundred rows is, rightly, planned as a scan.
func payloadWeeks(t *testing.T, ctx context.Context, pool *pgxpool.Pool, perWeek int, customer7 func(i int) bool) []dlq.Record {
	t.Helper()
	s := store.New(pool)
	first := weekOf(testdate.Now()).AddDate(0, 0, -21)
	if _, err := s.EnsureWeeks(ctx, first, 4); err != nil {
		t.Fatal(err)
	}
	var recs []dlq.Record
	for i := range 3 * perWeek {
		r := newRecord(int64(i), "orders")
		at := first.Add(time.Duration(i) * 7 * 24 * time.Hour / time.Duration(perWeek))
		r.ID, r.CreatedAt, r.UpdatedAt = idAt(t, at), at, at
		r.State, r.NextRetryAt = dlq.StateDiscarded, nil
		if i%3 == 0 {
			r.State, r.Exhaustion, r.DiscardedAt = dlq.StateDiscarded, dlq.ExhaustionDeadLetter, &at
		} else {
			r.State, r.Exhaustion, r.DiscardedAt = dlq.StateDiscarded, dlq.ExhaustionDiscard, &at
		}
		customer := 1_000 + i*7919%1_000_000
		if customer7(i) {
			customer = 7
		}
		r.Value = fmt.Appendf(nil, `{"order_id":%d,"customer":{"id":%d}}`, i, customer)
		recs = append(recs, r)
	}
	if _, err := s.InsertRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE redrive_record_data, redrive_lifecycle"); err != nil {
		t.Fatal(err)
	}
	return recs
}

// A payload search's page finds its matches through the payload's GIN
// index, then reads them by id, whatever the planner expects. Left alone,
// the planner estimates a containment from the payloads ANALYZE sampled in
// each week: a value that is one of them counts as 1% of its week, and
// expecting more matches than the page holds, it read the records in id
// order to stop at the page (every week's primary key, merged); the value
// being rare, it read every record: 1.2 s at 1M records, in about one
// search in 70 (the runs are in the git history of docs/performance.md).
func TestPayloadSearchFindsItsMatchesFirst(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	payloadWeeks(t, ctx, pool, 3000, func(int) bool { return false })
	// A customer of the middle week's sample: the planner expects 1% of
	// the week (30 records) where one matches, for a page of one.
	var sampled string
	if err := pool.QueryRow(ctx, `SELECT h->'customer'->>'id' FROM pg_stats, unnest(histogram_bounds::text::jsonb[]) h
		WHERE tablename = (SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			WHERE i.inhparent = 'redrive_record_data'::regclass AND c.relname LIKE 'redrive_record_data_w%'
			ORDER BY c.relname LIMIT 1 OFFSET 1)
		AND attname = 'payload' LIMIT 1 OFFSET 50`).Scan(&sampled); err != nil {
		t.Fatal(err)
	}
	p := &store.ListParams{Filter: filter.Filter{Path: []string{"customer", "id"}, Value: sampled}, Limit: 1}

	// The trap, as the statement without the lookup first is planned.
	for _, q := range store.ListScans(p) {
		if plan := explain(t, ctx, pool, q.SQL, q.Args...); strings.Contains(plan, "redrive_record_payload") {
			t.Fatalf("the data no longer makes the planner read in id order; the test proves nothing:\n%s", plan)
		}
	}

	// What List runs, each statement planned again with its arguments.
	s, rec := tracedStore(t, pool)
	page, err := s.List(ctx, p)
	// (A count over its 25 ms budget, on a busy machine, is an estimate.)
	if err != nil || len(page.Records) != 1 || page.Total != 1 && !page.TotalEstimated {
		t.Fatalf("List: %+v, %v; want the one match", page, err)
	}
	if !strings.Contains(string(page.Records[0].Value), `"id":`+sampled+`}`) {
		t.Errorf("List found %s, want customer %s", page.Records[0].Value, sampled)
	}
	var matches, pages int
	for _, q := range rec.all() {
		switch {
		case strings.HasPrefix(q.sql, "SELECT id::text FROM redrive_record_data WHERE"):
			matches++
			plan := explain(t, ctx, pool, q.sql, q.args...)
			if n := strings.Count(plan, "Bitmap Index Scan on redrive_record_payload"); n < 2*3 || indexScan.MatchString(plan) || readsRows(plan) {
				t.Errorf("the matches are not found through each week's GIN index (%d lookups):\n%s", n, plan)
			}
		case strings.HasPrefix(q.sql, "SELECT") && strings.Contains(q.sql, " FROM redrive_record WHERE "):
			pages++
			plan := explain(t, ctx, pool, q.sql, q.args...)
			for _, bad := range []string{"Merge Join", "Hash Join", "Merge Append", "Sort "} {
				if strings.Contains(plan, bad) {
					t.Errorf("the page is not read by id (%s):\n%s", bad, plan)
				}
			}
			if readsRows(plan) || !strings.Contains(plan, "Index Cond: (id = ANY (") || !strings.Contains(plan, "Index Scan using redrive_lifecycle_pkey") {
				t.Errorf("the page does not look its records up by primary key:\n%s", plan)
			}
		}
	}
	if matches != 1 || pages != 1 {
		t.Errorf("List ran %d statements finding matches and %d reading the page, want 1 and 1", matches, pages)
	}
}

// tracedStore is a store on pool's database whose statements are recorded.
func tracedStore(t *testing.T, pool *pgxpool.Pool) (*store.Store, *statements) {
	t.Helper()
	rec := &statements{}
	cfg := pool.Config().Copy()
	cfg.ConnConfig.Tracer = rec
	traced, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(traced.Close)
	return store.New(traced), rec
}

// statements records the statements run through a pool (a pgx tracer).
type statements struct {
	mu sync.Mutex
	qs []statement
}

type statement struct {
	sql  string
	args []any
}

func (r *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.qs = append(r.qs, statement{d.SQL, d.Args})
	return ctx
}

func (r *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *statements) all() []statement {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.qs)
}

// Paging through a payload search's matches, by cursor, either way and in
// either order, with a condition of the lifecycle besides (which the
// lookup of the matches cannot check), gives every match once, in order;
// and a search with more matches than it looks up first pages the same.
func TestPayloadSearchPagesThroughItsMatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// 30 and 1,200 records of customer 7, of which 10 and 400 dead letters.
	for name, every := range map[string]int{"few": 80, "many": 2} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pool := pgtest.New(t)
			recs := payloadWeeks(t, ctx, pool, 800, func(i int) bool { return i%every == 0 })
			s := store.New(pool)
			for _, state := range []string{"", "dead_letter"} {
				var want []string
				for _, r := range recs {
					if strings.Contains(string(r.Value), `"id":7}`) && (state == "" || r.Exhaustion == dlq.ExhaustionDeadLetter) {
						want = append(want, r.ID)
					}
				}
				slices.Sort(want)
				if name == "many" && state == "" && len(want) <= store.PayloadMatchCap {
					t.Fatalf("%d matches: not more than the lookup's cap", len(want))
				}
				f := filter.Filter{Path: []string{"customer", "id"}, Value: "7"}
				if state != "" {
					f.Exhaustion = dlq.Exhaustion(state)
				}
				for _, asc := range []bool{false, true} {
					var got []string
					var after *store.Position
					for range len(want) + 1 {
						page, err := s.List(ctx, &store.ListParams{Filter: f, Limit: 7, Sort: store.Sort{Field: store.SortCreated, Asc: asc}, After: after})
						if err != nil {
							t.Fatal(err)
						}
						for _, r := range page.Records {
							got = append(got, r.ID)
						}
						if !page.HasMore {
							break
						}
						after = &store.Position{ID: got[len(got)-1]}
					}
					wantOrder := slices.Clone(want)
					if !asc {
						slices.Reverse(wantOrder)
					}
					if !slices.Equal(got, wantOrder) {
						t.Errorf("%s, exhaustion %q, asc %t: paged %d records, want %d in order", name, state, asc, len(got), len(wantOrder))
					}
					// Back from the last page's first record: the page before it.
					if len(got) > 10 {
						page, err := s.List(ctx, &store.ListParams{Filter: f, Limit: 7, Sort: store.Sort{Field: store.SortCreated, Asc: asc},
							After: &store.Position{ID: got[10]}, Backward: true})
						if err != nil {
							t.Fatal(err)
						}
						var back []string
						for _, r := range page.Records {
							back = append(back, r.ID)
						}
						if !slices.Equal(back, got[3:10]) || !page.HasMore {
							t.Errorf("%s, exhaustion %q, asc %t: backward from the 11th: %v (more: %t), want %v", name, state, asc, back, page.HasMore, got[3:10])
						}
					}
				}
			}
		})
	}
}

// indexScan matches a plain index scan of a plan (not a bitmap's).
var indexScan = regexp.MustCompile(`(?m)(^|-> +)Index (Only )?Scan`)

// seqScan matches a sequential scan of a plan and its estimated cost.
var seqScan = regexp.MustCompile(`Seq Scan on (\S+) .*cost=[0-9.]+\.\.([0-9.]+)`)

// readsRows says plan scans a partition that holds rows sequentially
// (an empty one, never analyzed, costs nothing: a week made ahead).
func readsRows(plan string) bool {
	for _, m := range seqScan.FindAllStringSubmatch(plan, -1) {
		if c, _ := strconv.ParseFloat(m[2], 64); c > 1 {
			return true
		}
	}
	return false
}

// Every week's payload index, those of the migration and those made
// since, writes its entries as records are stored (migration 00220): a
// pending list would be read whole by every search of the index.
func TestPayloadIndexesKeepNoPendingList(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	made, err := store.New(pool).EnsureWeeks(ctx, testdate.Now().Add(-30*24*time.Hour), 3)
	if err != nil || len(made) == 0 {
		t.Fatalf("weeks made: %v, %v; want some", made, err)
	}
	rows, err := pool.Query(ctx, `SELECT c.relname::text, coalesce(array_to_string(c.reloptions, ','), '')
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'redrive_record_payload'::regclass ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	indexes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Name, Options string }])
	if err != nil {
		t.Fatal(err)
	}
	// The DEFAULT partition's, the migration's five weeks and the older ones.
	if len(indexes) < 1+5+len(made) {
		t.Errorf("%d payload indexes, want at least %d", len(indexes), 1+5+len(made))
	}
	for _, ix := range indexes {
		if !strings.Contains(ix.Options, "fastupdate=off") {
			t.Errorf("%s: options %q, want fastupdate=off", ix.Name, ix.Options)
		}
	}
}
