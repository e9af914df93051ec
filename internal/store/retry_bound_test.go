package store_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
)

// A bulk task's batch after its cursor reads both sides of a record from
// the cursor on: the lifecycle's primary key too, not from its first row
// (which made each batch filter out every record the earlier ones took, so
// that a bulk retry slowed down as it went).
func TestABatchAfterItsCursorBoundsBothSides(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.New(t)
	recs := make([]dlq.Record, 300)
	for i := range recs {
		recs[i] = newRecord(int64(i), "orders")
	}
	if _, err := store.New(pool).InsertRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	slices.Sort(ids)

	s, rec := tracedStore(t, pool)
	err := s.WithTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		res, err := s.RetryBatch(ctx, tx, &store.BatchParams{Filter: filter.Filter{Queue: "orders"}, AfterID: ids[199], Limit: 50})
		if err == nil && (res.N != 50 || res.Rows[0].ID != ids[200]) {
			t.Errorf("the batch after the 200th record retried %d records from %s, want 50 from %s", res.N, res.Rows[0].ID, ids[200])
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The view's lifecycle side (alias l_N), read by an index from the cursor.
	lifecycleFromCursor := regexp.MustCompile(`on redrive_lifecycle_\w+ l_\d+ [^\n]*\n\s+Index Cond: [^\n]*\bid > `)
	var batches int
	for _, q := range rec.all() {
		if !strings.Contains(q.sql, "UPDATE redrive_lifecycle") || !strings.Contains(q.sql, "@after_id") {
			continue
		}
		batches++
		if plan := explainWithoutSorts(t, ctx, pool, q.sql, q.args); !lifecycleFromCursor.MatchString(plan) {
			t.Errorf("the batch reads the lifecycle without its cursor:\n%s", plan)
		}
	}
	if batches != 1 {
		t.Fatalf("saw %d batch statements, want 1", batches)
	}
}
