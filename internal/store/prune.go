package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/store/internal/dbsqlc"
)

// TerminalQueues lists the queues that have discarded or completed records, by
// loose scans of the partial indexes on them: the cost grows with the number
// of queues, not of records.
func (m *Maint) TerminalQueues(ctx context.Context) ([]string, error) {
	queues, err := m.q.TerminalQueues(ctx, m.db)
	if err != nil {
		return nil, fmt.Errorf("list queues with terminal records: %w", err)
	}
	return queues, nil
}

// PruneSet names the records of one queue a retention limit applies to:
// dead letters (discarded, exhaustion dead_letter), discards (discarded,
// exhaustion discard) or completed records. Their age is counted from
// discarded_at or completed_at.
type PruneSet struct {
	Queue string
	// State is dlq.StateDiscarded or dlq.StateCompleted.
	State dlq.State
	// Exhaustion is set with StateDiscarded.
	Exhaustion dlq.Exhaustion
}

// where renders the set's condition, binding its values into args, and the
// column its records' age is counted from.
func (p *PruneSet) where(args pgx.NamedArgs) (cond string, tsCol string, err error) {
	args["queue"] = p.Queue
	switch {
	case p.State == dlq.StateDiscarded && p.Exhaustion.Kept():
		args["exhaustion"] = string(p.Exhaustion)
		return "queue = @queue AND state = 'discarded' AND exhaustion = @exhaustion", "discarded_at", nil
	case p.State == dlq.StateCompleted && p.Exhaustion == "":
		return "queue = @queue AND state = 'completed'", "completed_at", nil
	}
	return "", "", fmt.Errorf("prune set: state %q with exhaustion %q is not prunable", p.State, p.Exhaustion)
}

// CountPruneSet counts the records of the set.
func (m *Maint) CountPruneSet(ctx context.Context, p *PruneSet) (int64, error) {
	args := pgx.NamedArgs{}
	cond, _, err := p.where(args)
	if err != nil {
		return 0, err
	}
	var n int64
	if err := m.db.QueryRow(ctx, "SELECT count(*) FROM redrive_lifecycle WHERE "+cond, args).Scan(&n); err != nil {
		return 0, fmt.Errorf("count %s records of %s: %w", p.State, p.Queue, err)
	}
	return n, nil
}

// PruneBatchParams selects one batch of records to prune, oldest first.
type PruneBatchParams struct {
	PruneSet
	// Before, when set, selects only records that became terminal before it
	// (pruning by age).
	Before time.Time
	// Limit is the batch size (> 0).
	Limit int
	// Archived, when set, selects only records whose archive copy exists
	// (archive_state done) or was never due: a record whose copy is still
	// pending or failing is kept.
	Archived bool
}

// cond renders the batch's condition, binding its values (and its limit)
// into args, and the column its age is counted from.
func (p *PruneBatchParams) cond(args pgx.NamedArgs) (string, string, error) {
	if p.Limit <= 0 {
		return "", "", errors.New("prune batch: limit must be > 0")
	}
	cond, tsCol, err := p.where(args)
	if err != nil {
		return "", "", err
	}
	args["limit"] = p.Limit
	if !p.Before.IsZero() {
		args["before"] = p.Before
		cond += " AND " + tsCol + " < @before"
	}
	// Records waiting for redelivery are never terminal; skip them defensively.
	cond += " AND next_retry_at IS NULL"
	return cond, tsCol, nil
}

// PruneBatch deletes up to Limit records of the set, oldest first, and
// returns how many. Rows locked by others (a replay, a claim) are skipped, so
// a batch never waits on other work and never holds many locks for long. It
// never talks to Kafka: archive copies are the archiver's (RequestArchive).
func (m *Maint) PruneBatch(ctx context.Context, p *PruneBatchParams) (int64, error) {
	args := pgx.NamedArgs{}
	cond, tsCol, err := p.cond(args)
	if err != nil {
		return 0, err
	}
	if p.Archived {
		cond += " AND (archive_state IS NULL OR archive_state = 'done')"
	}
	// The set's condition is over the lifecycle; each record is deleted
	// whole, its lifecycle (which the statistics count), its DLQ
	// coordinates and its wide row.
	tag, err := m.db.Exec(ctx, `WITH l AS (DELETE FROM redrive_lifecycle WHERE id IN (
		SELECT id FROM redrive_lifecycle WHERE `+cond+` ORDER BY `+tsCol+` LIMIT @limit FOR UPDATE SKIP LOCKED) RETURNING id),
		c AS (DELETE FROM redrive_record_coord c USING l WHERE c.id = l.id)
		DELETE FROM redrive_record_data d USING l WHERE d.id = l.id`, args)
	if err != nil {
		return 0, fmt.Errorf("prune %s records of %s: %w", p.State, p.Queue, err)
	}
	return tag.RowsAffected(), nil
}

// RequestArchive makes the archive copy due for up to Limit records of the
// batch that have none yet (completed records under pruning_policy archive),
// oldest first, and returns how many. A later pass prunes them once the
// archiver has copied them.
func (m *Maint) RequestArchive(ctx context.Context, p *PruneBatchParams) (int64, error) {
	args := pgx.NamedArgs{}
	cond, tsCol, err := p.cond(args)
	if err != nil {
		return 0, err
	}
	tag, err := m.db.Exec(ctx, `UPDATE redrive_lifecycle SET archive_state = 'pending' WHERE id IN (
		SELECT id FROM redrive_lifecycle WHERE `+cond+` AND archive_state IS NULL ORDER BY `+tsCol+` LIMIT @limit FOR UPDATE SKIP LOCKED)`,
		args)
	if err != nil {
		return 0, fmt.Errorf("request archive copies of %s records of %s: %w", p.State, p.Queue, err)
	}
	return tag.RowsAffected(), nil
}

// DeadLetterDepth returns, per queue, the number of dead letters (discarded,
// exhaustion dead_letter) and the discarded_at of the oldest. Counts come from
// the statistics table the triggers maintain (redrive_record_count), the
// oldest from one probe of the discarded index per queue, so it stays cheap at
// millions of rows.
func (s *Store) DeadLetterDepth(ctx context.Context) (map[string]DepthRow, error) {
	rows, err := s.q.DeadLetterDepth(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("dead-letter depth: %w", err)
	}
	out := map[string]DepthRow{}
	for _, r := range rows {
		d := DepthRow{Count: r.N}
		if oldest, ok := r.Oldest.(time.Time); ok {
			d.Oldest = oldest
		}
		if d.Count > 0 {
			out[r.Queue] = d
		}
	}
	return out, nil
}

// DepthRow is one queue's dead-letter count and oldest discarded_at.
type DepthRow struct {
	Count  int64
	Oldest time.Time
}

// dbtx is what maintenance statements run on: the pool, or the one
// connection that holds a maintenance lock.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Maint runs the pruning and replay statements, on the pool (Store.Maint) or
// on the connection of an AdvisoryLock, so that a maintenance pass uses one
// connection however long it runs.
type Maint struct {
	db dbtx
	q  *dbsqlc.Queries
}

// Maint runs maintenance statements on the pool.
func (s *Store) Maint() *Maint { return &Maint{db: s.pool, q: s.q} }

// TerminalQueues is Maint().TerminalQueues.
func (s *Store) TerminalQueues(ctx context.Context) ([]string, error) {
	return s.Maint().TerminalQueues(ctx)
}

// AdvisoryLock is a session-level Postgres advisory lock held on a
// connection of its own. Run the locked work on Maint (the same connection)
// and Release it when done.
type AdvisoryLock struct {
	conn *pgxpool.Conn
	key  int64
	q    *dbsqlc.Queries
}

// TryAdvisoryLock takes the session-level advisory lock key without waiting.
// ok is false when another session holds it.
func (s *Store) TryAdvisoryLock(ctx context.Context, key int64) (lock *AdvisoryLock, ok bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("advisory lock %d: acquire connection: %w", key, err)
	}
	if ok, err = s.q.AdvisoryTryLock(ctx, conn, key); err != nil {
		conn.Release()
		return nil, false, fmt.Errorf("advisory lock %d: %w", key, err)
	}
	if !ok {
		conn.Release()
		return nil, false, nil
	}
	return &AdvisoryLock{conn: conn, key: key, q: s.q}, true, nil
}

// Maint runs statements on the lock's connection.
func (l *AdvisoryLock) Maint() *Maint { return &Maint{db: l.conn, q: l.q} }

// Release unlocks and returns the connection; if the unlock fails the
// connection is closed, so the lock never lingers on a pooled session.
func (l *AdvisoryLock) Release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if unlocked, err := l.q.AdvisoryUnlock(ctx, l.conn, l.key); err != nil || !unlocked {
		_ = l.conn.Conn().Close(ctx)
	}
	l.conn.Release()
}

// RecordCountRow is the number of records of one queue, state, exhaustion
// ("" when none) and error type.
type RecordCountRow struct {
	Queue, State, Exhaustion, ErrorType string
	N                                   int64
}

// RecordCounts sums the statistics table the triggers maintain: cheap at any
// table size (a few hundred rows once compacted).
func (s *Store) RecordCounts(ctx context.Context) ([]RecordCountRow, error) {
	rows, err := s.q.RecordCounts(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("record counts: %w", err)
	}
	out := make([]RecordCountRow, len(rows))
	for i, r := range rows {
		out[i] = RecordCountRow{Queue: r.Queue, State: r.State, Exhaustion: r.Exhaustion, ErrorType: r.ErrorType, N: r.N}
	}
	return out, nil
}
