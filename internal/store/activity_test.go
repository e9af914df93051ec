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
)

// Activity sums what ingest and settled claims append over the last hour;
// compaction folds the rows and drops old minutes, keeping the sums.
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
		now:                        {"orders": 3, "payments": 1},
		now.Add(-time.Second):      {"orders": 2, "ignored": 0},
		now.Add(-90 * time.Minute): {"orders": 100}, // outside the hour, kept by compaction
		now.Add(-3 * time.Hour):    {"orders": 1000},
	} {
		if err := s.RecordActivity(ctx, at, added); err != nil {
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
	if n, _, _ := rows(); n != 6 {
		t.Fatalf("%d activity rows before compaction, want 6", n)
	}
	if err := s.CompactActivity(ctx, now); err != nil {
		t.Fatal(err)
	}
	check("after compaction")
	// One row per queue and minute (orders now, orders 90 min ago, payments
	// now — the minute of now-1s may be the previous one); the 3-hour-old
	// minute is gone.
	if n, added, retried := rows(); n < 3 || n > 4 || added != 106 || retried != 1 {
		t.Errorf("after compaction: %d rows, added %d, retried %d; want 3 or 4 rows, 106, 1", n, added, retried)
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
	if _, err := pool.Exec(ctx, `ANALYZE redrive_record; ANALYZE redrive_queue_activity`); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, "EXPLAIN "+store.QueueActivitySQL, []string{"new", "old"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if p := plan.String(); !strings.Contains(p, "Index Scan using redrive_record_queue_id") ||
		strings.Contains(p, "redrive_record_pkey") || strings.Contains(p, "Seq Scan on redrive_record ") {
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

	began := time.Now()
	counts, err := s.QueueCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("QueueCounts of %d queues: %v", len(counts), time.Since(began).Round(time.Millisecond))
	if len(counts) != n || counts["q-00007"]["retryable"] != 2 || counts["q-00007"]["discarded"] != 1 ||
		counts["q-00007"]["dead_letter"] != 1 || counts["q-00001"]["retryable"] != 1 {
		t.Errorf("QueueCounts: %d queues, q-00007 %v, q-00001 %v", len(counts), counts["q-00007"], counts["q-00001"])
	}

	names := make([]string, 0, n+1)
	for q := range counts {
		names = append(names, q)
	}
	names = append(names, "no-records")
	began = time.Now()
	oldest, err := s.OldestRecords(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("OldestRecords of %d queues: %v", len(names), time.Since(began).Round(time.Millisecond))
	if len(oldest) != n || !oldest["q-00007"].Equal(older.CreatedAt) || !oldest["q-00001"].Equal(recs[1].CreatedAt) {
		t.Errorf("OldestRecords: %d queues, q-00007 %v (want %v)", len(oldest), oldest["q-00007"], older.CreatedAt)
	}
	if _, ok := oldest["no-records"]; ok {
		t.Error("OldestRecords lists a queue without records")
	}

	// Blocked records are read for the queues asked about only.
	f := dlq.DeliveryFailure{Reason: dlq.ReasonBroker, Message: "down", FailedAt: time.Now().UTC(), Failures: 1, NextAttemptAt: time.Now().Add(time.Minute)}
	if _, err := pool.Exec(ctx, `UPDATE redrive_record SET redelivery_failure = $1 WHERE queue IN ('q-00001', 'q-00002')`, f); err != nil {
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
