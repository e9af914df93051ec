package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
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

// ClaimParams asks for up to Limit records of Queue due at Now.
type ClaimParams struct {
	Queue string
	Now   time.Time
	Limit int
	// Owner names the claiming scheduler (host/pid), for operators.
	Owner string
	// Lease is how long the claim lasts unless it is ended: after that
	// RescueExpired puts its records back.
	Lease time.Duration
}

// Claim is a committed claim of records for redelivery (River's model: claim
// and commit, work, then settle with a token check). No transaction stays
// open: the claim is a row of redrive_claim, and its records carry its token.
// Produce the records, then Settle the claim. If the holder dies or cannot
// settle within the lease, RescueExpired puts the records back as they were,
// due at once: they are redelivered again with the same id and attempt — at
// least once, never lost.
type Claim struct {
	Token string
	// Records carry only what a redelivery needs (no error history, policy or
	// meta), with Attempt already the new attempt, State available, and
	// NextRetryAt the time they were due.
	Records []dlq.Record
	// prior is each record's state before the claim, for Settle to restore.
	prior map[string]prior
}

// prior is what ClaimDue changed, so a failed produce can undo it.
type prior struct {
	state         string
	redeliveredAt *time.Time
	failures      int // consecutive failed produces before this claim
}

// ClaimDue claims up to Limit records of a queue due at Now, skipping records
// other claims are taking, and marks them redelivered at Now — state
// available, attempt + 1, nothing waiting — and records the claim, all in one
// statement that commits at once. An empty claim (nothing due) has no token.
func (s *Store) ClaimDue(ctx context.Context, p *ClaimParams) (*Claim, error) {
	token := uuid.Must(uuid.NewV7()).String()
	rows, err := s.pool.Query(ctx, `
		WITH due AS (
			SELECT id, state, next_retry_at, redelivered_at, redelivery_failure FROM redrive_record
			WHERE queue = $1 AND next_retry_at <= $2
			ORDER BY next_retry_at LIMIT $3 FOR UPDATE SKIP LOCKED),
		claimed AS (
			UPDATE redrive_record r
			SET state = 'available', attempt = r.attempt + 1, next_retry_at = NULL, exhaustion = NULL,
			    discarded_at = NULL, redelivered_at = $2, updated_at = $2, redelivery_failure = NULL, claim_token = $4
			FROM due WHERE r.id = due.id
			RETURNING r.id, r.queue, r.format, r.attempt, r.source_partition, r.key, r.value, r.headers,
			          r.redelivery, due.next_retry_at, due.state, due.redelivered_at,
			          coalesce((due.redelivery_failure->>'failures')::int, 0) AS failures),
		lease AS (
			INSERT INTO redrive_claim (token, owner, queue, claimed_at, expires_at, ids, prior_states)
			SELECT $4, $5, $1, $2, $2::timestamptz + $6 * interval '1 millisecond', array_agg(id), array_agg(state)
			FROM claimed HAVING count(*) > 0)
		SELECT * FROM claimed`, p.Queue, p.Now, p.Limit, token, p.Owner, p.Lease.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("claim due records of %s: %w", p.Queue, err)
	}
	c := &Claim{prior: map[string]prior{}}
	c.Records, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (dlq.Record, error) {
		r, pr, err := scanForRedelivery(row)
		c.prior[r.ID] = pr
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim due records of %s: %w", p.Queue, err)
	}
	if len(c.Records) > 0 {
		c.Token = token
	}
	for i := range c.Records {
		r := &c.Records[i]
		r.State, r.RedeliveredAt = dlq.StateAvailable, &p.Now
	}
	return c, nil
}

// scanForRedelivery reads the columns ClaimDue returns.
func scanForRedelivery(row pgx.CollectableRow) (dlq.Record, prior, error) {
	var (
		r                dlq.Record
		p                prior
		format           string
		headers, redeliv []byte
	)
	if err := row.Scan(&r.ID, &r.Queue, &format, &r.Attempt, &r.Source.Partition,
		&r.Key, &r.Value, &headers, &redeliv, &r.NextRetryAt, &p.state, &p.redeliveredAt, &p.failures); err != nil {
		return r, p, err
	}
	r.Format = dlq.Format(format)
	if r.Format != dlq.FormatUnparseable {
		r.Source.Topic = r.Queue
	}
	var err error
	if r.Headers, err = decodeHeaders(headers); err != nil {
		return r, p, err
	}
	r.Redelivery, err = decodeRedelivery(redeliv)
	return r, p, err
}

// PriorFailures is how many produces of the record failed in a row before
// this claim (0 for a record of another claim).
func (c *Claim) PriorFailures(id string) int { return c.prior[id].failures }

// FailedDelivery is a claimed record whose produce failed.
type FailedDelivery struct {
	ID      string
	Failure dlq.DeliveryFailure
}

// Settle ends the claim. Records whose produce failed are put back as they
// were — state, attempt and redelivered_at — with the failure stored on them
// and due again at its NextAttemptAt; the others stay redelivered, and are
// counted as retried in the queue's activity for the minute of now. One
// statement, guarded by the claim's token: a record that changed since (a
// repeat failure joined it, an operator retried it) is left alone.
func (s *Store) Settle(ctx context.Context, c *Claim, failed []FailedDelivery, now time.Time) error {
	if c.Token == "" {
		return nil
	}
	n := len(failed)
	ids, states, failures := make([]string, n), make([]string, n), make([][]byte, n)
	redeliveredAt, next := make([]*time.Time, n), make([]time.Time, n)
	for i, f := range failed {
		p := c.prior[f.ID]
		b, err := json.Marshal(f.Failure)
		if err != nil {
			return fmt.Errorf("settle claim: encode failure: %w", err)
		}
		ids[i], states[i], redeliveredAt[i], failures[i], next[i] = f.ID, p.state, p.redeliveredAt, b, f.Failure.NextAttemptAt
	}
	var ended bool
	err := s.pool.QueryRow(ctx, `
		WITH lease AS (DELETE FROM redrive_claim WHERE token = $1 RETURNING token, queue, cardinality(ids) AS n),
		undo AS (
			UPDATE redrive_record r
			SET state = f.state, attempt = r.attempt - 1, next_retry_at = f.next, redelivered_at = f.redelivered_at,
			    redelivery_failure = f.failure, updated_at = $7
			FROM lease, unnest($2::uuid[], $3::text[], $4::timestamptz[], $5::jsonb[], $6::timestamptz[])
			     AS f(id, state, redelivered_at, failure, next)
			WHERE r.id = f.id AND r.claim_token = lease.token AND r.state = 'available' AND r.next_retry_at IS NULL
			RETURNING r.id),
		activity AS (
			INSERT INTO redrive_queue_activity (queue, minute, retried)
			SELECT queue, $8, n - $9 FROM lease WHERE n > $9)
		SELECT EXISTS (SELECT 1 FROM lease)`, c.Token, ids, states, redeliveredAt, failures, next, now,
		now.Truncate(time.Minute), n).Scan(&ended)
	if err != nil {
		return fmt.Errorf("settle claim %s: %w", c.Token, err)
	}
	if !ended {
		// The claim expired and was rescued: its records are due again.
		return ErrLeaseLost
	}
	return nil
}

// Rescued is a record whose claim expired and was put back.
type Rescued struct{ ID, Queue string }

// RescueExpired ends claims whose lease passed before now — their holder died
// or could not settle — and puts their records back as they were before the
// claim, due at once: the same attempt is redelivered again. Records that
// changed since the claim (a repeat failure or an ack joined them, an
// operator retried them) are left as they are.
func (s *Store) RescueExpired(ctx context.Context, now time.Time) ([]Rescued, error) {
	return collect(ctx, s.pool, "rescue expired claims", func(row pgx.CollectableRow) (Rescued, error) {
		var r Rescued
		err := row.Scan(&r.ID, &r.Queue)
		return r, err
	}, `
		WITH expired AS (
			DELETE FROM redrive_claim WHERE token IN (
				SELECT token FROM redrive_claim WHERE expires_at < $1 ORDER BY expires_at LIMIT 100 FOR UPDATE SKIP LOCKED)
			RETURNING token, ids, prior_states),
		back AS (SELECT e.token, u.id, u.state FROM expired e, unnest(e.ids, e.prior_states) AS u(id, state))
		UPDATE redrive_record r
		SET state = back.state, attempt = r.attempt - 1, next_retry_at = $1, updated_at = $1
		FROM back
		WHERE r.id = back.id AND r.claim_token = back.token AND r.state = 'available' AND r.next_retry_at IS NULL
		RETURNING r.id, r.queue`, now)
}

// Blocked is a queue's records whose redelivery keeps failing.
type Blocked struct {
	// Records is how many records of the queue wait on a failure backoff.
	Records int64
	// Reason and Message are those of the most recent failure.
	Reason, Message string
	// Since is the oldest failure's time among them.
	Since time.Time
}

// BlockedQueues returns, for each of queues, its records whose redelivery
// keeps failing. Queues with none are absent. A partial index keeps it cheap:
// only the blocked records of those queues are read.
func (s *Store) BlockedQueues(ctx context.Context, queues []string) (map[string]Blocked, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT queue, count(*),
		       (array_agg(redelivery_failure->>'reason' ORDER BY (redelivery_failure->>'failed_at')::timestamptz DESC))[1],
		       (array_agg(redelivery_failure->>'message' ORDER BY (redelivery_failure->>'failed_at')::timestamptz DESC))[1],
		       min((redelivery_failure->>'failed_at')::timestamptz)
		FROM redrive_record WHERE redelivery_failure IS NOT NULL AND queue = ANY($1)
		GROUP BY queue`, queues)
	if err != nil {
		return nil, fmt.Errorf("blocked queues: %w", err)
	}
	defer rows.Close()
	out := map[string]Blocked{}
	for rows.Next() {
		var q string
		var b Blocked
		if err := rows.Scan(&q, &b.Records, &b.Reason, &b.Message, &b.Since); err != nil {
			return nil, fmt.Errorf("blocked queues: %w", err)
		}
		out[q] = b
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("blocked queues: %w", err)
	}
	return out, nil
}
