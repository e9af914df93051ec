package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/dlq"
)

// WaitingQueues lists the queues that have records waiting for (re)delivery,
// due or not, by a loose scan of the (queue, next_retry_at) index: its cost
// grows with the number of queues, not of records.
func (s *Store) WaitingQueues(ctx context.Context) ([]string, error) {
	queues, err := s.q.WaitingQueues(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("list waiting queues: %w", err)
	}
	return queues, nil
}

// NextDue returns, per queue, the earliest time a record of it is due.
// Queues with nothing waiting are absent.
func (s *Store) NextDue(ctx context.Context, queues []string) (map[string]time.Time, error) {
	rows, err := s.q.NextDue(ctx, s.pool, queues)
	if err != nil {
		return nil, fmt.Errorf("next due time: %w", err)
	}
	out := make(map[string]time.Time, len(queues))
	for _, r := range rows {
		if at, ok := r.Due.(time.Time); ok {
			out[r.Queue] = at
		}
	}
	return out, nil
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
	// AwaitAck says the queue's records wait for the consumer's
	// acknowledgement once produced (policy completion: ack), for AckTimeout;
	// otherwise (completion: redelivered) a record is completed by its produce.
	AwaitAck   bool
	AckTimeout time.Duration
	// After, when set, claims only records that come after it in due order
	// (their due time, then their id): the scheduler passes the last record
	// it claimed of the queue while a backlog drains, so that a claim starts
	// where the last one ended instead of scanning past the index entries
	// of every record claimed since the table was last vacuumed. Records
	// before it that are still due (one another transaction held locked, one
	// due earlier than it) are claimed by the next claim without it.
	After *DueKey
	// MaxBytes, when set, bounds the claim's keys and values: it takes
	// records in due order while those before them add up to less than
	// MaxBytes, so it holds at most MaxBytes and one more record, and never
	// fewer than one. The records it leaves are due still (Claim.Cut).
	MaxBytes int64
}

// DueKey is a record's place in due order: its due time, then its id.
type DueKey struct {
	At time.Time
	ID string
}

// After reports whether k comes after o in due order. Ids are UUIDs in
// their canonical text (lower-case hex): compared as strings, they order as
// Postgres orders uuid values.
func (k DueKey) After(o DueKey) bool {
	if !k.At.Equal(o.At) {
		return k.At.After(o.At)
	}
	return k.ID > o.ID
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
	// meta; Source.Group, who a redelivery to the group is for), with Attempt already the new attempt, State available, and
	// NextRetryAt the time they were due.
	Records []dlq.Record
	// prior is each record's state before the claim (prior[i] is
	// Records[i]'s), for Settle to restore.
	prior []prior
	// index finds a record by id; built on the first failure, which is the
	// only time it is needed.
	index map[string]int
	// last is the claimed record that comes last in due order.
	last DueKey
	// cut says MaxBytes left records it found due.
	cut bool
	// values holds the records' keys and values; its store's memory takes
	// them and the record slices back when the claim is released.
	values arena
}

// Cut reports whether the claim stopped at its MaxBytes before its Limit
// with records still due: more may be claimed at once.
func (c *Claim) Cut() bool { return c.cut }

// Last is the key of the claimed record that comes last in due order (the
// zero key for an empty claim): the After of a claim that goes on from here.
func (c *Claim) Last() DueKey { return c.last }

// prior is what ClaimDue changed, so a failed produce can undo it.
type prior struct {
	state         string
	redeliveredAt *time.Time
	failures      int // consecutive failed produces before this claim
}

// ClaimDue claims up to Limit records of a queue due at Now, skipping records
// other claims are taking, and marks them redelivered at Now — attempt + 1,
// nothing waiting — in the state their produce will leave them in: completed
// by their redelivery, or (AwaitAck) available until AckTimeout — and records
// the claim, all in one statement that commits at once. Completing records as
// they are claimed costs nothing (the claim writes each row anyway), where
// completing them when the claim is settled would write every row twice; a
// record whose produce fails is put back by Settle, and while the claim is
// open the record is in flight (Record.InFlight), no retry touches it, and
// reads show it as it was before the claim (inflight.go). Its last
// redelivery failure stays on it until a produce succeeds (Settle clears
// it). An empty claim (nothing due) has no token.
//
// It is the scheduler's hot path: the rows are scanned straight into the
// records it returns, and the JSON columns are decoded only when they hold
// something.
func (s *Store) ClaimDue(ctx context.Context, p *ClaimParams) (*Claim, error) {
	token := uuid.Must(uuid.NewV7()).String()
	maxBytes := p.MaxBytes
	if maxBytes <= 0 {
		maxBytes = math.MaxInt64
	}
	// A prepared statement, whose generic plan Postgres keeps after a few
	// calls (claimSQL says why the plan needs no values).
	statement, args := claimSQL, []any{p.Queue, p.Now, int32(p.Limit), p.AwaitAck,
		p.AckTimeout.Milliseconds(), token, p.Owner, p.Lease.Milliseconds(), maxBytes}
	if p.After != nil {
		statement, args = claimAfterSQL, append(args, p.After.At, p.After.ID)
	}
	rows, err := s.pool.Query(ctx, statement, args...)
	if err != nil {
		return nil, fmt.Errorf("claim due records of %s: %w", p.Queue, err)
	}
	defer rows.Close()
	c := &Claim{values: arena{mem: s.mem}}
	c.Records, c.prior = s.mem.slicesFor(p.Limit)
	locked := 0
	var values *arena
	// No fields when the statement failed: its error comes with rows.Err.
	if fds := rows.FieldDescriptions(); len(fds) > claimedValue &&
		fds[claimedKey].Format == pgx.BinaryFormatCode && fds[claimedValue].Format == pgx.BinaryFormatCode {
		values = &c.values
	}
	for rows.Next() {
		c.Records = append(c.Records, dlq.Record{})
		c.prior = append(c.prior, prior{})
		if err := scanClaimed(rows, values, &c.Records[len(c.Records)-1], &c.prior[len(c.prior)-1], &locked); err != nil {
			return nil, fmt.Errorf("claim due records of %s: %w", p.Queue, err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim due records of %s: %w", p.Queue, err)
	}
	if len(c.Records) > 0 {
		c.Token = token
	}
	c.cut = locked > len(c.Records)
	if !sort.IsSorted(inDueOrder{c}) {
		sort.Sort(inDueOrder{c})
	}
	if n := len(c.Records); n > 0 {
		c.last = dueKeyOf(&c.Records[n-1])
	}
	for i := range c.Records {
		r := &c.Records[i]
		r.RedeliveredAt, r.InFlight = &p.Now, true
		if p.AwaitAck {
			r.State = dlq.StateAvailable
		} else {
			r.State, r.CompletedAt, r.CompletedBy = dlq.StateCompleted, &p.Now, dlq.CompletedByRedelivered
		}
	}
	return c, nil
}

// inDueOrder sorts a claim's records, and their prior states with them, in
// due order: the order the claim's plan reads them in, which its joins keep
// but which no plan promises.
type inDueOrder struct{ c *Claim }

func (o inDueOrder) Len() int { return len(o.c.Records) }
func (o inDueOrder) Less(i, j int) bool {
	return dueKeyOf(&o.c.Records[j]).After(dueKeyOf(&o.c.Records[i]))
}
func (o inDueOrder) Swap(i, j int) {
	o.c.Records[i], o.c.Records[j] = o.c.Records[j], o.c.Records[i]
	o.c.prior[i], o.c.prior[j] = o.c.prior[j], o.c.prior[i]
}

// dueKeyOf is a claimed record's place in due order.
func dueKeyOf(r *dlq.Record) DueKey { return DueKey{At: *r.NextRetryAt, ID: r.ID} }

// claimedKey and claimedValue are the columns of claimSQL's key and value.
const claimedKey, claimedValue = 6, 7

// scanClaimed reads one row of claimSQL into r, what it was before into pr,
// and how many records the claim locked into locked. With values (the key
// and value came in binary, which for bytea is the bytes themselves), the
// key and value are copied into it instead of into two allocations each.
func scanClaimed(rows pgx.Rows, values *arena, r *dlq.Record, pr *prior, locked *int) error {
	var (
		format              string
		attempt, failures   int32
		headers, redelivery []byte
	)
	key, value := any(&r.Key), any(&r.Value)
	if values != nil {
		key, value = nil, nil // copied from the raw row below
	}
	if err := rows.Scan(&r.ID, &r.Queue, &format, &attempt, &r.Source.Partition, &r.Source.Group, key, value,
		&headers, &redelivery, &r.NextRetryAt, &pr.state, &pr.redeliveredAt, &failures, locked); err != nil {
		return err
	}
	if values != nil {
		raw := rows.RawValues()
		r.Key, r.Value = values.copy(raw[claimedKey]), values.copy(raw[claimedValue])
	}
	r.Format, r.Attempt, pr.failures = dlq.Format(format), int(attempt), int(failures)
	if r.Format != dlq.FormatUnparseable {
		r.Source.Topic = r.Queue
	}
	var err error
	if len(headers) > 0 && string(headers) != "[]" {
		if r.Headers, err = decodeHeaders(headers); err != nil {
			return err
		}
	}
	r.Redelivery, err = decodeRedelivery(redelivery)
	return err
}

// claimSQL is ClaimDue's statement: $1 queue, $2 now, $3 the most records,
// $4 await_ack, $5 ack timeout (ms), $6 the claim's token, $7 its owner, $8
// its lease (ms), $9 the most bytes. It writes the lifecycle rows only; the
// wide rows (key, value, headers) are read. claimAfterSQL is the same from a
// place in due order on: $10 its due time, $11 its id.
//
// The records locked past the bytes (sized.before: the keys and values of
// the records before it in due order, from the lifecycle row's bytes) are
// left as they were, and their locks go with the claim's commit; each row
// says how many were locked, for Claim.Cut. The running sum adds ints into
// a bigint, not numerics (a record's bytes past an int's range count as its
// largest value, which no bound reaches).
//
// It runs as a prepared statement whose plan no value changes, so that
// Postgres plans it once per connection (its generic plan) instead of at
// every call, which cost 1.5–2.3 ms a claim of 1,000 over the weeks'
// partitions:
//   - the values the plan would be costed by (the due time, the limit,
//     the place) are read from subqueries, which a plan made with its
//     values costs as unknown too: that plan's cost is the generic plan's,
//     which Postgres then keeps. Costed with the values themselves, a
//     draining backlog's stale statistics (every record was due at once
//     when they were taken; none is now) make it sort every due row of the
//     queue instead of merging the weeks' index scans in order.
//   - the locked ids reach the update as an array that is unnested, which
//     the planner takes for a few rows whatever the claim's size: the
//     update, and the read of the wide rows after it, look each record up
//     by primary key in the one week its id falls in (the others are
//     pruned at run time, row by row). Joined to the locked rows instead,
//     a plan that does not know the limit hashes every lifecycle row; and
//     an id = ANY(array) condition, which prunes no week, probes every
//     week's primary key with every id.
//
// Its rows come in due order as its plan produces them; ClaimDue puts them
// in that order when they do not.
var claimSQL, claimAfterSQL = claimStatement(""),
	claimStatement("AND (d.next_retry_at, d.id) > ROW((SELECT $10::timestamptz), (SELECT $11::uuid))")

func claimStatement(after string) string {
	return `
WITH due AS (
    SELECT d.id, d.state, d.next_retry_at, d.redelivered_at, d.redelivery_failure, d.bytes FROM redrive_lifecycle d
    WHERE d.queue = $1 AND d.next_retry_at <= (SELECT $2::timestamptz) ` + after + `
    ORDER BY d.next_retry_at, d.id LIMIT (SELECT $3::int) FOR UPDATE SKIP LOCKED),
sized AS (
    SELECT due.*, sum(least(due.bytes, 2147483647)::int) OVER (ORDER BY due.next_retry_at, due.id) - due.bytes AS before FROM due),
claimed AS (
    UPDATE redrive_lifecycle r
    SET state = CASE WHEN $4::bool THEN 'available' ELSE 'completed' END,
        completed_at = CASE WHEN $4::bool THEN NULL ELSE $2::timestamptz END,
        completed_by = CASE WHEN $4::bool THEN NULL ELSE 'redelivered' END,
        ack_due_at = CASE WHEN $4::bool THEN $2::timestamptz + interval '1 millisecond' * $5::bigint END,
        unacknowledged_at = NULL,
        attempt = r.attempt + 1, next_retry_at = NULL, exhaustion = NULL,
        discarded_at = NULL, redelivered_at = $2::timestamptz, updated_at = $2::timestamptz,
        claim_token = $6::uuid
    FROM unnest(ARRAY(SELECT sized.id FROM sized WHERE sized.before < $9::bigint)) AS taken(id)
    WHERE r.id = taken.id
    RETURNING r.id, r.attempt),
lease AS (
    INSERT INTO redrive_claim (token, owner, queue, claimed_at, expires_at, ids, prior_states, prior_redelivered_at)
    SELECT $6::uuid, $7::text, $1::text, $2::timestamptz, $2::timestamptz + interval '1 millisecond' * $8::bigint,
        array_agg(sized.id), array_agg(sized.state), array_agg(sized.redelivered_at)
    FROM sized WHERE sized.before < $9::bigint HAVING count(*) > 0)
SELECT claimed.id, w.queue, w.format, claimed.attempt, w.source_partition, w.source_group, w.key, w.value,
    w.headers, w.redelivery, sized.next_retry_at, sized.state, sized.redelivered_at,
    coalesce((sized.redelivery_failure->>'failures')::int, 0)::int AS failures,
    (SELECT count(*) FROM due)::int AS locked
FROM claimed JOIN sized ON sized.id = claimed.id JOIN redrive_record_data w ON w.id = claimed.id`
}

// PriorFailures is how many produces of the record failed in a row before
// this claim (0 for a record of another claim).
func (c *Claim) PriorFailures(id string) int {
	if i, ok := c.find(id); ok {
		return c.prior[i].failures
	}
	return 0
}

// find returns the index of the record with id in Records.
func (c *Claim) find(id string) (int, bool) {
	if c.index == nil {
		c.index = make(map[string]int, len(c.Records))
		for i := range c.Records {
			c.index[c.Records[i].ID] = i
		}
	}
	i, ok := c.index[id]
	return i, ok
}

// FailedDelivery is a claimed record whose produce failed, or was refused.
type FailedDelivery struct {
	ID      string
	Failure dlq.DeliveryFailure
	// Discard keeps the record as a dead letter instead of putting it back:
	// it has nowhere it may be delivered to (dlq.ReasonNotRoutable). Its
	// attempt is put back as it was, the failure stays on it for the API,
	// and its archive copy becomes due.
	Discard bool
}

// Settle ends the claim. Records whose produce failed are put back as they
// were — state, attempt and redelivered_at, not completed, no acknowledgement
// awaited — with the failure stored on them and due again at its
// NextAttemptAt (or, with Discard, discarded as dead letters, attempt and
// redelivered_at put back); the others stay as the claim left them
// (completed, or waiting for their acknowledgement), and are counted as
// retried in the queue's activity for the minute of now. One statement,
// guarded by the claim's token: a record that changed since (a repeat
// failure joined it, an acknowledgement completed it) is left alone.
func (s *Store) Settle(ctx context.Context, c *Claim, failed []FailedDelivery, now time.Time) error {
	if c.Token == "" {
		return nil
	}
	n := len(failed)
	// cleared are the records produced now whose earlier produces failed:
	// their last failure was kept while they were in flight, and goes now.
	cleared := make([]string, 0)
	failedIDs := make(map[string]bool, n)
	for _, f := range failed {
		failedIDs[f.ID] = true
	}
	for i, p := range c.prior {
		if id := c.Records[i].ID; p.failures > 0 && !failedIDs[id] {
			cleared = append(cleared, id)
		}
	}
	ids, states, failures := make([]string, n), make([]string, n), make([][]byte, n)
	redeliveredAt, next := make([]*time.Time, n), make([]*time.Time, n)
	discard := make([]bool, n)
	for i, f := range failed {
		var p prior
		if j, ok := c.find(f.ID); ok {
			p = c.prior[j]
		}
		b, err := json.Marshal(f.Failure)
		if err != nil {
			return fmt.Errorf("settle claim: encode failure: %w", err)
		}
		ids[i], states[i], redeliveredAt[i], failures[i], discard[i] = f.ID, p.state, p.redeliveredAt, b, f.Discard
		if !f.Discard {
			next[i] = &f.Failure.NextAttemptAt
		}
	}
	var (
		ended bool
		err   error
	)
	if n == 0 && len(cleared) == 0 {
		err = s.pool.QueryRow(ctx, endClaimSQL, c.Token, now.Truncate(time.Minute)).Scan(&ended)
	} else {
		err = s.pool.QueryRow(ctx, settleSQL, pgx.QueryExecModeCacheDescribe, c.Token, ids, states, redeliveredAt, failures,
			next, now, now.Truncate(time.Minute), n, discard, cleared).Scan(&ended)
	}
	if err != nil {
		return fmt.Errorf("settle claim %s: %w", c.Token, err)
	}
	if !ended {
		// The claim expired and was rescued: its records are due again.
		return ErrLeaseLost
	}
	return nil
}

// asClaimed holds for a record (r) that is as its claim left it: redelivered
// and waiting for nothing but its outcome — not joined by a repeat failure
// (which sets next_retry_at or discards it), not acknowledged. That is,
// available, or completed by its redelivery.
//
// It is written so that no index can find the rows it allows: the
// statements that use it find their records by id, and a plan made while
// the statistics saw no completed record (a backlog about to drain) would
// otherwise read every completed record through the partial index of
// completed records or (state, id), which costs nothing while they are
// few and grows with every record redelivered. The state is compared with
// <> (never an index condition), and the OR has an arm no index covers (so
// it cannot become a BitmapOr of index scans).
const asClaimed = `r.next_retry_at IS NULL
	AND r.state <> 'retryable' AND r.state <> 'discarded' AND (r.state = 'available' OR r.completed_by = 'redelivered')`

// undoCompletion renders the SET assignments that take back what a claim set
// about completion.
const undoCompletion = `completed_at = NULL, completed_by = NULL, ack_due_at = NULL, unacknowledged_at = NULL`

// endClaimSQL is Settle's statement when every record was produced and none
// had failed before: $1 the claim's token, $2 the minute of now. The claim
// left its records as they are to stay, so it only ends the claim and
// counts them as retried; it reads no record table.
const endClaimSQL = `
		WITH lease AS (DELETE FROM redrive_claim WHERE token = $1 RETURNING queue, cardinality(ids) AS n),
		activity AS (INSERT INTO redrive_queue_activity (queue, minute, retried) SELECT queue, $2, n FROM lease WHERE n > 0)
		SELECT EXISTS (SELECT 1 FROM lease)`

// settleSQL is Settle's statement when records failed, or had failed before:
// $1 the claim's token, $2–$6 and $10 the failed records (id, prior state,
// prior redelivered_at, failure, next attempt, discard), $7 now, $8 its
// minute, $9 how many failed, $11 the produced records whose last
// redelivery failure is cleared. It is planned at every call with its
// values (an unnamed statement), so that the ids prune the weeks.
var settleSQL = `
		WITH lease AS (DELETE FROM redrive_claim WHERE token = $1 RETURNING token, queue, cardinality(ids) AS n),
		undo AS (
			UPDATE redrive_lifecycle r
			SET state = CASE WHEN f.discard THEN 'discarded' ELSE f.state END,
			    exhaustion = CASE WHEN f.discard THEN 'dead_letter' ELSE r.exhaustion END,
			    discarded_at = CASE WHEN f.discard THEN $7 ELSE r.discarded_at END,
			    attempt = r.attempt - 1, next_retry_at = f.next, redelivered_at = f.redelivered_at,
			    redelivery_failure = f.failure, updated_at = $7, ` + undoCompletion + `,
			    ` + archiveAgainIf("f.discard") + `
			FROM lease, unnest($2::uuid[], $3::text[], $4::timestamptz[], $5::jsonb[], $6::timestamptz[], $10::bool[])
			     AS f(id, state, redelivered_at, failure, next, discard)
			-- r.id = ANY($2): the failed records are found by their ids, never
			-- by a scan of the completed records asClaimed would allow.
			WHERE r.id = f.id AND r.id = ANY($2) AND r.claim_token = lease.token AND ` + asClaimed + `
			RETURNING r.id),
		cleared AS (
			UPDATE redrive_lifecycle r SET redelivery_failure = NULL
			FROM lease WHERE r.id = ANY($11) AND r.claim_token = lease.token AND ` + asClaimed + `),
		activity AS (
			INSERT INTO redrive_queue_activity (queue, minute, retried)
			SELECT queue, $8, n - $9 FROM lease WHERE n > $9)
		SELECT EXISTS (SELECT 1 FROM lease)`

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
	}, rescueSQL, pgx.QueryExecModeCacheDescribe, now)
}

// rescueSQL is RescueExpired's statement ($1: now). The records are found by
// their ids (r.id = ANY), never by a scan of the completed records asClaimed
// would allow: it runs every second.
var rescueSQL = `
		WITH expired AS (
			DELETE FROM redrive_claim WHERE token IN (
				SELECT token FROM redrive_claim WHERE expires_at < $1 ORDER BY expires_at LIMIT 100 FOR UPDATE SKIP LOCKED)
			RETURNING token, ids, prior_states, prior_redelivered_at),
		back AS (
			SELECT e.token, u.id, u.state, u.redelivered_at, e.prior_redelivered_at IS NOT NULL AS known
			FROM expired e, unnest(e.ids, e.prior_states, e.prior_redelivered_at) AS u(id, state, redelivered_at))
		UPDATE redrive_lifecycle r
		SET state = back.state, attempt = r.attempt - 1, next_retry_at = $1, updated_at = $1, ` + undoCompletion + `,
		    -- Claims taken before migration 00150 did not keep it.
		    redelivered_at = CASE WHEN back.known THEN back.redelivered_at ELSE r.redelivered_at END
		FROM back
		WHERE r.id = back.id AND r.id = ANY (ARRAY(SELECT id FROM back)) AND r.claim_token = back.token AND ` + asClaimed + `
		RETURNING r.id, r.queue`

// Unacknowledged is a record just marked unacknowledged.
type Unacknowledged struct {
	ID, Queue string
	Attempt   int
}

// MarkUnacknowledged marks up to limit records whose acknowledgement was due
// before now (completion: ack) as unacknowledged, oldest due first, and
// returns them. They stay available, and may be retried. Records a scheduler
// is producing right now are left for a later pass; rows another statement
// holds are skipped. Index redrive_record_ack_due keeps it a range scan.
func (s *Store) MarkUnacknowledged(ctx context.Context, now time.Time, limit int) ([]Unacknowledged, error) {
	rows, err := s.q.MarkUnacknowledged(ctx, s.pool, &now, int32(limit))
	if err != nil {
		return nil, fmt.Errorf("mark unacknowledged records: %w", err)
	}
	out := make([]Unacknowledged, len(rows))
	for i, r := range rows {
		out[i] = Unacknowledged{ID: r.ID, Queue: r.Queue, Attempt: int(r.Attempt)}
	}
	return out, nil
}

// UnacknowledgedQueues counts, for each of queues, its records marked
// unacknowledged. Queues with none are absent. A partial index keeps it cheap.
func (s *Store) UnacknowledgedQueues(ctx context.Context, queues []string) (map[string]int64, error) {
	rows, err := s.q.UnacknowledgedQueues(ctx, s.pool, queues)
	if err != nil {
		return nil, fmt.Errorf("unacknowledged records per queue: %w", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Queue] = r.N
	}
	return out, nil
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
// only the blocked records of those queues are read. Dead letters refused as
// not routable keep their failure but wait for nothing: they do not count.
func (s *Store) BlockedQueues(ctx context.Context, queues []string) (map[string]Blocked, error) {
	rows, err := s.q.BlockedQueues(ctx, s.pool, queues)
	if err != nil {
		return nil, fmt.Errorf("blocked queues: %w", err)
	}
	out := make(map[string]Blocked, len(rows))
	for _, r := range rows {
		out[r.Queue] = Blocked{Records: r.N, Reason: r.Reason, Message: r.Message, Since: r.Since}
	}
	return out, nil
}
