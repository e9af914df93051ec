package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// Activity sums what ingest and settled claims append over the last hour;
// compaction folds the rows (minutes older than two hours into hours) and
// drops what is older than seven days, keeping the sums.
func TestQueueActivityCountsAndCompacts(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	first, second, other := newRecord(1, "orders"), newRecord(2, "orders"), newRecord(3, "payments")
	second.CreatedAt = first.CreatedAt.Add(time.Millisecond)
	if _, err := s.InsertRecords(ctx, []dlq.Record{first, second, other}); err != nil {
		t.Fatal(err)
	}
	now := first.NextRetryAt.Add(time.Second)
	for at, added := range map[time.Time]map[string]int64{
		now:                          {"orders": 3, "payments": 1},
		now.Add(-time.Second):        {"orders": 2, "ignored": 0},
		now.Add(-90 * time.Minute):   {"orders": 100},   // outside the hour, kept by compaction
		now.Add(-3 * time.Hour):      {"orders": 1000},  // folded into its hour
		now.Add(-8 * 24 * time.Hour): {"orders": 10000}, // dropped
	} {
		byKey := map[store.ActivityKey]int64{}
		for q, n := range added {
			byKey[store.ActivityKey{Queue: q}] = n
		}
		if err := s.RecordActivity(ctx, at, byKey); err != nil {
			t.Fatal(err)
		}
	}
	// Claim both orders records; one produce fails: one retried.
	c := claim(t, s, now, time.Minute)
	f := dlq.DeliveryFailure{Reason: dlq.ReasonBroker, Message: "down", FailedAt: now, Failures: 1, NextAttemptAt: now.Add(time.Minute)}
	if err := s.Settle(ctx, c, []store.FailedDelivery{{ID: first.ID, Failure: f}}, now); err != nil {
		t.Fatal(err)
	}
	want := map[string]store.Activity{
		"orders":   {OldestAt: &first.CreatedAt, Added: 5, Retried: 1},
		"payments": {OldestAt: &other.CreatedAt, Added: 1},
		"nothing":  {},
	}
	check := func(when string) {
		t.Helper()
		got, err := s.QueueActivity(ctx, []string{"orders", "payments", "nothing"}, now)
		if err != nil {
			t.Fatal(err)
		}
		for q, w := range want {
			g, ok := got[q]
			if !ok || g.Added != w.Added || g.Retried != w.Retried || (g.OldestAt == nil) != (w.OldestAt == nil) ||
				g.OldestAt != nil && !g.OldestAt.Equal(*w.OldestAt) {
				t.Errorf("%s: %s = %+v (present %t), want %+v", when, q, g, ok, w)
			}
		}
	}
	check("before compaction")
	rows := func() (n int, added, retried int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*), sum(added), sum(retried) FROM redrive_queue_activity`).Scan(&n, &added, &retried); err != nil {
			t.Fatal(err)
		}
		return n, added, retried
	}
	if n, _, _ := rows(); n != 7 {
		t.Fatalf("%d activity rows before compaction, want 7", n)
	}
	if err := s.CompactActivity(ctx, now); err != nil {
		t.Fatal(err)
	}
	check("after compaction")
	// One row per queue and minute (orders now, orders 90 min ago, payments
	// now — the minute of now-1s may be the previous one) and the 3-hour-old
	// one's hour; the 8-day-old minute is gone.
	if n, added, retried := rows(); n < 4 || n > 5 || added != 1106 || retried != 1 {
		t.Errorf("after compaction: %d rows, added %d, retried %d; want 4 or 5 rows, 1106, 1", n, added, retried)
	}
	var hourRows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM redrive_queue_activity WHERE minute = $1 AND added = 1000`,
		now.Add(-3*time.Hour).Truncate(time.Hour)).Scan(&hourRows); err != nil || hourRows != 1 {
		t.Errorf("the 3-hour-old minute's hour: %d rows, %v; want 1", hourRows, err)
	}
	// An empty claim and a claim whose every produce failed retry nothing.
	if err := s.Settle(ctx, &store.Claim{}, nil, now); err != nil {
		t.Fatal(err)
	}
	check("after empty settle")
}

// oldest_at of every queue is one index probe per queue, never a scan of the
// records.
func TestQueueActivityUsesTheIndexes(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	// A queue whose records are all newer than another's: walking the
	// primary key would read the whole older queue first.
	var recs []dlq.Record
	for i := range 20_000 {
		q := "old"
		if i >= 19_000 {
			q = "new"
		}
		recs = append(recs, newRecord(int64(i), q))
	}
	if _, err := s.InsertRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE redrive_record_data, redrive_lifecycle, redrive_queue_activity`); err != nil {
		t.Fatal(err)
	}
	if p := explain(t, ctx, pool, store.QueueActivitySQL, []string{"new", "old"}, testdate.Now()); !strings.Contains(p, "Index Scan using redrive_record_queue_id") ||
		strings.Contains(p, "redrive_record_pkey") || strings.Contains(p, "Seq Scan on redrive_record_data") || strings.Contains(p, "Seq Scan on redrive_lifecycle") {
		t.Errorf("the oldest record is not read by the (queue, id) index:\n%s", p)
	}
}

// The queue list's reads: counts per queue and state from the count table,
// each queue's oldest record by index probes, blocked records of named
// queues only. 20,000 queues time them (logged; make bench holds targets).
func TestQueueCountsAndOldestRecordsOf20000Queues(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	const n = 20_000
	// Ids are UUIDv7, in creation order: the record made first is the oldest.
	older := newRecord(n, "q-00007")
	older.CreatedAt = older.CreatedAt.Add(-time.Hour)
	recs := make([]dlq.Record, 0, n+2)
	for i := range n {
		recs = append(recs, newRecord(int64(i), fmt.Sprintf("q-%05d", i)))
	}
	dead := newRecord(n+1, "q-00007")
	dead.State, dead.Exhaustion, dead.NextRetryAt = dlq.StateDiscarded, dlq.ExhaustionDeadLetter, nil
	dead.DiscardedAt = &dead.CreatedAt
	recs = append(recs, older, dead)
	for start := 0; start < len(recs); start += 5000 {
		if _, err := s.InsertRecords(ctx, recs[start:min(start+5000, len(recs))]); err != nil {
			t.Fatal(err)
		}
	}

	began := testdate.Now()
	counts, err := s.QueueCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("QueueCounts of %d queues: %v", len(counts), testdate.Since(began).Round(time.Millisecond))
	if len(counts) != n || counts["q-00007"]["retryable"] != 2 || counts["q-00007"]["discarded"] != 1 ||
		counts["q-00007"]["dead_letter"] != 1 || counts["q-00001"]["retryable"] != 1 {
		t.Errorf("QueueCounts: %d queues, q-00007 %v, q-00001 %v", len(counts), counts["q-00007"], counts["q-00001"])
	}

	names := make([]string, 0, n+1)
	for q := range counts {
		names = append(names, q)
	}
	names = append(names, "no-records")
	began = testdate.Now()
	oldest, err := s.OldestRecords(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("OldestRecords of %d queues: %v", len(names), testdate.Since(began).Round(time.Millisecond))
	if len(oldest) != n || !oldest["q-00007"].Equal(older.CreatedAt) || !oldest["q-00001"].Equal(recs[1].CreatedAt) {
		t.Errorf("OldestRecords: %d queues, q-00007 %v (want %v)", len(oldest), oldest["q-00007"], older.CreatedAt)
	}
	if _, ok := oldest["no-records"]; ok {
		t.Error("OldestRecords lists a queue without records")
	}

	// Blocked records are read for the queues asked about only.
	f := dlq.DeliveryFailure{Reason: dlq.ReasonBroker, Message: "down", FailedAt: testdate.Now().UTC(), Failures: 1, NextAttemptAt: testdate.Now().Add(time.Minute)}
	if _, err := pool.Exec(ctx, `UPDATE redrive_lifecycle SET redelivery_failure = $1 WHERE queue IN ('q-00001', 'q-00002')`, f); err != nil {
		t.Fatal(err)
	}
	blocked, err := s.BlockedQueues(ctx, []string{"q-00002", "q-00003"})
	if err != nil {
		t.Fatal(err)
	}
	if len(blocked) != 1 || blocked["q-00002"].Records != 1 || blocked["q-00002"].Reason != dlq.ReasonBroker {
		t.Errorf("BlockedQueues(q-00002, q-00003) = %+v, want q-00002 alone", blocked)
	}
}

// A series of activity: per bucket, of every queue, one queue or one
// incident, with the top queues' own series; minutes folded into hours
// still count in their hour.
func TestActivitySeriesByQueueAndIncident(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 30, 20, 0, time.UTC)
	write := func(at time.Time, queue, fp string, n int64) {
		t.Helper()
		if err := s.RecordActivity(ctx, at, map[store.ActivityKey]int64{{Queue: queue, Fingerprint: fp}: n}); err != nil {
			t.Fatal(err)
		}
	}
	write(now.Add(-4*time.Minute), "orders", "aaaa", 3)
	write(now.Add(-4*time.Minute), "orders", "aaaa", 2) // two batches in a minute
	write(now.Add(-4*time.Minute), "payments", "aaaa", 1)
	write(now.Add(-2*time.Minute), "orders", "bbbb", 7)
	write(now, "billing", "aaaa", 4)
	write(now.Add(-5*time.Hour), "orders", "aaaa", 100) // folded into its hour by compaction
	if err := s.CompactActivity(ctx, now); err != nil {
		t.Fatal(err)
	}
	since := now.Truncate(time.Minute).Add(-5 * time.Minute)
	minutes := store.ActivityParams{Since: since, Until: since.Add(6 * time.Minute), Step: time.Minute, TopQueues: 2}
	for _, tc := range []struct {
		name   string
		p      store.ActivityParams
		added  []int64
		queues string
	}{
		{"every queue", minutes, []int64{0, 6, 0, 7, 0, 4}, "orders 12 [0 5 0 7 0 0], billing 4 [0 0 0 0 0 4]"},
		{"one queue", with(minutes, func(p *store.ActivityParams) { p.Queue = "orders" }), []int64{0, 5, 0, 7, 0, 0}, "orders 12 [0 5 0 7 0 0]"},
		{"one incident", with(minutes, func(p *store.ActivityParams) { p.Fingerprint = "aaaa"; p.TopQueues = 5 }), []int64{0, 6, 0, 0, 0, 4},
			"orders 5 [0 5 0 0 0 0], billing 4 [0 0 0 0 0 4], payments 1 [0 1 0 0 0 0]"},
		{"hours", store.ActivityParams{Since: now.Truncate(time.Hour).Add(-6 * time.Hour), Until: now.Truncate(time.Hour).Add(time.Hour),
			Step: time.Hour, Fingerprint: "aaaa"}, []int64{0, 100, 0, 0, 0, 0, 10}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Activity(ctx, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			var qs []string
			for _, q := range got.Queues {
				qs = append(qs, fmt.Sprintf("%s %d %v", q.Queue, q.Total, q.Added))
			}
			if fmt.Sprint(got.Added) != fmt.Sprint(tc.added) || strings.Join(qs, ", ") != tc.queues {
				t.Errorf("added %v, queues %q; want %v, %q", got.Added, strings.Join(qs, ", "), tc.added, tc.queues)
			}
		})
	}
}

func with(p store.ActivityParams, f func(*store.ActivityParams)) store.ActivityParams {
	f(&p)
	return p
}
