package store

import (
	"context"
	"fmt"
	"time"

	"github.com/redrive/redrive/internal/store/internal/dbsqlc"
)

// Stats are the counts behind GET /dead-letter/stats and the queue list.
type Stats struct {
	Total        int64
	ByQueue      map[string]int64
	ByErrorType  map[string]int64
	ByState      map[string]int64
	ByExhaustion map[string]int64
	// ByQueueState counts per source topic and state ("dead_letter" and
	// "discard" split discarded records by exhaustion).
	ByQueueState map[string]map[string]int64
	// OldestAt and NewestAt bound created_at; nil when there are no records.
	OldestAt, NewestAt *time.Time
}

// Stats reads the record statistics from the count table, which triggers keep
// current, restricted to one source topic when queue is not empty. It costs a
// scan of a few hundred rows, whatever the number of records.
func (s *Store) Stats(ctx context.Context, queue string) (*Stats, error) {
	st := &Stats{ByQueue: map[string]int64{}, ByErrorType: map[string]int64{}, ByState: map[string]int64{},
		ByExhaustion: map[string]int64{}, ByQueueState: map[string]map[string]int64{}}
	var rows []dbsqlc.StatsCountsRow
	var err error
	if queue == "" {
		rows, err = s.q.StatsCounts(ctx, s.pool)
	} else {
		var qrows []dbsqlc.StatsQueueCountsRow
		qrows, err = s.q.StatsQueueCounts(ctx, s.pool, queue)
		for _, r := range qrows {
			rows = append(rows, dbsqlc.StatsCountsRow(r))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("read stats: %w", err)
	}
	for _, r := range rows {
		q, et, state, exh, n := r.Queue, r.ErrorType, r.State, r.Exhaustion, r.N
		st.Total += n
		st.ByQueue[q] += n
		st.ByErrorType[et] += n
		st.ByState[state] += n
		if exh != "" {
			st.ByExhaustion[exh] += n
		}
		m := st.ByQueueState[q]
		if m == nil {
			m = map[string]int64{}
			st.ByQueueState[q] = m
		}
		m[state] += n
		if exh != "" {
			m[exh] += n
		}
	}
	// min/max use the created_at index; for one topic, its (queue, id) index
	// gives the first and last record stored (ids are time-ordered UUIDv7).
	// The range on queue keeps the planner off the primary key (see
	// queueActivitySQL): with "queue = $1" it walks ids filtering on queue.
	q := `SELECT min(created_at), max(created_at) FROM redrive_record`
	var args []any
	if queue != "" {
		q = `SELECT (SELECT created_at FROM redrive_record WHERE queue >= $1 AND queue <= $1 ORDER BY queue, id LIMIT 1),
			(SELECT created_at FROM redrive_record WHERE queue >= $1 AND queue <= $1 ORDER BY queue DESC, id DESC LIMIT 1)`
		args = append(args, queue)
	}
	if err := s.pool.QueryRow(ctx, q, args...).Scan(&st.OldestAt, &st.NewestAt); err != nil {
		return nil, fmt.Errorf("read stats bounds: %w", err)
	}
	return st, nil
}

// QueueCounts reads, from the count table, each source topic's records by
// state, with "dead_letter" and "discard" splitting discarded records by
// exhaustion (Stats' ByQueueState, without the rest): one row per queue,
// state and exhaustion, whatever the number of records.
func (s *Store) QueueCounts(ctx context.Context) (map[string]map[string]int64, error) {
	rows, err := s.q.QueueCounts(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("read queue counts: %w", err)
	}
	out := map[string]map[string]int64{}
	for _, r := range rows {
		m := out[r.Queue]
		if m == nil {
			m = make(map[string]int64, 4)
			out[r.Queue] = m
		}
		m[r.State] += r.N
		if r.Exhaustion != "" {
			m[r.Exhaustion] += r.N
		}
	}
	return out, nil
}

// CompactCounts folds the count table's rows into one per dimension tuple.
// Writers only ever append to it, so this keeps Stats cheap; running it
// concurrently with writers or with itself is safe (each run folds only the
// rows its snapshot sees, and deletes what it folds).
func (s *Store) CompactCounts(ctx context.Context) error {
	if err := s.q.CompactCounts(ctx, s.pool); err != nil {
		return fmt.Errorf("compact record counts: %w", err)
	}
	return nil
}
