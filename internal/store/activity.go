package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ActivityWindow is how far back QueueActivity counts; ActivityKept is how
// long compaction keeps activity rows (longer, so a window is always whole).
const (
	ActivityWindow = time.Hour
	ActivityKept   = 2 * time.Hour
)

// RecordActivity adds failures stored per queue in the minute of at: one
// multi-row statement however many queues.
func (s *Store) RecordActivity(ctx context.Context, at time.Time, added map[string]int64) error {
	if len(added) == 0 {
		return nil
	}
	queues, counts := make([]string, 0, len(added)), make([]int64, 0, len(added))
	for q, n := range added {
		if n > 0 {
			queues, counts = append(queues, q), append(counts, n)
		}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO redrive_queue_activity (queue, minute, added)
		SELECT q, $1, n FROM unnest($2::text[], $3::bigint[]) AS u(q, n)`, at.Truncate(time.Minute), queues, counts)
	if err != nil {
		return fmt.Errorf("record queue activity: %w", err)
	}
	return nil
}

// Activity is a queue's age and recent activity.
type Activity struct {
	// OldestAt is the created_at of its oldest stored record; nil with none.
	OldestAt *time.Time
	// Added counts failures stored, Retried records redelivered, in the
	// ActivityWindow before now (by the minute).
	Added, Retried int64
}

// queueActivitySQL reads, per queue name in $1, the created_at of its first
// record — LIMIT 1 over the (queue, id) index, one index probe per queue —
// and its activity since $2 (the (queue, minute) index).
//
// The queue is matched by a range, not "queue = q.name": with an equality the
// planner drops queue from the ORDER BY and walks the primary key (id order)
// filtering on queue, which reads every older record of the other queues
// first — the whole table for a queue that is new. The range leaves only the
// (queue, id) index able to give the order.
const queueActivitySQL = `
	SELECT q.name, o.created_at, coalesce(a.added, 0), coalesce(a.retried, 0)
	FROM unnest($1::text[]) AS q(name)
	LEFT JOIN LATERAL (SELECT created_at FROM redrive_record WHERE queue >= q.name AND queue <= q.name
		ORDER BY queue, id LIMIT 1) o ON true
	LEFT JOIN LATERAL (SELECT sum(added)::bigint AS added, sum(retried)::bigint AS retried FROM redrive_queue_activity
		WHERE queue = q.name AND minute > $2) a ON true`

// QueueActivity returns the activity of each of queues, in one statement:
// per queue, the first record by the (queue, id) index (ids are UUIDv7,
// ordered by creation) and the sum of its activity rows since the window
// began. Queues with nothing are present with zeros.
func (s *Store) QueueActivity(ctx context.Context, queues []string, now time.Time) (map[string]Activity, error) {
	out := make(map[string]Activity, len(queues))
	if len(queues) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, queueActivitySQL, queues, now.Add(-ActivityWindow))
	if err != nil {
		return nil, fmt.Errorf("read queue activity: %w", err)
	}
	var (
		name string
		a    Activity
	)
	_, err = pgx.ForEachRow(rows, []any{&name, &a.OldestAt, &a.Added, &a.Retried}, func() error {
		v := a
		if a.OldestAt != nil { // the scan may reuse the pointer for the next row
			t := *a.OldestAt
			v.OldestAt = &t
		}
		out[name] = v
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read queue activity: %w", err)
	}
	return out, nil
}

// OldestRecords returns, for each of queues, the created_at of its oldest
// stored record; queues without records are absent. Like QueueActivity it
// is one statement of one (queue, id) index probe per queue, never a scan of
// records: about 80 ms for 20,000 queues on a 2-core machine. The queue
// list uses it to sort every queue by age.
func (s *Store) OldestRecords(ctx context.Context, queues []string) (map[string]time.Time, error) {
	out := make(map[string]time.Time, len(queues))
	if len(queues) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT q.name, o.created_at FROM unnest($1::text[]) AS q(name)
		JOIN LATERAL (SELECT created_at FROM redrive_record WHERE queue >= q.name AND queue <= q.name
			ORDER BY queue, id LIMIT 1) o ON true`, queues)
	if err != nil {
		return nil, fmt.Errorf("read oldest records: %w", err)
	}
	var (
		name string
		at   time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&name, &at}, func() error {
		out[name] = at
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read oldest records: %w", err)
	}
	return out, nil
}

// CompactActivity folds the activity rows into one per queue and minute and
// drops the minutes older than ActivityKept before now. Like CompactCounts it
// is safe to run concurrently with writers and with itself: each run folds
// only the rows its snapshot sees, and deletes what it folds.
func (s *Store) CompactActivity(ctx context.Context, now time.Time) error {
	_, err := s.pool.Exec(ctx, `WITH d AS (DELETE FROM redrive_queue_activity RETURNING *)
		INSERT INTO redrive_queue_activity (queue, minute, added, retried)
		SELECT queue, minute, sum(added), sum(retried) FROM d
		WHERE minute >= $1 GROUP BY 1, 2`, now.Add(-ActivityKept))
	if err != nil {
		return fmt.Errorf("compact queue activity: %w", err)
	}
	return nil
}
