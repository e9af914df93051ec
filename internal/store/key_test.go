package store_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
)

// The key filter finds records by keys of any length, byte for byte, and is
// served by the key's prefix index: the index holds the key's first 1,024
// bytes, never more, so that no key is too long for it.
func TestKeyFilterFindsLongKeysThroughThePrefixIndex(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	long := randomText(3000) // random: Postgres cannot compress it into an index entry
	var batch []dlq.Record
	for i := range 3000 {
		r := newRecord(int64(i), "orders")
		// Distinct from their first bytes, so that the prefix tells them apart.
		r.Key = fmt.Appendf(nil, "%d-%s", i%1000, long)
		batch = append(batch, r)
	}
	if res, err := s.InsertRecords(ctx, batch); err != nil || res.N != len(batch) {
		t.Fatalf("InsertRecords = %+v, %v", res, err)
	}
	key := fmt.Appendf(nil, "%d-%s", 7, long)
	page, err := s.List(ctx, &store.ListParams{Filter: filter.Filter{Key: key}, Limit: 10})
	// The total is counted within a budget (countBudget): on a busy machine
	// it is the planner's estimate, and says so.
	if err != nil || len(page.Records) != 3 || page.Total != 3 && !page.TotalEstimated {
		t.Fatalf("List by key: %d records, total %d (estimated: %t), %v; want 3", len(page.Records), page.Total, page.TotalEstimated, err)
	}
	for _, r := range page.Records {
		if !bytes.Equal(r.Key, key) {
			t.Fatalf("record %s has another key", r.ID)
		}
	}
	if _, err := pool.Exec(ctx, "ANALYZE redrive_record_data, redrive_lifecycle"); err != nil {
		t.Fatal(err)
	}
	cond, args := store.Where(&filter.Filter{Key: key}, nil)
	if text := explain(t, ctx, pool, "SELECT id FROM redrive_record WHERE "+cond+" ORDER BY id DESC LIMIT 50", args...); !strings.Contains(text, "redrive_record_key_prefix") {
		t.Errorf("the key filter does not use the key's prefix index:\n%s", text)
	}
}
