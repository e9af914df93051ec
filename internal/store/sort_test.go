package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// Every order the list offers is read from an index, forward and backward,
// from the start and from a cursor in either segment, with the filters it
// is offered with (any in the default order, a queue in the others): no
// plan sorts the records, which at a million records would read them all
// for one page.
func TestEverySortIsReadFromAnIndex(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	id := dlq.NewID(testdate.Now())
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// Any filter in the default order; a queue (and what narrows within it)
	// in the others, which need one.
	filters := map[string]filter.Filter{"none": {}, "state": {State: dlq.StateDiscarded}, "error type": {ErrorType: "db.timeout"},
		"queue": {Queue: "orders"}, "queue and state": {Queue: "orders", State: dlq.StateRetryable},
		"queue and error type": {Queue: "orders", ErrorType: "db.timeout"}}
	positions := map[string]*store.Position{"start": nil, "keyed": {ID: id, Attempt: 3, At: at}, "null": {ID: id, Null: true}}
	for _, field := range store.SortFields {
		for _, asc := range []bool{true, false} {
			for fname, f := range filters {
				if field != store.SortCreated && f.Queue == "" {
					continue
				}
				for pname, pos := range positions {
					for _, back := range []bool{false, true} {
						if pos == nil && back {
							continue
						}
						p := &store.ListParams{Filter: f, Limit: 50, Sort: store.Sort{Field: field, Asc: asc}, After: pos, Backward: back}
						for _, q := range store.ListScans(p) {
							plan := explainWithoutSorts(t, ctx, pool, q.SQL, q.Args)
							if sortNode.MatchString(plan) || strings.Contains(plan, "Seq Scan") {
								t.Errorf("sort %s asc=%t, filter %s, from %s, backward %t: the plan reads the table or sorts:\n%s",
									field, asc, fname, pname, back, plan)
							}
							// The index that gives the order, on the table
							// that holds the key (migration 00180).
							want := wantIndex(field, fname, q.SQL)
							if want != "" && !strings.Contains(plan, want) {
								t.Errorf("sort %s asc=%t, filter %s, from %s, backward %t: the plan does not read %s:\n%s",
									field, asc, fname, pname, back, want, plan)
							}
						}
					}
				}
			}
		}
	}
}

// wantIndex is the index a listing's scan must read: for a queue, a sort
// key of the lifecycle from its (queue, key, id) index, the rows without a
// next retry (by id) from the wide row's (queue, id); a state in the
// default order from the lifecycle's (state, id); "" when several would do
// (a second filter has indexes of its own).
func wantIndex(field store.SortField, fname, sql string) string {
	switch {
	case fname != "queue" && fname != "state":
		return ""
	case field == store.SortAttempt:
		return "redrive_lifecycle_attempt"
	case field == store.SortNextRetry && strings.Contains(sql, "next_retry_at IS NOT NULL"):
		return "redrive_lifecycle_next_retry"
	case field == store.SortNextRetry || field == store.SortFailed && strings.Contains(sql, "failed_at IS NULL"):
		return "redrive_record_queue_id"
	case field == store.SortFailed:
		return "redrive_record_failed_at"
	case fname == "state":
		return "redrive_lifecycle_state_id"
	}
	return ""
}

// sortNode matches a Sort step of a plan (not the Sort Key of a Merge
// Append, which merges the partitions' index scans in order).
var sortNode = regexp.MustCompile(`(?m)(^|-> +)(Incremental )?Sort +\(`)

// explainWithoutSorts is Postgres's plan for query when sorting and
// sequential scans cost as much as they can: if any plan reads the rows in
// order from an index, that is the one.
func explainWithoutSorts(t *testing.T, ctx context.Context, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, query string, args []any) string {
	t.Helper()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, set := range []string{"enable_sort", "enable_incremental_sort", "enable_seqscan", "enable_bitmapscan"} {
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL %s = off", set)); err != nil {
			t.Fatal(err)
		}
	}
	return explain(t, ctx, tx, query, args...)
}

// explain is Postgres's plan for statement, run on db (a pool or a
// transaction); statement may start with EXPLAIN's options, such as
// "(ANALYZE, BUFFERS) ".
func explain(t *testing.T, ctx context.Context, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, statement string, args ...any) string {
	t.Helper()
	rows, err := db.Query(ctx, "EXPLAIN "+statement, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", statement, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return parentIndexNames(t, ctx, db, strings.Join(lines, "\n"))
}

// parentIndexNames names, in plan, each partition's index (named by
// Postgres: redrive_lifecycle_w20261123_state_id_idx) by the partitioned
// table's index it is a partition of (redrive_lifecycle_state_id), so that
// a test can say which index a plan reads in every partition.
func parentIndexNames(t *testing.T, ctx context.Context, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, plan string) string {
	t.Helper()
	rows, err := db.Query(ctx, `SELECT c.relname::text, p.relname::text FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
		WHERE c.relkind = 'i' ORDER BY length(c.relname) DESC`)
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Child, Parent string }])
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pairs {
		plan = strings.ReplaceAll(plan, " "+p.Child+" ", " "+p.Parent+" ")
	}
	return plan
}

// failed_at is the latest failure's time: set on insert (created_at when the
// error's time is unknown), moved when a repeat failure joins, and filled
// for records stored before it existed.
func TestFailedAtFollowsTheLatestFailure(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	known, unknown := newRecord(1, "orders"), newRecord(2, "orders")
	known.Errors[0].OccurredAt = known.CreatedAt.Add(-time.Hour)
	unknown.Errors[0].OccurredAt = time.Time{}
	if _, err := s.InsertRecords(ctx, []dlq.Record{known, unknown}); err != nil {
		t.Fatal(err)
	}
	failedAt := func(id string) *time.Time {
		var at *time.Time
		if err := pool.QueryRow(ctx, "SELECT failed_at FROM redrive_record WHERE id = $1", id).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	if got := failedAt(known.ID); got == nil || !got.Equal(known.Errors[0].OccurredAt) {
		t.Errorf("inserted: failed_at %v, want the error's %v", got, known.Errors[0].OccurredAt)
	}
	if got := failedAt(unknown.ID); got == nil || !got.Equal(unknown.CreatedAt) {
		t.Errorf("inserted with an unknown error time (COPY of an encoded batch): failed_at %v, want created_at %v", got, unknown.CreatedAt)
	}
	again := known.CreatedAt.Add(time.Minute)
	if _, err := s.UpdateLocked(ctx, []string{known.ID}, func(m map[string]*dlq.Record) ([]*dlq.Record, error) {
		r := m[known.ID]
		r.Errors = append(r.Errors, dlq.ErrorEntry{Attempt: 2, Type: "db.down", Code: dlq.CodeRetry, OccurredAt: again})
		r.Attempt = 2
		return []*dlq.Record{r}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := failedAt(known.ID); got == nil || !got.Equal(again) {
		t.Errorf("after a repeat failure: failed_at %v, want %v", got, again)
	}
	// As stored before the column existed: the fill gives them what ingest would.
	if _, err := pool.Exec(ctx, "UPDATE redrive_record_data SET failed_at = NULL"); err != nil {
		t.Fatal(err)
	}
	last, n, err := s.FillFailedAt(ctx, "", 1)
	if err != nil || n != 1 || last == "" {
		t.Fatalf("FillFailedAt(1) = %q, %d, %v", last, n, err)
	}
	if last, n, err = s.FillFailedAt(ctx, last, 10); err != nil || n != 1 || last == "" {
		t.Fatalf("FillFailedAt(10) = %q, %d, %v; want the one left", last, n, err)
	}
	if last, n, err = s.FillFailedAt(ctx, last, 10); err != nil || n != 0 || last != "" {
		t.Fatalf("FillFailedAt past the end = %q, %d, %v; want nothing", last, n, err)
	}
	if got := failedAt(known.ID); got == nil || !got.Equal(again) {
		t.Errorf("filled: failed_at %v, want %v", got, again)
	}
	if got := failedAt(unknown.ID); got == nil || !got.Equal(unknown.CreatedAt) {
		t.Errorf("filled, error time unknown: failed_at %v, want created_at %v", got, unknown.CreatedAt)
	}
}

// A queue and a time range (the list's queue+since) are counted from the
// (queue, created_at) index, both bounds in its condition: not by
// intersecting the queue's and the time's indexes and visiting a heap page
// per match, which at millions of records spends the counting budget.
func TestQueueSinceIsCountedFromItsIndex(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	f, err := filter.ParseQuery(url.Values{"queue": {"orders"}, "since": {"2026-02-13T11:00:00Z"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Rows in this week's partition, as a running Redrive has them: the
	// planner picks among a partition's indexes by its statistics.
	var recs []dlq.Record
	for i := range 10_000 {
		r := newRecord(int64(i), fmt.Sprintf("q%d", i%20))
		if i%20 == 0 {
			r.Queue = "orders"
		}
		r.CreatedAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i*7919%10_000) * 9 * time.Minute)
		recs = append(recs, r)
	}
	if _, err := store.New(pool).InsertRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE redrive_record_data, redrive_lifecycle"); err != nil {
		t.Fatal(err)
	}
	q, args := store.CountScan(&f)
	plan := explainWithoutSorts(t, ctx, pool, q, args)
	if !strings.Contains(plan, "redrive_record_queue_created") || !regexp.MustCompile(`Index Cond: \(\(queue = .*\) AND \(created_at >= .*\)\)`).MatchString(plan) {
		t.Errorf("queue+since is not counted from (queue, created_at):\n%s", plan)
	}
}

// The planner knows that error types and record types belong to a topic
// (migration 00172): for queue+error_type it expects about as many records
// as match, not the product of both selectivities, which made it intersect
// bitmaps and sort every match for one page.
func TestPlannerKnowsErrorTypesBelongToATopic(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	var recs []dlq.Record
	for i := range 4000 {
		q := i % 20
		r := newRecord(int64(i), fmt.Sprintf("q%d", q))
		r.Type = fmt.Sprintf("t%d", q)
		r.Errors[0].Type = fmt.Sprintf("err%d.%d", q, i/20%5)
		recs = append(recs, r)
	}
	if _, err := s.InsertRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE redrive_record_data, redrive_lifecycle"); err != nil {
		t.Fatal(err)
	}
	var raw []byte
	if err := pool.QueryRow(ctx, `EXPLAIN (FORMAT JSON) SELECT 1 FROM redrive_record WHERE queue = 'q3' AND error_type = 'err3.2'`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var plan []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		} `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &plan); err != nil || len(plan) == 0 {
		t.Fatalf("plan %s: %v", raw, err)
	}
	// 40 records match; independent columns would give 40 × 1/20 = 2.
	if got := plan[0].Plan.Rows; got < 20 || got > 80 {
		t.Errorf("queue+error_type: the planner expects %.0f records, 40 match", got)
	}
}
