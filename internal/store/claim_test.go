package store_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
)

// claim claims every record of orders due at now.
func claim(t *testing.T, s *store.Store, now time.Time, lease time.Duration) *store.Claim {
	t.Helper()
	c, err := s.ClaimDue(context.Background(), &store.ClaimParams{Queue: "orders", Now: now, Limit: 100, Owner: "test", Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func get(t *testing.T, s *store.Store, id string) *dlq.Record {
	t.Helper()
	r, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestClaimIsCommittedAndSettledWithItsToken(t *testing.T) {
	s := setup(t)
	ctx := context.Background()
	a, b := newRecord(1, "orders"), newRecord(2, "orders")
	if _, err := s.InsertRecords(ctx, []dlq.Record{a, b}); err != nil {
		t.Fatal(err)
	}
	now := a.NextRetryAt.Add(time.Second)
	c := claim(t, s, now, time.Minute)
	if len(c.Records) != 2 || c.Token == "" || c.Records[0].Attempt != 2 {
		t.Fatalf("claimed %d records (token %q, attempt %d), want 2 at attempt 2", len(c.Records), c.Token, c.Records[0].Attempt)
	}
	// Committed at once: another claimant sees nothing due, and a reader
	// sees the records redelivered.
	if again := claim(t, s, now, time.Minute); len(again.Records) != 0 {
		t.Fatalf("a second claim took %d claimed records", len(again.Records))
	}
	// Under completion: redelivered (the default) the claim completes the
	// records as it takes them, in the same write; until the claim is
	// settled a reader sees them in flight, as they were before it.
	if r := get(t, s, a.ID); r.State != dlq.StateRetryable || r.CompletedBy != "" || r.CompletedAt != nil ||
		!r.InFlight || r.Attempt != 1 || r.RedeliveredAt != nil || r.AckDueAt != nil {
		t.Fatalf("claimed record shown as %s by %q at %v, in flight %t, attempt %d, redelivered %v, ack due %v; want as before, in flight",
			r.State, r.CompletedBy, r.CompletedAt, r.InFlight, r.Attempt, r.RedeliveredAt, r.AckDueAt)
	}
	// What is stored is what the claim wrote: a repeat failure of this
	// redelivery that arrives before the claim is settled must find it.
	if _, err := s.UpdateLocked(ctx, []string{a.ID}, func(rs map[string]*dlq.Record) ([]*dlq.Record, error) {
		if r := rs[a.ID]; r.State != dlq.StateCompleted || r.CompletedBy != dlq.CompletedByRedelivered || r.Attempt != 2 ||
			r.CompletedAt == nil || !r.CompletedAt.Equal(now) || r.NextRetryAt != nil {
			t.Errorf("a write reads the claimed record as %s by %q attempt %d completed %v next %v; want it as stored: completed, attempt 2",
				r.State, r.CompletedBy, r.Attempt, r.CompletedAt, r.NextRetryAt)
		}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}

	// a's produce failed; b's succeeded.
	f := dlq.DeliveryFailure{Reason: dlq.ReasonUnknownTopic, Message: "no such topic", FailedAt: now, Failures: 1,
		NextAttemptAt: now.Add(5 * time.Second)}
	if err := s.Settle(ctx, c, []store.FailedDelivery{{ID: a.ID, Failure: f}}, now); err != nil {
		t.Fatal(err)
	}
	ra, rb := get(t, s, a.ID), get(t, s, b.ID)
	if ra.State != dlq.StateRetryable || ra.Attempt != 1 || !ra.NextRetryAt.Equal(f.NextAttemptAt) || ra.RedeliveredAt != nil ||
		ra.RedeliveryFailure == nil || *ra.RedeliveryFailure != f || ra.CompletedAt != nil || ra.CompletedBy != "" || ra.InFlight {
		t.Fatalf("failed record put back as %s attempt %d next %v redelivered %v failure %+v completed %v by %q in flight %t",
			ra.State, ra.Attempt, ra.NextRetryAt, ra.RedeliveredAt, ra.RedeliveryFailure, ra.CompletedAt, ra.CompletedBy, ra.InFlight)
	}
	if rb.State != dlq.StateCompleted || rb.CompletedBy != dlq.CompletedByRedelivered || rb.Attempt != 2 || rb.RedeliveryFailure != nil || rb.InFlight {
		t.Fatalf("delivered record: %s by %q attempt %d failure %+v in flight %t", rb.State, rb.CompletedBy, rb.Attempt,
			rb.RedeliveryFailure, rb.InFlight)
	}
	// Settling twice is a lost lease: the claim is gone.
	if err := s.Settle(ctx, c, nil, now); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("second settle: %v, want ErrLeaseLost", err)
	}
	// The next claim keeps the failure in sight while it runs, and
	// remembers how many came before; a produce that succeeds clears it.
	later := f.NextAttemptAt
	c = claim(t, s, later, time.Minute)
	if r := get(t, s, a.ID); len(c.Records) != 1 || c.PriorFailures(a.ID) != 1 || r.RedeliveryFailure == nil || !r.InFlight {
		t.Fatalf("reclaim: %d records, prior failures %d, failure shown %+v, in flight %t", len(c.Records), c.PriorFailures(a.ID),
			r.RedeliveryFailure, r.InFlight)
	}
	if err := s.Settle(ctx, c, nil, later); err != nil {
		t.Fatal(err)
	}
	if r := get(t, s, a.ID); r.RedeliveryFailure != nil || r.State != dlq.StateCompleted || r.Attempt != 2 || r.InFlight ||
		r.RedeliveredAt == nil || !r.RedeliveredAt.Equal(later) {
		t.Fatalf("after a produce that succeeded: failure %+v, %s attempt %d, in flight %t, redelivered %v",
			r.RedeliveryFailure, r.State, r.Attempt, r.InFlight, r.RedeliveredAt)
	}
}

func TestRescueReturnsOnlyUnchangedRecordsOfExpiredClaims(t *testing.T) {
	s := setup(t)
	ctx := context.Background()
	kept, joined, retried := newRecord(1, "orders"), newRecord(2, "orders"), newRecord(3, "orders")
	if _, err := s.InsertRecords(ctx, []dlq.Record{kept, joined, retried}); err != nil {
		t.Fatal(err)
	}
	now := kept.NextRetryAt.Add(time.Second)
	c := claim(t, s, now, 30*time.Second)
	if len(c.Records) != 3 {
		t.Fatalf("claimed %d", len(c.Records))
	}
	// While the claim runs, a repeat failure joins one record (its
	// redelivery was consumed and failed fast), and an operator's retry of
	// another is refused: it is being redelivered.
	_, err := s.UpdateLocked(ctx, []string{joined.ID}, func(rs map[string]*dlq.Record) ([]*dlq.Record, error) {
		r := rs[joined.ID]
		next := now.Add(time.Hour)
		r.State, r.NextRetryAt = dlq.StateRetryable, &next
		r.Errors = append(r.Errors, dlq.ErrorEntry{Attempt: 2, Type: "db.down", Code: dlq.CodeRetry, OccurredAt: now})
		return []*dlq.Record{r}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RetryRecord(ctx, &store.RetryParams{ID: retried.ID}); !errors.Is(err, store.ErrInFlight) {
		t.Fatalf("retrying a record being redelivered: %v, want ErrInFlight", err)
	}

	// Not expired yet: nothing is rescued.
	if got, err := s.RescueExpired(ctx, now.Add(29*time.Second)); err != nil || len(got) != 0 {
		t.Fatalf("rescued %v (%v) before the lease passed", got, err)
	}
	// The holder died; after the lease the untouched record is put back as
	// it was, due at once, and the one a repeat failure joined is left alone.
	later := now.Add(31 * time.Second)
	got, err := s.RescueExpired(ctx, later)
	if err != nil || len(got) != 2 || got[0].ID == joined.ID || got[1].ID == joined.ID {
		t.Fatalf("rescued %v (%v), want the 2 records nothing else changed", got, err)
	}
	if r := get(t, s, kept.ID); r.State != dlq.StateRetryable || r.Attempt != 1 || !r.NextRetryAt.Equal(later) ||
		r.CompletedAt != nil || r.CompletedBy != "" || r.InFlight {
		t.Fatalf("rescued record: %s attempt %d next %v completed %v by %q in flight %t; want retryable, attempt 1, due at once",
			r.State, r.Attempt, r.NextRetryAt, r.CompletedAt, r.CompletedBy, r.InFlight)
	}
	if r := get(t, s, joined.ID); r.State != dlq.StateRetryable || r.Attempt != 2 || !r.NextRetryAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("joined record after the rescue: %s attempt %d next %v; want the repeat failure's outcome kept", r.State, r.Attempt, r.NextRetryAt)
	}
	// The late holder's settle finds its claim gone and changes nothing.
	f := dlq.DeliveryFailure{Reason: dlq.ReasonTimeout, FailedAt: later, Failures: 1, NextAttemptAt: later.Add(time.Hour)}
	if err := s.Settle(ctx, c, []store.FailedDelivery{{ID: kept.ID, Failure: f}}, later); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("late settle: %v, want ErrLeaseLost", err)
	}
	if r := get(t, s, kept.ID); r.RedeliveryFailure != nil || !r.NextRetryAt.Equal(later) {
		t.Fatalf("a late settle changed a rescued record: %+v next %v", r.RedeliveryFailure, r.NextRetryAt)
	}
}

// Settling finds the records whose produce failed by their ids, however many
// completed records the table holds (claims complete records as they take
// them) and however stale the planner's statistics are: the plan reads the
// primary key, never the completed records. A scan of them made every settle
// cost more the longer the scheduler ran (statistics from before the records
// completed say there are none), and cut its throughput by a third.
func TestSettleFindsFailedRecordsByTheirIds(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	recs := make([]dlq.Record, 5000)
	for i := range recs {
		recs[i] = newRecord(int64(i), "orders")
	}
	if _, err := s.InsertRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	// Statistics taken while every record was retryable, as autovacuum
	// may still have them.
	if _, err := pool.Exec(ctx, "ANALYZE redrive_record_data, redrive_lifecycle"); err != nil {
		t.Fatal(err)
	}
	now := recs[len(recs)-1].NextRetryAt.Add(time.Second)
	var last *store.Claim
	for {
		c := claim(t, s, now, time.Minute)
		if len(c.Records) == 0 {
			break
		}
		if last != nil {
			if err := s.Settle(ctx, last, nil, now); err != nil {
				t.Fatal(err)
			}
		}
		last = c
	}
	for _, failed := range []int{0, 3} {
		ids, states, failures := make([]string, failed), make([]string, failed), make([][]byte, failed)
		times, next, discard := make([]*time.Time, failed), make([]*time.Time, failed), make([]bool, failed)
		for i := range failed {
			ids[i], states[i], failures[i], next[i] = last.Records[i].ID, "retryable", []byte(`{}`), &now
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p := withoutEmptyScans(explain(t, ctx, tx, "(ANALYZE, BUFFERS) "+store.SettleSQL, last.Token, ids, states, times, failures, next,
			now, now, failed, discard, []string{}))
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(p, "redrive_lifecycle_completed") || strings.Contains(p, "redrive_lifecycle_state_id") ||
			strings.Contains(p, "Seq Scan on redrive_record_data") || strings.Contains(p, "Seq Scan on redrive_lifecycle") || failed > 0 && !strings.Contains(p, "redrive_lifecycle_pkey") {
			t.Errorf("settling a claim with %d failed records reads more than their ids:\n%s", failed, p)
		}
	}
	// The rescue, every second, with nothing expired and with the last claim
	// expired.
	for _, at := range []time.Time{now, now.Add(time.Hour)} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p := withoutEmptyScans(explain(t, ctx, tx, "(ANALYZE, BUFFERS) "+store.RescueSQL, at))
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(p, "redrive_lifecycle_completed") || strings.Contains(p, "redrive_lifecycle_state_id") ||
			strings.Contains(p, "Seq Scan on redrive_record_data") || strings.Contains(p, "Seq Scan on redrive_lifecycle") {
			t.Errorf("the rescue at %v reads more than the records of expired claims:\n%s", at.Sub(now), p)
		}
	}
}

// A redelivery writes the records' lifecycles alone (migration 00180): its
// claim, a settle that puts a failed produce back, one that discards a
// record with nowhere to go, an expired claim's rescue and a produce that
// cleared a failure leave every wide row (key, value, headers, errors,
// payload) as ingest wrote it — the same row version.
func TestARedeliveryNeverWritesTheWideRow(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	recs := make([]dlq.Record, 6)
	ids := make([]string, len(recs))
	for i := range recs {
		recs[i] = newRecord(int64(i), "orders")
		ids[i] = recs[i].ID
	}
	if _, err := s.InsertRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	versions := func() (wide, lifecycle string) {
		t.Helper()
		err := pool.QueryRow(ctx, `SELECT (SELECT string_agg(xmin::text || ctid::text, ',' ORDER BY id) FROM redrive_record_data WHERE id = ANY($1)),
			(SELECT string_agg(xmin::text || ctid::text, ',' ORDER BY id) FROM redrive_lifecycle WHERE id = ANY($1))`, ids).Scan(&wide, &lifecycle)
		if err != nil {
			t.Fatal(err)
		}
		return wide, lifecycle
	}
	wide, lifecycle := versions()
	now := recs[len(recs)-1].NextRetryAt.Add(time.Second)
	failure := func(at time.Time) dlq.DeliveryFailure {
		return dlq.DeliveryFailure{Reason: dlq.ReasonBroker, Message: "down", FailedAt: at, Failures: 1, NextAttemptAt: at}
	}
	// Claimed, then settled: two produced, one failed (put back), one
	// discarded as not routable.
	c := claim(t, s, now, time.Minute)
	if len(c.Records) != len(recs) {
		t.Fatalf("claimed %d records, want %d", len(c.Records), len(recs))
	}
	if err := s.Settle(ctx, c, []store.FailedDelivery{{ID: ids[0], Failure: failure(now)},
		{ID: ids[1], Failure: failure(now), Discard: true}}, now); err != nil {
		t.Fatal(err)
	}
	// The failed one again, produced this time (its failure cleared), and
	// one claim that expires and is rescued.
	now = now.Add(time.Second)
	if c = claim(t, s, now, time.Minute); len(c.Records) != 1 {
		t.Fatalf("claimed %d records again, want the failed one", len(c.Records))
	}
	if err := s.Settle(ctx, c, nil, now); err != nil {
		t.Fatal(err)
	}
	if r := get(t, s, ids[0]); r.RedeliveryFailure != nil || r.State != dlq.StateCompleted {
		t.Fatalf("produced after a failure: %s, failure %+v", r.State, r.RedeliveryFailure)
	}
	if _, err := pool.Exec(ctx, `UPDATE redrive_lifecycle SET state = 'retryable', next_retry_at = $2 WHERE id = $1`, ids[2], now); err != nil {
		t.Fatal(err)
	}
	if c = claim(t, s, now, time.Second); len(c.Records) != 1 {
		t.Fatalf("claimed %d records, want one", len(c.Records))
	}
	if rescued, err := s.RescueExpired(ctx, now.Add(time.Minute)); err != nil || len(rescued) != 1 {
		t.Fatalf("rescued %v, %v; want one", rescued, err)
	}
	if w, l := versions(); w != wide || l == lifecycle {
		t.Errorf("after the redeliveries: wide rows %s (before %s), lifecycles changed %t; want the wide rows untouched",
			w, wide, l != lifecycle)
	}
}

// emptyScan is a scan of an empty partition (this week's neighbours, made
// ahead): the planner reads an empty table sequentially, at no cost.
var emptyScan = regexp.MustCompile(`(?m)^.*Seq Scan on redrive_(lifecycle|record_data)_\w+ .*\((never executed|actual [^)]* rows=0 loops=1)\)\n`)

// withoutEmptyScans is an EXPLAIN ANALYZE plan without the scans of empty
// partitions.
func withoutEmptyScans(plan string) string { return emptyScan.ReplaceAllString(plan+"\n", "") }

// The settle of a claim whose records were all produced, none of them after
// a failure (the usual case), ends the claim and counts it: it reads no
// record table. The other settles and the rescue are planned at every call
// with their values (unnamed statements), never from a plan made once: a
// plan kept for a connection's life was made with the statistics of its
// time, and one made while no record was completed read every completed
// record at each settle once the backlog had drained. The claim is the
// exception: its plan takes no value into account
// (TestAClaimKeepsOnePlanThatReadsByKey).
func TestSettlesArePlannedWithTheirValuesAndClaimsAreNot(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	recs := make([]dlq.Record, 1000)
	for i := range recs {
		recs[i] = newRecord(int64(i), "orders")
	}
	if _, err := store.New(pool).InsertRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	now := recs[len(recs)-1].NextRetryAt.Add(time.Second)
	s, rec := tracedStore(t, pool)
	claimOf := func(limit int) *store.Claim {
		t.Helper()
		c, err := s.ClaimDue(ctx, &store.ClaimParams{Queue: "orders", Now: now, Limit: limit, Owner: "test", Lease: time.Minute})
		if err != nil || len(c.Records) != limit {
			t.Fatalf("claimed %d records, %v; want %d", len(c.Records), err, limit)
		}
		return c
	}
	if err := s.Settle(ctx, claimOf(500), nil, now); err != nil {
		t.Fatal(err)
	}
	c := claimOf(10)
	failed := []store.FailedDelivery{{ID: c.Records[0].ID, Failure: dlq.DeliveryFailure{Reason: "timeout", NextAttemptAt: now.Add(time.Minute)}}}
	if err := s.Settle(ctx, c, failed, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RescueExpired(ctx, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{store.ClaimSQL: "claim", store.EndClaimSQL: "settle of produced records",
		store.SettleSQL: "settle with a failure", store.RescueSQL: "rescue"}
	ran := map[string]int{}
	for _, q := range rec.all() {
		what, ok := want[q.sql]
		if !ok {
			continue
		}
		ran[what]++
		// The mode is the statement's first argument, if it is given.
		described := len(q.args) > 0 && q.args[0] == pgx.QueryExecModeCacheDescribe
		switch q.sql {
		case store.EndClaimSQL:
		case store.ClaimSQL:
			if described {
				t.Errorf("the %s is planned at every call", what)
			}
		default:
			if !described {
				t.Errorf("the %s runs as a prepared statement, whose plan may be kept", what)
			}
		}
	}
	for _, what := range want {
		if ran[what] == 0 {
			t.Errorf("the %s never ran; ran %v", what, ran)
		}
	}
}
