package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/store/internal/dbsqlc"
)

// ErrConflict is returned when a record exists but is in no state for the
// change asked (a retry of a completed record).
var ErrConflict = errors.New("record is in a conflicting state")

// ErrInFlight is the conflict of a retry of a record a scheduler is
// producing right now (see Record.InFlight); it is an ErrConflict.
var ErrInFlight = fmt.Errorf("%w: the record is being redelivered right now", ErrConflict)

// RetryableStates are the states an operator may retry a record from: every
// state but completed. A dead letter or discard comes back, a waiting retry is
// brought forward, and an available record — queued, waiting for an
// acknowledgement, or unacknowledged — is sent again; but never one a
// scheduler is producing right now (in flight), which retries leave out
// (filter.Scope.InFlight, ErrInFlight).
var RetryableStates = []dlq.State{dlq.StateDiscarded, dlq.StateRetryable, dlq.StateAvailable}

// makeAvailable is the one definition of "make a record available again"
// (docs/api.md, OJS dead-letter spec §6.1), the SET list (over the
// lifecycle, redrive_lifecycle) of every statement that does: a manual retry
// (RetryRecord, RetryBatch, RetryOldest) and a replay (Replay). The record is
// available, its attempt reset, redelivered
// as soon as the scheduler sees it, nothing of its exhaustion, completion,
// acknowledgement or last redelivery failure left; the id and error history
// are kept. @available_at is the time of the change; NULL is Postgres's now().
//
// A job published over HTTP (format ojs) is made due for a worker's fetch
// (fetch_at) instead, never for the scheduler (next_retry_at), and a
// worker's lease on any record ends (workers.go).
const makeAvailable = `state = 'available', attempt = 0,
	next_retry_at = CASE WHEN format = 'ojs' THEN NULL ELSE coalesce(@available_at::timestamptz, now()) END,
	fetch_at = CASE WHEN format = 'ojs' THEN coalesce(@available_at::timestamptz, now()) END,
	lease_until = NULL, worker_id = NULL, enqueued_at = coalesce(@available_at::timestamptz, now()),
	exhaustion = NULL, discarded_at = NULL, redelivery_failure = NULL, updated_at = coalesce(@available_at::timestamptz, now()),
	completed_at = NULL, completed_by = NULL, ack_due_at = NULL, unacknowledged_at = NULL`

// RetryParams is a manual retry of one record with optional changes.
type RetryParams struct {
	ID string
	// Redelivery, when non-nil, replaces the record's pending redelivery
	// changes (target topic, headers, edited value); the original key, value
	// and headers stay as received.
	Redelivery *dlq.Redelivery
	// Meta is merged into the record's meta (jsonb ||) when non-empty.
	Meta json.RawMessage
	// Retry, when non-empty, replaces the record's effective retry policy,
	// and MaxAttempts its max_attempts.
	Retry       json.RawMessage
	MaxAttempts int
}

// RetryRecord retries one record: ErrNotFound when it does not exist,
// ErrConflict when its state does not allow a retry (see RetryableStates),
// ErrInFlight when a scheduler is producing it right now.
func (s *Store) RetryRecord(ctx context.Context, p *RetryParams) (*dlq.Record, error) {
	redeliv, err := encodeRedelivery(p.Redelivery)
	if err != nil {
		return nil, fmt.Errorf("encode redelivery: %w", err)
	}
	var meta, retry []byte
	if len(p.Meta) > 0 {
		meta = p.Meta
	}
	if len(p.Retry) > 0 {
		retry = p.Retry
	}
	// The wide row is written only when the retry changes it.
	q := `WITH l AS (UPDATE redrive_lifecycle SET ` + makeAvailable + `
		WHERE id = @id AND state = ANY(@states) AND NOT ` + inFlightSQL + ` RETURNING id)`
	if redeliv != nil || meta != nil || retry != nil {
		q += `, d AS (UPDATE redrive_record_data d
		SET redelivery = CASE WHEN @redelivery::jsonb IS NULL THEN redelivery ELSE @redelivery::jsonb END,
			meta = CASE WHEN @meta::jsonb IS NULL THEN meta ELSE meta || @meta::jsonb END,
			retry = coalesce(@retry::jsonb, retry),
			max_attempts = CASE WHEN @retry::jsonb IS NULL THEN max_attempts ELSE @max_attempts END
		FROM l WHERE d.id = l.id)`
	}
	var r dlq.Record
	err = retryContended(ctx, func() error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var n int
			err := tx.QueryRow(ctx, q+" SELECT count(*) FROM l", pgx.NamedArgs{"id": p.ID, "redelivery": redeliv, "meta": meta,
				"retry": retry, "max_attempts": p.MaxAttempts, "states": stateStrings(RetryableStates), "available_at": nil}).Scan(&n)
			if err != nil {
				return err
			}
			if n == 0 {
				return pgx.ErrNoRows
			}
			// The record as the retry left it: a statement's own changes are
			// not visible to it, the transaction's next one sees them.
			rows, err := tx.Query(ctx, "SELECT "+storedSQL+" FROM redrive_record WHERE id = $1", p.ID)
			if err != nil {
				return err
			}
			r, err = pgx.CollectExactlyOneRow(rows, scanRecord)
			return err
		})
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, s.whyNot(ctx, p.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("retry record %s: %w", p.ID, err)
	}
	return &r, nil
}

// whyNot tells ErrNotFound, ErrInFlight and ErrConflict apart after a
// guarded retry matched nothing.
func (s *Store) whyNot(ctx context.Context, id string) error {
	inFlight, err := s.q.RecordInFlight(ctx, s.pool, id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ErrNotFound
	case err != nil:
		return fmt.Errorf("look up record %s: %w", id, err)
	case inFlight:
		return ErrInFlight
	}
	return ErrConflict
}

// DeleteRecord deletes one record, or returns ErrNotFound. A record the
// scheduler is producing right now is waited for.
func (s *Store) DeleteRecord(ctx context.Context, id string) (BatchRow, error) {
	var d dbsqlc.RecordDeleteRow
	err := retryContended(ctx, func() (err error) {
		d, err = s.q.RecordDelete(ctx, s.pool, id)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return BatchRow{}, ErrNotFound
	}
	if err != nil {
		return BatchRow{}, fmt.Errorf("delete record %s: %w", id, err)
	}
	return BatchRow{ID: d.ID, Queue: d.Queue, Type: d.Type, KeyPrefix: d.KeyPrefix, KeySize: int(d.KeySize)}, nil
}

// BatchRow is a record a bulk change touched.
type BatchRow struct {
	ID, Queue, Type string
	// KeyPrefix is the start of the record key (its first BatchKeyBytes
	// bytes; nil for a null key), KeySize the whole key's size (-1: null):
	// lifecycle events carry the key's start.
	KeyPrefix []byte
	KeySize   int
}

// BatchKeyBytes is how much of a record key a BatchRow holds: what a
// lifecycle event shows of it (events.KeyBytes).
const BatchKeyBytes = 128

// batchRowsOf are a BatchRow's columns, in order, of the wide row aliased t.
func batchRowsOf(t string) string {
	return t + ".id, " + t + ".queue, " + t + ".type, substring(" + t + ".key from 1 for " + strconv.Itoa(BatchKeyBytes) + "), coalesce(octet_length(" + t + ".key), -1)"
}

// changeSQL is a statement that changes the records whose ids sel selects
// (and locks): their lifecycles by lifeSet (a SET list over
// redrive_lifecycle) and, unless dataSet is "", their wide rows by dataSet (a
// SET list over redrive_record_data, which may read the lifecycle's id and
// attempt); it returns each changed record's BatchRow, as changed.
func changeSQL(sel, lifeSet, dataSet string) string {
	q := "WITH l AS (UPDATE redrive_lifecycle SET " + lifeSet + " WHERE id IN (" + sel + ") RETURNING id, attempt) "
	if dataSet == "" {
		return q + "SELECT " + batchRowsOf("d") + " FROM redrive_record_data d JOIN l ON l.id = d.id"
	}
	return q + "UPDATE redrive_record_data d SET " + dataSet + " FROM l WHERE d.id = l.id RETURNING " + batchRowsOf("d")
}

// deleteSQL is a statement that deletes the records whose ids sel selects
// (and locks), both rows of each and their DLQ coordinates, and returns
// their BatchRows.
func deleteSQL(sel string) string {
	return "WITH l AS (DELETE FROM redrive_lifecycle WHERE id IN (" + sel + ") RETURNING id), " +
		"c AS (DELETE FROM redrive_record_coord c USING l WHERE c.id = l.id) " +
		"DELETE FROM redrive_record_data d USING l WHERE d.id = l.id RETURNING " + batchRowsOf("d")
}

// BatchParams is one batch of a bulk operation.
type BatchParams struct {
	Filter filter.Filter
	// Scope narrows Filter to what the operation may touch (a retry is
	// narrowed further to RetryableStates, not in flight).
	Scope filter.Scope
	// AfterID is the keyset cursor: only records with a greater id are touched.
	AfterID string
	// Limit is the most records touched.
	Limit int
	// At is the time of a retry (its records are due then); zero:
	// Postgres's now().
	At time.Time
	// Target, for a retry, sets each record's redelivery target ("group",
	// "topic"; "": left as it is), keeping the rest of its pending changes.
	Target string
}

// availableAt is p.At as the @available_at of makeAvailable.
func (p *BatchParams) availableAt() any {
	if p.At.IsZero() {
		return nil
	}
	return p.At
}

// BatchResult is what one batch did.
type BatchResult struct {
	// N is how many records were changed.
	N int
	// LastID is the greatest id changed, or "" when none was.
	LastID string
	// Rows are the records changed.
	Rows []BatchRow
	// Skipped are the records of the batch a patched retry left as they
	// were (LastID counts them: the cursor moves past them).
	Skipped []SkippedRecord
	// InFlight counts the records the batch went past, up to LastID, that
	// it would have taken but for a scheduler producing them right now
	// (a batch whose scope leaves records in flight alone: retries and
	// queue deletes). The cursor moves past them: the task never gets
	// back to them.
	InFlight int
}

// RetryBatch retries up to Limit matching records in id order. Rows another
// statement holds (a claim being taken, ingest joining a repeat failure) are
// waited for, not skipped: the keyset cursor moves past every id of a batch,
// so a skipped row would never be seen again. Those statements are short and
// none waits on Kafka, so the waits are too. Only records in
// RetryableStates and not in flight are retried, whatever the filter says.
func (s *Store) RetryBatch(ctx context.Context, tx *Tx, p *BatchParams) (BatchResult, error) {
	sc := retryScope(p.Scope)
	args := pgx.NamedArgs{"available_at": p.availableAt()}
	dataSet := ""
	if p.Target != "" {
		args["target"] = p.Target
		dataSet = "redelivery = coalesce(redelivery, '{}'::jsonb) || jsonb_build_object('target', @target::text)"
	}
	return batch(ctx, tx, p, &sc, args, func(sel string) string { return changeSQL(sel, makeAvailable, dataSet) })
}

// afterCursor bounds a batch to the records after its cursor (@after_id) on
// both sides of the view: its id is the wide row's, and through it alone the
// lifecycle side was read from the first row of its primary key in every
// batch, filtering out all that the earlier batches took (migration 00221).
const afterCursor = " AND id > @after_id AND lifecycle_id > @after_id"

// PatchFunc decides a patched retry of one record: its redelivery edit,
// or why it is skipped (skip set: the record is left as it is). An error
// fails the whole batch (nothing of it is changed).
type PatchFunc func(r *dlq.Record) (rd *dlq.Redelivery, skip string, err error)

// PatchRetryBatch retries up to Limit matching records in id order as
// RetryBatch does, each with the redelivery edit fn gives it; records fn
// skips are left as they were and listed in the result. The records are
// read and locked first, fn runs for each (outside Postgres), then those
// it edited are retried in one statement: a record is retried with its
// edit, or not at all.
func (s *Store) PatchRetryBatch(ctx context.Context, tx *Tx, p *BatchParams, fn PatchFunc) (BatchResult, error) {
	sc := retryScope(p.Scope)
	args := pgx.NamedArgs{}
	cond := where(&p.Filter, &sc, "f_", args)
	if p.AfterID != "" {
		args["after_id"] = p.AfterID
		cond += afterCursor
	}
	args["limit"] = p.Limit
	rows, err := tx.tx.Query(ctx, "SELECT "+storedSQL+" FROM redrive_record WHERE "+cond+" ORDER BY id LIMIT @limit FOR UPDATE", args)
	if err != nil {
		return BatchResult{}, fmt.Errorf("patch batch: %w", err)
	}
	recs, err := pgx.CollectRows(rows, scanRecord)
	if err != nil {
		return BatchResult{}, fmt.Errorf("patch batch: %w", err)
	}
	var res BatchResult
	ids := make([]string, 0, len(recs))
	edits := make([][]byte, 0, len(recs))
	for i := range recs {
		r := &recs[i]
		if r.ID > res.LastID {
			res.LastID = r.ID
		}
		rd, skip, err := fn(r)
		if err != nil {
			return BatchResult{}, err
		}
		if skip != "" {
			res.Skipped = append(res.Skipped, SkippedRecord{ID: r.ID, Message: skip})
			continue
		}
		b, err := encodeRedelivery(rd)
		if err != nil {
			return BatchResult{}, fmt.Errorf("encode redelivery of %s: %w", r.ID, err)
		}
		ids, edits = append(ids, r.ID), append(edits, b)
	}
	if len(ids) == 0 {
		return res, passedInFlight(ctx, tx, p, &sc, &res)
	}
	q := `WITH l AS (UPDATE redrive_lifecycle SET ` + makeAvailable + ` WHERE id = ANY(@ids::uuid[]) RETURNING id)
		UPDATE redrive_record_data d SET redelivery = e.redelivery
		FROM unnest(@ids::uuid[], @edits::jsonb[]) AS e(edit_id, redelivery), l
		WHERE d.id = e.edit_id AND l.id = e.edit_id RETURNING ` + batchRowsOf("d")
	rows, err = tx.tx.Query(ctx, q, pgx.NamedArgs{"available_at": p.availableAt(), "ids": ids, "edits": edits})
	if err != nil {
		return BatchResult{}, fmt.Errorf("patch batch: %w", err)
	}
	if res.Rows, err = pgx.CollectRows(rows, pgx.RowToStructByPos[BatchRow]); err != nil {
		return BatchResult{}, fmt.Errorf("patch batch: %w", err)
	}
	res.N = len(res.Rows)
	return res, passedInFlight(ctx, tx, p, &sc, &res)
}

// PurgeBatch deletes up to Limit matching records in id order (rows held by
// another transaction are waited for, as in RetryBatch).
func (s *Store) PurgeBatch(ctx context.Context, tx *Tx, p *BatchParams) (BatchResult, error) {
	return batch(ctx, tx, p, &p.Scope, pgx.NamedArgs{}, deleteSQL)
}

// batch runs stmt(sel), sel selecting the ids of the batch's records
// (locked): a statement returning their BatchRows.
func batch(ctx context.Context, tx *Tx, p *BatchParams, sc *filter.Scope, args pgx.NamedArgs, stmt func(sel string) string) (BatchResult, error) {
	cond := where(&p.Filter, sc, "f_", args)
	if p.AfterID != "" {
		args["after_id"] = p.AfterID
		cond += afterCursor
	}
	args["limit"] = p.Limit
	sel := "SELECT id FROM redrive_record WHERE " + cond + " ORDER BY id LIMIT @limit FOR UPDATE"
	rows, err := tx.tx.Query(ctx, stmt(sel), args)
	if err != nil {
		return BatchResult{}, fmt.Errorf("bulk batch: %w", err)
	}
	changed, err := pgx.CollectRows(rows, pgx.RowToStructByPos[BatchRow])
	if err != nil {
		return BatchResult{}, fmt.Errorf("bulk batch: %w", err)
	}
	res := BatchResult{N: len(changed), Rows: changed}
	for _, r := range changed {
		if r.ID > res.LastID {
			res.LastID = r.ID
		}
	}
	return res, passedInFlight(ctx, tx, p, sc, &res)
}

// passedInFlight counts, into res.InFlight, the records from p's cursor up
// to res.LastID that the batch would have taken (p.Filter narrowed by sc)
// but for being in flight, when sc leaves records in flight alone. It reads
// the (small) claim table, in the batch's transaction.
func passedInFlight(ctx context.Context, tx *Tx, p *BatchParams, sc *filter.Scope, res *BatchResult) error {
	if res.LastID == "" || sc.InFlight == nil || *sc.InFlight {
		return nil
	}
	n, err := countInFlight(ctx, tx.tx, &p.Filter, *sc, p.AfterID, res.LastID)
	if err != nil {
		return fmt.Errorf("count records in flight: %w", err)
	}
	res.InFlight = int(n)
	return nil
}

// countInFlight counts the records in flight that f narrowed by sc would
// match but for their claim, with an id after afterID ("": any) and up to
// upTo ("": any). A claim writes each record in the state its produce will
// leave it in: the states of f and sc are matched with the state it had
// before the claim, as reads show it (inflight.go).
func countInFlight(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, f *filter.Filter, sc filter.Scope, afterID, upTo string) (int64, error) {
	states := sc.States
	switch {
	case f.State != "" && states == nil:
		states = []dlq.State{f.State}
	case f.State != "":
		states = intersectStates([]dlq.State{f.State}, states) // "none" when they do not meet: matches nothing
	}
	g := *f
	g.State = ""
	inFlight := true
	sc.States, sc.InFlight = nil, &inFlight
	args := pgx.NamedArgs{}
	cond := where(&g, &sc, "f_", args)
	if len(states) > 0 {
		args["prior_states"] = stateStrings(states)
		cond += priorStateIn
	}
	if afterID != "" {
		args["after_id"] = afterID
		cond += afterCursor
	}
	if upTo != "" {
		args["up_to"] = upTo
		cond += " AND id <= @up_to"
	}
	var n int64
	err := db.QueryRow(ctx, "SELECT count(*) FROM redrive_record WHERE "+cond, args).Scan(&n)
	return n, err
}

// priorStateIn keeps the records in flight whose state before their claim
// is one of @prior_states.
const priorStateIn = ` AND (SELECT c.prior_states[array_position(c.ids, id)] FROM redrive_claim c
	WHERE c.token = claim_token) = ANY(@prior_states::text[])`

// InFlightAfter counts the records after the cursor afterID that a task of
// kind (with f narrowed by sc) leaves alone because they are in flight: the
// records it goes past when it ends (retries and queue deletes; 0 for other
// kinds).
func (s *Store) InFlightAfter(ctx context.Context, kind TaskKind, f *filter.Filter, sc filter.Scope, afterID string) (int64, error) {
	switch {
	case kind == TaskRetry:
		sc = retryScope(sc)
	case kind.QueueDelete():
		sc = queueDeleteScope(sc)
	default:
		return 0, nil
	}
	n, err := countInFlight(ctx, s.pool, f, sc, afterID, "")
	if err != nil {
		return 0, fmt.Errorf("count records in flight: %w", err)
	}
	return n, nil
}

// RemainsAfter reports whether a record matching f narrowed by sc (and by
// kind's state restriction) is left after the cursor: a batch can change
// nothing while records remain, when every row it locked changed under it
// meanwhile.
func (s *Store) RemainsAfter(ctx context.Context, kind TaskKind, f *filter.Filter, sc filter.Scope, afterID string) (bool, error) {
	switch {
	case kind == TaskRetry:
		sc = retryScope(sc)
	case kind.QueueDelete():
		sc = queueDeleteScope(sc)
	}
	args := pgx.NamedArgs{}
	cond := where(f, &sc, "f_", args)
	if afterID != "" {
		args["after_id"] = afterID
		cond += afterCursor
	}
	var ok bool
	if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM redrive_record WHERE "+cond+")", args).Scan(&ok); err != nil {
		return false, fmt.Errorf("check remaining records: %w", err)
	}
	return ok, nil
}

// retryScope narrows sc to what a retry may touch: RetryableStates, not in
// flight.
func retryScope(sc filter.Scope) filter.Scope {
	sc.States = intersectStates(sc.States, RetryableStates)
	notInFlight := false
	sc.InFlight = &notInFlight
	return sc
}

// CountRetryable counts the records a bulk retry with f narrowed by sc would
// retry: those in RetryableStates, from the count table when the filter
// allows, less those in flight (a few batches at most, found from the claim
// table).
func (s *Store) CountRetryable(ctx context.Context, f *filter.Filter, sc filter.Scope) (int64, error) {
	sc.States = intersectStates(sc.States, RetryableStates)
	n, err := s.count(ctx, f, &sc)
	if err != nil || sc.InFlight != nil {
		return n, err
	}
	inFlight := true
	sc.InFlight = &inFlight
	busy, err := s.count(ctx, f, &sc)
	return n - busy, err
}

// RetryOldest retries up to n of the oldest records matching f narrowed by
// sc (a compatibility requeue) and returns their ids.
func (s *Store) RetryOldest(ctx context.Context, f *filter.Filter, sc filter.Scope, n int) ([]string, error) {
	sc = retryScope(sc)
	args := pgx.NamedArgs{"available_at": nil, "limit": n}
	cond := where(f, &sc, "f_", args)
	q := `UPDATE redrive_lifecycle SET ` + makeAvailable + ` WHERE id IN (
		SELECT id FROM redrive_record WHERE ` + cond + ` ORDER BY id LIMIT @limit FOR UPDATE) RETURNING id`
	rows, err := s.pool.Query(ctx, q, args)
	if err != nil {
		return nil, fmt.Errorf("requeue records: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("requeue records: %w", err)
	}
	return ids, nil
}

// Redelivered counts how many of ids were produced to Kafka at or after
// their retry (redelivered_at set and next_retry_at cleared).
func (s *Store) Redelivered(ctx context.Context, ids []string) (int, error) {
	n, err := s.q.RecordsRedelivered(ctx, s.pool, ids)
	if err != nil {
		return 0, fmt.Errorf("check redelivery: %w", err)
	}
	return int(n), nil
}

// PurgeAll deletes every record matching f in batches and returns how many.
func (s *Store) PurgeAll(ctx context.Context, f *filter.Filter) (int64, error) {
	var total int64
	for {
		var res BatchResult
		err := s.WithTx(ctx, func(ctx context.Context, tx *Tx) error {
			var err error
			res, err = s.PurgeBatch(ctx, tx, &BatchParams{Filter: *f, Limit: 5000})
			return err
		})
		if err != nil {
			return total, err
		}
		total += int64(res.N)
		if res.N == 0 {
			return total, nil
		}
	}
}

// intersectStates narrows want (nil: any) to allowed.
func intersectStates(want, allowed []dlq.State) []dlq.State {
	if len(want) == 0 {
		return allowed
	}
	out := []dlq.State{}
	for _, w := range want {
		for _, a := range allowed {
			if w == a {
				out = append(out, w)
			}
		}
	}
	if len(out) == 0 {
		return []dlq.State{"none"} // matches nothing
	}
	return out
}

func stateStrings(ss []dlq.State) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}
