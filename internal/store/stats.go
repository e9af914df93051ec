package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/filter"
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
	// OtherQueues and OtherErrorTypes are what StatsTop leaves out of
	// ByQueue and ByErrorType (zero from Stats, which leaves out nothing):
	// ByQueue's counts and OtherQueues.Records add up to Total, and so do
	// ByErrorType's and OtherErrorTypes.Records.
	OtherQueues, OtherErrorTypes Others
}

// Others is the part of a breakdown a capped read leaves out: how many
// keys (queues, error types) and how many records they hold.
type Others struct {
	Keys, Records int64
}

// StatsTop reads what GET /dead-letter/stats shows (Stats), the breakdown
// by queue and by error type capped at their limit largest keys (most
// records first, ties by name), the rest counted in OtherQueues and
// OtherErrorTypes; ByQueueState is left empty. Postgres does the counting:
// what it returns is a row per state, exhaustion and shown key, whatever
// the number of queues and error types.
func (s *Store) StatsTop(ctx context.Context, queue string, queueGlobs []string, limit int) (*Stats, error) {
	st := &Stats{ByQueue: map[string]int64{}, ByErrorType: map[string]int64{}, ByState: map[string]int64{},
		ByExhaustion: map[string]int64{}, ByQueueState: map[string]map[string]int64{}}
	var likes []string
	if queueGlobs != nil {
		likes = LikePatterns(queueGlobs)
	}
	rows, err := s.q.StatsTop(ctx, s.pool, int64(limit), queue, likes)
	if err != nil {
		return nil, fmt.Errorf("read stats: %w", err)
	}
	for _, r := range rows {
		switch {
		case r.Dim == "state":
			st.ByState[r.Key] += r.N
			st.Total += r.N
		case r.Dim == "exhaustion":
			st.ByExhaustion[r.Key] += r.N
		case r.Dim == "queue" && r.Rest:
			st.OtherQueues = Others{Keys: r.Keys, Records: r.N}
		case r.Dim == "queue":
			st.ByQueue[r.Key] = r.N
		case r.Dim == "error_type" && r.Rest:
			st.OtherErrorTypes = Others{Keys: r.Keys, Records: r.N}
		case r.Dim == "error_type":
			st.ByErrorType[r.Key] = r.N
		}
	}
	if err := s.statsBounds(ctx, st, queue, queueGlobs); err != nil {
		return nil, err
	}
	return st, nil
}

// Stats reads the record statistics from the count view (the totals
// CompactCounts folds plus the deltas the triggers appended since),
// restricted to one source topic when queue is not empty. It costs a scan of
// a few hundred rows, whatever the number of records.
func (s *Store) Stats(ctx context.Context, queue string, queueGlobs []string) (*Stats, error) {
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
		if !inGlobs(queueGlobs, q) {
			continue
		}
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
	if err := s.statsBounds(ctx, st, queue, queueGlobs); err != nil {
		return nil, err
	}
	return st, nil
}

// statsBounds reads st's OldestAt and NewestAt: of queue ("": every
// queue) among the queues matching queueGlobs (nil: every queue).
func (s *Store) statsBounds(ctx context.Context, st *Stats, queue string, queueGlobs []string) error {
	// min/max use the created_at index; for one topic, its (queue, id) index
	// gives the first and last record stored (ids are time-ordered UUIDv7).
	// The range on queue keeps the planner off the primary key (see
	// queueActivitySQL): with "queue = $1" it walks ids filtering on queue.
	q := `SELECT min(created_at), max(created_at) FROM redrive_record_data`
	var args []any
	if queue != "" {
		q = `SELECT (SELECT created_at FROM redrive_record_data WHERE queue >= $1 AND queue <= $1 ORDER BY queue, id LIMIT 1),
			(SELECT created_at FROM redrive_record_data WHERE queue >= $1 AND queue <= $1 ORDER BY queue DESC, id DESC LIMIT 1)`
		args = append(args, queue)
	}
	if queueGlobs != nil {
		// The caller's queues only (roles): one bounded scan of theirs.
		f := filter.Filter{Queue: queue}
		nargs := pgx.NamedArgs{}
		q = `SELECT min(created_at), max(created_at) FROM redrive_record WHERE ` + where(&f, &filter.Scope{QueueGlobs: queueGlobs}, "", nargs)
		args = []any{nargs}
	}
	if err := s.pool.QueryRow(ctx, q, args...).Scan(&st.OldestAt, &st.NewestAt); err != nil {
		return fmt.Errorf("read stats bounds: %w", err)
	}
	return nil
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

// CompactCounts drains the pending deltas the triggers append
// (redrive_record_count_delta) into the totals (redrive_record_count_total,
// one row per dimension tuple, updated in place), so that what Stats and
// every other reader of the statistics scan is the totals plus a compaction
// interval's deltas, whatever the number of records. One compaction runs at a
// time: a replica that finds another compacting skips its turn. Writers never
// wait for it (they only append deltas). After draining many deltas it
// vacuums their table, so that a burst leaves no heap of dead rows behind for
// the next reads to scan.
func (s *Store) CompactCounts(ctx context.Context) error {
	var drained int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		locked, err := s.q.CompactCountsLock(ctx, tx)
		if err != nil || !locked {
			return err
		}
		row, err := s.q.CompactCounts(ctx, tx)
		if err != nil {
			return err
		}
		drained = row.Drained
		if row.Folded == 0 {
			return nil
		}
		return s.q.CompactCountsZeros(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("compact record counts: %w", err)
	}
	if drained >= vacuumDeltasAfter {
		// Outside a transaction. A role that does not own the table gets a
		// warning, not an error, and autovacuum (set to follow the table
		// closely by migration 00170) does it instead.
		if _, err := s.pool.Exec(ctx, "VACUUM redrive_record_count_delta"); err != nil {
			return fmt.Errorf("vacuum record count deltas: %w", err)
		}
	}
	return nil
}

// vacuumDeltasAfter is how many drained delta rows make CompactCounts vacuum
// their table (a dozen pages or so): below it, the pages the next deltas
// reuse stay few, and autovacuum follows.
const vacuumDeltasAfter = 1000
