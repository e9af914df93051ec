package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/dlq"
)

// WaitingQueues lists the queues that have records waiting for (re)delivery,
// due or not, by a loose scan of the (queue, next_retry_at) index: its cost
// grows with the number of queues, not of records.
func (s *Store) WaitingQueues(ctx context.Context) ([]string, error) {
	return collect(ctx, s.pool, "list waiting queues", pgx.RowTo[string], `
		WITH RECURSIVE q(queue) AS (
			SELECT min(queue) FROM redrive_record WHERE next_retry_at IS NOT NULL
			UNION ALL
			SELECT (SELECT min(r.queue) FROM redrive_record r WHERE r.next_retry_at IS NOT NULL AND r.queue > q.queue)
			FROM q WHERE q.queue IS NOT NULL
		)
		SELECT queue FROM q WHERE queue IS NOT NULL`)
}

// NextDue returns, per queue, the earliest time a record of it is due.
// Queues with nothing waiting are absent.
func (s *Store) NextDue(ctx context.Context, queues []string) (map[string]time.Time, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT q, (SELECT min(next_retry_at) FROM redrive_record WHERE queue = q AND next_retry_at IS NOT NULL)
		FROM unnest($1::text[]) AS q`, queues)
	if err != nil {
		return nil, fmt.Errorf("next due time: %w", err)
	}
	defer rows.Close()
	out := make(map[string]time.Time, len(queues))
	for rows.Next() {
		var q string
		var at *time.Time
		if err := rows.Scan(&q, &at); err != nil {
			return nil, fmt.Errorf("next due time: %w", err)
		}
		if at != nil {
			out[q] = *at
		}
	}
	return out, rows.Err()
}

// Claim holds records for redelivery or archiving. The records stay locked
// (the lease) until Commit or Abort; if the holder dies, Postgres ends its
// session, the claim rolls back and the records are due again at once — a crash
// between produce and Commit redelivers them again rather than losing them.
// The lease bounds how long a hung holder can keep them
// (idle_in_transaction_session_timeout).
type Claim struct {
	tx      pgx.Tx
	Records []dlq.Record
	prior   map[string]prior // ClaimDue: each record's state before the claim
}

// prior is what ClaimDue changed, so Postpone can undo it.
type prior struct {
	state         string
	redeliveredAt *time.Time
}

// ClaimDue locks up to limit records of queue due at now, skipping records
// other claims hold, and marks them redelivered at now — state available,
// attempt + 1, nothing waiting — within the claim: one statement, the same work
// as a bare claim-and-update. Produce them, Postpone those whose produce
// failed, then Commit. The records carry only what a redelivery needs (no error
// history, policy or meta), with Attempt already the new attempt and
// NextRetryAt the time they were due. An empty claim is already finished.
func (s *Store) ClaimDue(ctx context.Context, queue string, now time.Time, limit int, lease time.Duration) (*Claim, error) {
	c, err := s.claim(ctx, lease, scanForRedelivery, `
		WITH due AS (
			SELECT id, state, next_retry_at, redelivered_at FROM redrive_record
			WHERE queue = $1 AND next_retry_at <= $2
			ORDER BY next_retry_at LIMIT $3 FOR UPDATE SKIP LOCKED)
		UPDATE redrive_record r
		SET state = 'available', attempt = r.attempt + 1, next_retry_at = NULL, exhaustion = NULL,
		    discarded_at = NULL, redelivered_at = $2, updated_at = $2
		FROM due WHERE r.id = due.id
		RETURNING r.id, r.queue, r.format, r.attempt, r.source_partition, r.key, r.value, r.headers,
		          r.redelivery, due.next_retry_at, due.state, due.redelivered_at`, queue, now, limit)
	if err != nil || len(c.Records) == 0 {
		return c, err
	}
	c.prior = make(map[string]prior, len(c.Records))
	for i := range c.Records {
		r := &c.Records[i]
		c.prior[r.ID] = prior{state: string(r.State), redeliveredAt: r.RedeliveredAt}
		r.State, r.RedeliveredAt = dlq.StateAvailable, &now
	}
	return c, nil
}

// scanForRedelivery reads the columns ClaimDue returns.
func scanForRedelivery(row pgx.CollectableRow) (dlq.Record, error) {
	var (
		r                dlq.Record
		format, state    string
		headers, redeliv []byte
	)
	if err := row.Scan(&r.ID, &r.Queue, &format, &r.Attempt, &r.Source.Partition,
		&r.Key, &r.Value, &headers, &redeliv, &r.NextRetryAt, &state, &r.RedeliveredAt); err != nil {
		return r, err
	}
	r.Format, r.State = dlq.Format(format), dlq.State(state)
	if r.Format != dlq.FormatUnparseable {
		r.Source.Topic = r.Queue
	}
	var err error
	if r.Headers, err = decodeHeaders(headers); err != nil {
		return r, err
	}
	r.Redelivery, err = decodeRedelivery(redeliv)
	return r, err
}

// ClaimArchive locks up to limit records waiting to be copied to the archive
// topic: discarded and not archived since.
func (s *Store) ClaimArchive(ctx context.Context, limit int, lease time.Duration) (*Claim, error) {
	return s.claim(ctx, lease, scanRecord, fmt.Sprintf(`SELECT %s FROM redrive_record
		WHERE state = 'discarded' AND archived_at IS NULL ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`, readColumns), limit)
}

func (s *Store) claim(ctx context.Context, lease time.Duration, scan pgx.RowToFunc[dlq.Record], query string, args ...any) (*Claim, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("claim: begin: %w", err)
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL idle_in_transaction_session_timeout = %d", max(lease.Milliseconds(), 1000))); err != nil {
		_ = tx.Rollback(ctx)
		return nil, fmt.Errorf("claim: set lease: %w", err)
	}
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		_ = tx.Rollback(ctx)
		return nil, fmt.Errorf("claim records: %w", err)
	}
	recs, err := pgx.CollectRows(rows, scan)
	if err != nil {
		_ = tx.Rollback(ctx)
		return nil, fmt.Errorf("claim records: %w", err)
	}
	c := &Claim{tx: tx, Records: recs}
	if len(recs) == 0 {
		c.Abort(ctx)
	}
	return c, nil
}

// Postpone undoes ClaimDue for records whose produce failed: they are due
// again at `at`, in the state and attempt they had.
func (c *Claim) Postpone(ctx context.Context, ids []string, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	batch := &pgx.Batch{}
	for _, id := range ids {
		p := c.prior[id]
		batch.Queue(`UPDATE redrive_record SET state = $2, attempt = attempt - 1, next_retry_at = $3, redelivered_at = $4
			WHERE id = $1`, id, p.state, at, p.redeliveredAt)
	}
	if err := c.tx.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("postpone redelivery: %w", err)
	}
	return nil
}

// Archived marks records copied to the archive topic.
func (c *Claim) Archived(ctx context.Context, ids []string, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := c.tx.Exec(ctx, `UPDATE redrive_record SET archived_at = $2 WHERE id = ANY($1)`, ids, at); err != nil {
		return fmt.Errorf("mark archived: %w", err)
	}
	return nil
}

// Commit ends the claim, making its marks durable.
func (c *Claim) Commit(ctx context.Context) error {
	if err := c.tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit claim: %w", err)
	}
	return nil
}

// Abort ends the claim without changes: the records are due again.
func (c *Claim) Abort(ctx context.Context) {
	if err := c.tx.Rollback(context.WithoutCancel(ctx)); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		_ = err // the session ends either way; the rows are released
	}
}
