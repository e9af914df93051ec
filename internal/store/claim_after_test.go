package store_test

import (
	"context"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// A claim from a place in due order (After) takes the records after it, in
// due time then id order, ties included; records before the place that are
// still due are left to a claim from the start.
func TestAClaimAfterAPlaceTakesWhatComesAfterIt(t *testing.T) {
	s := setup(t)
	ctx := context.Background()
	base := testdate.Now().UTC().Truncate(time.Microsecond).Add(-time.Hour)
	at := func(r dlq.Record, due time.Time) dlq.Record { r.NextRetryAt = &due; return r }
	// In due order: early, then three tied at base (by id), then late.
	early := at(newRecord(1, "orders"), base.Add(-time.Minute))
	tied := []dlq.Record{at(newRecord(2, "orders"), base), at(newRecord(3, "orders"), base), at(newRecord(4, "orders"), base)}
	late := at(newRecord(5, "orders"), base.Add(time.Minute))
	if _, err := s.InsertRecords(ctx, []dlq.Record{late, tied[2], early, tied[0], tied[1]}); err != nil {
		t.Fatal(err)
	}
	now := base.Add(time.Hour)
	claimAfter := func(after *store.DueKey) *store.Claim {
		t.Helper()
		c, err := s.ClaimDue(ctx, &store.ClaimParams{Queue: "orders", Now: now, Limit: 2, Owner: "test", Lease: time.Minute, After: after})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ids := func(c *store.Claim) string {
		var out []string
		for _, r := range c.Records {
			out = append(out, r.ID)
		}
		return strings.Join(out, ",")
	}
	want := func(rs ...dlq.Record) string {
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return strings.Join(out, ",")
	}

	first := claimAfter(nil)
	if got := ids(first); !sameSet(got, want(early, tied[0])) {
		t.Fatalf("the first claim took %s, want %s", got, want(early, tied[0]))
	}
	if last := first.Last(); !last.At.Equal(base) || last.ID != tied[0].ID {
		t.Fatalf("the first claim ends at %v %s, want %v %s", last.At, last.ID, base, tied[0].ID)
	}
	// A record due before the place, stored after the first claim.
	straggler := at(newRecord(6, "orders"), base.Add(-2*time.Minute))
	if _, err := s.InsertRecords(ctx, []dlq.Record{straggler}); err != nil {
		t.Fatal(err)
	}
	from := first.Last()
	second := claimAfter(&from)
	if got := ids(second); !sameSet(got, want(tied[1], tied[2])) {
		t.Fatalf("the claim after the first took %s, want the rest of the tie %s", got, want(tied[1], tied[2]))
	}
	from = second.Last()
	third := claimAfter(&from)
	if ids(third) != want(late) || third.Last().ID != late.ID {
		t.Fatalf("the claim after the tie took %s, want %s", ids(third), want(late))
	}
	// The straggler, due before the place, is not after it: a claim from
	// the start takes it.
	from = third.Last()
	if c := claimAfter(&from); len(c.Records) != 0 {
		t.Fatalf("the claim after the last record took %s", ids(c))
	}
	if c := claimAfter(nil); ids(c) != want(straggler) {
		t.Fatalf("the claim from the start took %q, want the straggler %s", ids(c), straggler.ID)
	}
}

// sameSet reports whether two comma-separated lists hold the same items.
func sameSet(a, b string) bool {
	as, bs := strings.Split(a, ","), strings.Split(b, ",")
	slices.Sort(as)
	slices.Sort(bs)
	return slices.Equal(as, bs)
}

// A claim from a place in a backlog whose statistics were taken while all
// of it was due (as autovacuum may leave them) still reads the weeks' due
// indexes in order from the place, instead of sorting every due record.
func TestAClaimAfterAPlaceReadsTheDueIndexInOrder(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	recs := make([]dlq.Record, 5000)
	due := testdate.Now().UTC().Truncate(time.Microsecond).Add(-time.Minute)
	for i := range recs {
		recs[i] = newRecord(int64(i), "orders")
		recs[i].NextRetryAt = &due // one due time for all, as a bulk retry sets it
	}
	if _, err := s.InsertRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE redrive_record_data, redrive_lifecycle"); err != nil {
		t.Fatal(err)
	}
	now := due.Add(time.Minute)
	var after *store.DueKey
	for range 6 {
		c, err := s.ClaimDue(ctx, &store.ClaimParams{Queue: "orders", Now: now, Limit: 500, Owner: "test", Lease: time.Minute, After: after})
		if err != nil || len(c.Records) != 500 {
			t.Fatalf("claimed %d records, %v; want 500", len(c.Records), err)
		}
		last := c.Last()
		after = &last
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // the EXPLAIN ANALYZE's claim is undone
	p := withoutEmptyScans(explain(t, ctx, tx, "(ANALYZE, BUFFERS) "+store.ClaimAfterSQL, "orders", now, 500, false, 0,
		"00000000-0000-7000-8000-000000000000", "test", 60000, int64(math.MaxInt64), after.At, after.ID))
	// The claim sorts what it locked by due order (its bytes' running sum);
	// what must not be sorted is the due rows it reads (d).
	if sortsDueRows.MatchString(p) || !strings.Contains(p, "redrive_lifecycle_next_retry") || !strings.Contains(p, "rows=500") {
		t.Errorf("a claim after a place does not read the due index in order:\n%s", p)
	}
}

// sortsDueRows matches a plan's Sort of the due rows a claim reads.
var sortsDueRows = regexp.MustCompile(`Sort  \(.*\n\s*Sort Key: d\.`)
