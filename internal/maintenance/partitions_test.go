package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/testdate"
)

// idAt is a UUIDv7 made at t: its record is stored in t's week partition.
func idAt(at time.Time) string {
	id := uuid.MustParse(dlq.NewID(testdate.Now()))
	ms := uint64(at.UnixMilli())
	for i := range 6 {
		id[i] = byte(ms >> (40 - 8*i))
	}
	return id.String()
}

func weekName(t time.Time) string {
	t = t.UTC().Truncate(24 * time.Hour)
	return "w" + t.AddDate(0, 0, -((int(t.Weekday())+6)%7)).Format("20060102")
}

// The pruner's pass makes the partitions of its week and the next four,
// and drops a past week only when none of its records is needed: a week
// with a retryable record, or a dead letter within its retention, stays
// (the batched deletes take its expired records); a week of expired dead
// letters and completed records is dropped whole, its records subtracted
// from the statistics and counted as pruned, its coordinates removed.
func TestPrunerDropsOnlyWeeksNothingNeeds(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	real := testdate.Now()
	w1, w2, w3 := real.AddDate(0, 0, 7), real.AddDate(0, 0, 14), real.AddDate(0, 0, 21) // partitions made by the migration
	now := real.AddDate(0, 0, 200)
	b.clock.Set(now)
	retryable := b.insert(t, rec{queue: "orders", state: dlq.StateRetryable, at: now.AddDate(0, 0, -40), id: idAt(w1)},
		rec{queue: "orders", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, at: now.AddDate(0, 0, -40), id: idAt(w1)})
	young := b.insert(t, rec{queue: "orders", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, at: now.AddDate(0, 0, -10), id: idAt(w2)})
	expired := b.insert(t,
		rec{queue: "orders", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, at: now.AddDate(0, 0, -40), id: idAt(w3)},
		rec{queue: "billing", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, at: now.AddDate(0, 0, -35), id: idAt(w3)},
		rec{queue: "orders", state: dlq.StateCompleted, at: now.AddDate(0, 0, -40), id: idAt(w3)})
	pol := topicPolicy(func(t *policy.Topic) {
		t.DeadLetter.Retention.MaxAge = 30 * day
		t.Retention.Completed = 30 * day
	})
	p := b.pruner(t, pol, maintenance.PrunerConfig{})
	res, err := p.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exists := func(week string) bool {
		var n int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname IN ($1, $2)`,
			"redrive_lifecycle_"+week, "redrive_record_data_"+week).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 2
	}
	if !exists(weekName(w1)) || !exists(weekName(w2)) {
		t.Errorf("a week with a retryable record or a dead letter within retention was dropped")
	}
	if exists(weekName(w3)) {
		t.Errorf("the week of expired records %s was kept", weekName(w3))
	}
	for i := range maintenance.WeeksAhead + 1 {
		if w := weekName(now.AddDate(0, 0, 7*i)); !exists(w) {
			t.Errorf("week %s ahead was not made", w)
		}
	}
	if n := b.count(t, "id = ANY($1::uuid[])", []string{retryable[0], young[0]}); n != 2 {
		t.Errorf("%d of the retryable record and the young dead letter left, want both", n)
	}
	if n := b.count(t, "id = ANY($1::uuid[])", append(expired, retryable[1])); n != 0 {
		t.Errorf("%d expired records left", n)
	}
	var coords, registered int
	if err := b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM redrive_record_coord WHERE id = ANY($1::uuid[])),
		(SELECT count(*) FROM redrive_partition WHERE name = $2)`, expired, weekName(w3)).Scan(&coords, &registered); err != nil {
		t.Fatal(err)
	}
	if coords != 0 || registered != 0 {
		t.Errorf("after the drop: %d coordinates of its records, registered %d times; want none", coords, registered)
	}
	// Dropped: the week of expired records, and the two weeks around the
	// kept ones that hold nothing (this week and the one four weeks on).
	if got := testutil.ToFloat64(b.metrics.Partitions.WithLabelValues("dropped")); got != 3 {
		t.Errorf("partitions dropped: %v, want 3", got)
	}
	if got := res.Total(); got != 4 {
		t.Errorf("pruned %d records (%+v), want the 3 of the dropped week and the expired dead letter beside the retryable one", got, res.Pruned)
	}
	checkStatistics(t, b)
	// Once the young dead letter expires, its week goes too.
	b.clock.Advance(25 * day)
	if _, err := p.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if exists(weekName(w2)) || !exists(weekName(w1)) {
		t.Errorf("after the young dead letter expired: week %s exists %t (want false), week %s %t (want true)",
			weekName(w2), exists(weekName(w2)), weekName(w1), exists(weekName(w1)))
	}
	checkStatistics(t, b)
}

// checkStatistics fails unless the statistics (totals and pending deltas)
// count what the record tables hold, per queue, state and exhaustion.
func checkStatistics(t *testing.T, b *bundle) {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `
		SELECT coalesce(s.queue, r.queue), coalesce(s.state, r.state), coalesce(s.n, 0), coalesce(r.n, 0) FROM
		(SELECT queue, state, exhaustion, sum(n) AS n FROM (SELECT queue, state, exhaustion, n FROM redrive_record_count_total
			UNION ALL SELECT queue, state, exhaustion, n FROM redrive_record_count_delta) x GROUP BY 1, 2, 3 HAVING sum(n) <> 0) s
		FULL JOIN (SELECT queue, state, coalesce(exhaustion, '') AS exhaustion, count(*) AS n FROM redrive_lifecycle GROUP BY 1, 2, 3) r
		USING (queue, state, exhaustion) WHERE coalesce(s.n, 0) <> coalesce(r.n, 0)`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var q, st string
		var counted, stored int64
		if err := rows.Scan(&q, &st, &counted, &stored); err != nil {
			t.Fatal(err)
		}
		t.Errorf("statistics count %d %s records of %s, the tables hold %d", counted, st, q, stored)
	}
}

// A drop that cannot get its lock in time (a long read holds the week)
// changes nothing, not even the statistics, and fails no pass; the next
// pass drops the week.
func TestPartitionDropWaitsForItsLockThenRetries(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	week := testdate.Now().AddDate(0, 0, 7)
	now := testdate.Now().AddDate(0, 0, 100)
	b.clock.Set(now)
	b.insert(t, rec{queue: "orders", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, at: now.AddDate(0, 0, -40), id: idAt(week)})
	p := b.pruner(t, topicPolicy(func(t *policy.Topic) { t.DeadLetter.Retention.MaxAge = 30 * day }), maintenance.PrunerConfig{})
	reader, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A reader of the week (as a listing's scan of its partition holds).
	if _, err := reader.Exec(ctx, "LOCK TABLE redrive_lifecycle_"+weekName(week)+" IN ACCESS SHARE MODE"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.RunOnce(ctx); err != nil {
		t.Fatalf("a pass whose drop waited for a lock failed: %v", err)
	}
	var n int
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relname = $1", "redrive_lifecycle_"+weekName(week)).Scan(&n); err != nil || n != 1 {
		t.Fatalf("week %s dropped under a reader's lock (%d, %v)", weekName(week), n, err)
	}
	checkStatistics(t, b)
	if err := reader.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relname = $1", "redrive_lifecycle_"+weekName(week)).Scan(&n); err != nil || n != 0 {
		t.Errorf("week %s still there once the reader is done (%d, %v)", weekName(week), n, err)
	}
	checkStatistics(t, b)
}
