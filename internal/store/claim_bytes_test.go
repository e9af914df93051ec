package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// A claim with MaxBytes takes records in due order while the keys and
// values before them add up to less than MaxBytes: it holds at most
// MaxBytes and one more record, never fewer than one, says it was cut while
// it left records due, and leaves those as they were.
func TestAClaimStopsAtItsBytes(t *testing.T) {
	s := setup(t)
	ctx := context.Background()
	base := testdate.Now().UTC().Truncate(time.Microsecond).Add(-time.Hour)
	sizes := []int{1000, 1000, 1000, 5000, 1000} // values; the keys add a few bytes
	var recs []dlq.Record
	for i, n := range sizes {
		r := newRecord(int64(i), "orders")
		due := base.Add(time.Duration(i) * time.Minute)
		r.Value, r.NextRetryAt = []byte(strings.Repeat("x", n)), &due
		recs = append(recs, r)
	}
	if _, err := s.InsertRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	claim := func() *store.Claim {
		t.Helper()
		c, err := s.ClaimDue(ctx, &store.ClaimParams{Queue: "orders", Now: base.Add(time.Hour), Limit: 10, Owner: "test",
			Lease: time.Minute, MaxBytes: 2500})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	check := func(c *store.Claim, cut bool, want ...dlq.Record) {
		t.Helper()
		var got, wantIDs []string
		for _, r := range c.Records {
			got = append(got, r.ID)
		}
		for _, r := range want {
			wantIDs = append(wantIDs, r.ID)
		}
		if !sameSet(strings.Join(got, ","), strings.Join(wantIDs, ",")) || c.Cut() != cut {
			t.Fatalf("claimed %v (cut %v), want %v (cut %v)", got, c.Cut(), wantIDs, cut)
		}
	}

	// 0, ~1,000 and ~2,000 bytes before the first three: the fourth would
	// start past 2,500.
	check(claim(), true, recs[0], recs[1], recs[2])
	if r, err := s.Get(ctx, recs[3].ID); err != nil || r.State != dlq.StateRetryable || r.NextRetryAt == nil || r.Attempt != 1 {
		t.Fatalf("the record the claim left is %+v, %v; want it retryable and due as it was", r, err)
	}
	// A record larger than MaxBytes is claimed on its own.
	check(claim(), true, recs[3])
	check(claim(), false, recs[4])
	check(claim(), false)
}
