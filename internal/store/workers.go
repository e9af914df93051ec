package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/store/internal/dbsqlc"
)

// Workers over HTTP (docs/api.md#workers). A job published over HTTP is a
// record of format ojs that waits for a worker's fetch on fetch_at — never on
// next_retry_at, the only column the Kafka scheduler reads, and a table
// constraint keeps it so. Records of a pull-mode queue wait on next_retry_at
// as any record does; the scheduler skips their queue by its policy. A fetch
// leases records to a worker (lease_until, worker_id); an ack completes one,
// a nack or an expired lease is a failed attempt that the retry policy judges.
// A lease holds until lease_until inclusive and has expired once lease_until
// is before "now" (the caller's clock, to the microsecond Postgres keeps),
// whether or not the sweep has failed its attempt yet: an ack or nack then
// is refused with ErrLeaseExpired.

// ErrNotLeased is returned when a job is acked, nacked or expired that no
// worker holds (any more).
var ErrNotLeased = errors.New("the job is not held by a worker")

// ErrLeaseExpired is returned when a job is acked or nacked whose lease
// passed before the ack or nack came, and the sweep has not yet failed the
// attempt (it still shows the lease).
var ErrLeaseExpired = errors.New("the job's lease expired")

// ErrLeaseHeldByOther is returned when a job is acked or nacked by a worker
// that names itself, and another worker holds the job's lease (OJS worker
// protocol §5.6: only the worker that claimed the job may ack or fail it).
var ErrLeaseHeldByOther = errors.New("another worker holds the job's lease")

// ErrDuplicateJob is returned when a job published over HTTP names an id
// (a client-chosen one) that a record already has.
var ErrDuplicateJob = errors.New("a record with this id exists")

// DuplicateJobError says which job of a batch named a taken id.
type DuplicateJobError struct {
	ID string
	// Index is the job's index in the batch.
	Index int
}

func (e *DuplicateJobError) Error() string { return "job " + e.ID + ": " + ErrDuplicateJob.Error() }

func (e *DuplicateJobError) Unwrap() error { return ErrDuplicateJob }

// NewJob is a job published over HTTP as InsertJobs stores it.
type NewJob struct {
	// Record is format ojs, state available, without next_retry_at; its DLQ
	// offset is the next job number, set by InsertJobs.
	Record *dlq.Record
	// FetchAt is when it is due for a fetch (its delay_until, or now).
	FetchAt time.Time
	// Priority orders a queue's due jobs for a fetch, highest first.
	Priority int16
	// VisibilityMs is the job's own lease length, used when a fetch names
	// none; TimeoutMs its execution timeout. nil: none.
	VisibilityMs, TimeoutMs *int64
	// Attributes are the attributes of the job's envelope Redrive does not
	// act on (a JSON object, or nil: none). JobLease reads them back.
	Attributes json.RawMessage
	// Unique, when set, makes the job a duplicate of a job holding the same
	// uniqueness key.
	Unique *UniqueClaim
}

// InsertJob stores one job published over HTTP, due for a fetch at fetchAt,
// with no options (InsertJobs).
func (s *Store) InsertJob(ctx context.Context, r *dlq.Record, fetchAt time.Time) error {
	_, err := s.InsertJobs(ctx, []NewJob{{Record: r, FetchAt: fetchAt}}, fetchAt)
	return err
}

// InsertJobs stores jobs published over HTTP at now, all or none, in one
// transaction committed when it returns. A job whose id a record already has
// is refused (*DuplicateJobError, ErrDuplicateJob): ids a client chose are
// checked first, and a race between two publishers ends in the unique
// violation of the same id. A job whose uniqueness key another job holds is
// refused (*UniqueDuplicateError), or, when its claim says Ignore, not
// stored: holders names, by index, the job holding its key ("" for the jobs
// stored). A payload Postgres cannot hold as jsonb is left out, the value
// kept, as ingest does (r.PayloadOmitted).
func (s *Store) InsertJobs(ctx context.Context, jobs []NewJob, now time.Time) (holders []string, err error) {
	for _, j := range jobs {
		if j.Record.Format != dlq.FormatOJS || j.Record.NextRetryAt != nil {
			return nil, fmt.Errorf("insert job %s: not a job published over HTTP", j.Record.ID)
		}
	}
	var current int // the job being stored, for a duplicate's error
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		holders = make([]string, len(jobs))
		for i, j := range jobs {
			current = i
			if holders[i], err = s.insertJob(ctx, tx, j, now); err != nil {
				return err
			}
		}
		return nil
	})
	var dup *UniqueDuplicateError
	switch {
	case errors.As(err, &dup):
		dup.Index = current
		return nil, dup
	case isUniqueViolation(err) || errors.Is(err, ErrDuplicateJob):
		return nil, &DuplicateJobError{ID: jobs[current].Record.ID, Index: current}
	case err != nil:
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	return holders, nil
}

// insertJob stores one job within tx (InsertJobs), or returns the job
// holding its uniqueness key when its claim says Ignore.
func (s *Store) insertJob(ctx context.Context, tx pgx.Tx, j NewJob, now time.Time) (string, error) {
	r := j.Record
	taken, err := s.q.JobExists(ctx, tx, r.ID)
	if err != nil {
		return "", fmt.Errorf("check job id: %w", err)
	}
	if taken {
		return "", ErrDuplicateJob
	}
	if j.Unique != nil {
		holder, state, err := s.claimUnique(ctx, tx, j.Unique, r.ID, r.CreatedAt, now)
		switch {
		case err != nil:
			return "", err
		case holder != "" && j.Unique.Ignore:
			return holder, nil
		case holder != "":
			return "", &UniqueDuplicateError{Key: j.Unique.Key, Holder: holder, HolderState: state}
		}
	}
	seq, err := s.q.NextJobSeq(ctx, tx)
	if err != nil {
		return "", fmt.Errorf("number job: %w", err)
	}
	r.DLQ = dlq.Coord{Topic: "", Partition: -1, Offset: seq, Timestamp: r.CreatedAt}
	recs := []dlq.Record{*r}
	var res InsertResult
	if err := insertDegrading(ctx, tx, recs, 0, &res); err != nil {
		return "", err
	}
	if res.N != 1 {
		return "", fmt.Errorf("job %s was not stored", r.ID)
	}
	r.PayloadOmitted = res.Degraded(0)
	if err := s.q.SetJobOptions(ctx, tx, dbsqlc.SetJobOptionsParams{ID: r.ID, FetchAt: j.FetchAt, Priority: j.Priority,
		VisibilityMs: j.VisibilityMs, TimeoutMs: j.TimeoutMs}); err != nil {
		return "", fmt.Errorf("set job options: %w", err)
	}
	if len(j.Attributes) > 0 {
		if err := s.q.SetJobAttributes(ctx, tx, j.Attributes, r.ID); err != nil {
			return "", fmt.Errorf("keep attributes: %w", err)
		}
	}
	return "", nil
}

// FetchParams asks for up to Limit due records of Queues for Worker.
type FetchParams struct {
	// Queues are the queues asked for, first the most wanted (OJS worker
	// protocol §6.3); jobs published over HTTP are taken from any of them.
	Queues []string
	// PullQueues are those of Queues whose policy says redelivery.mode:
	// pull: their records are taken too.
	PullQueues []string
	// Worker names the worker the jobs are leased to; "" leases them to an
	// anonymous worker (no worker_id).
	Worker string
	Limit  int
	Now    time.Time
	// Lease is the fetch's lease length; 0: each job's own visibility
	// timeout, else DefaultLease.
	Lease, DefaultLease time.Duration
}

// Fetched is a record a fetch leased, and when it had been due.
type Fetched struct {
	ID    string
	DueAt time.Time
	// QueueRank is its queue's place in the fetch's queues (1: first).
	QueueRank int64
	Priority  int16
}

// FetchJobs leases up to Limit due records (see FetchParams) in one
// statement that commits at once, in the fetch's order: by queue as named,
// highest priority first, oldest due first. Each is available, attempt + 1,
// held by the worker for its lease.
func (s *Store) FetchJobs(ctx context.Context, p *FetchParams) ([]Fetched, error) {
	arg := dbsqlc.FetchJobsParams{Now: p.Now, DefaultLeaseMs: p.DefaultLease.Milliseconds(), WorkerID: p.Worker,
		PullQueues: nonNil(p.PullQueues), Queues: nonNil(p.Queues), Max: int32(p.Limit)}
	if p.Lease > 0 {
		ms := p.Lease.Milliseconds()
		arg.LeaseMs = &ms
	}
	rows, err := s.q.FetchJobs(ctx, s.pool, arg)
	if err != nil {
		return nil, fmt.Errorf("fetch jobs: %w", err)
	}
	out := make([]Fetched, len(rows))
	for i, r := range rows {
		out[i] = Fetched{ID: r.ID, DueAt: r.DueAt, QueueRank: r.QueueRank, Priority: r.Priority}
	}
	// An UPDATE returns its rows in the order it wrote them, not in the
	// order its subquery chose them.
	slices.SortFunc(out, func(a, b Fetched) int {
		return cmp.Or(cmp.Compare(a.QueueRank, b.QueueRank), cmp.Compare(b.Priority, a.Priority),
			a.DueAt.Compare(b.DueAt), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// AckJob completes a record whose lease holds at now with the worker's
// result (nil: none). worker, when not "", must hold the lease (a lease
// taken by an anonymous fetch is anyone's). ErrNotFound when there is no
// such record, ErrLeaseExpired when its lease passed before now,
// ErrNotLeased when no worker holds it, ErrLeaseHeldByOther when another
// worker than worker does.
func (s *Store) AckJob(ctx context.Context, id, worker string, result json.RawMessage, now time.Time) error {
	_, err := s.q.AckJob(ctx, s.pool, dbsqlc.AckJobParams{Now: now, Result: result, ID: id, WorkerID: worker})
	if errors.Is(err, pgx.ErrNoRows) {
		l, err := s.JobLease(ctx, id)
		if err != nil {
			return err
		}
		return l.refusal(worker, now)
	}
	if err != nil {
		return fmt.Errorf("ack job %s: %w", id, err)
	}
	return nil
}

// Lease is a job's view beyond its record: the worker holding it and until
// when, when it is due for a fetch (jobs published over HTTP), and the
// result it was acked with.
type Lease struct {
	Until *time.Time
	// LeaseMs is the length of the current lease; Deadline is when the
	// current attempt's execution timeout ends (nil: none).
	LeaseMs  *int64
	Deadline *time.Time
	// Priority, VisibilityMs and TimeoutMs are the job's enqueue options.
	Priority                int16
	VisibilityMs, TimeoutMs *int64
	// Worker is the lease holder's worker_id, "" for an anonymous fetch.
	Worker  string
	FetchAt *time.Time
	Result  json.RawMessage
	// Attributes are the attributes of a published job's envelope that
	// Redrive keeps without acting on them (a JSON object), or nil.
	Attributes json.RawMessage
}

// refusal is why an ack or nack by worker ("" : unnamed) at now cannot take
// the job, or nil when it can: ErrNotLeased, ErrLeaseExpired or
// ErrLeaseHeldByOther.
func (l Lease) refusal(worker string, now time.Time) error {
	switch {
	case l.Until == nil:
		return ErrNotLeased
	case l.ExpiredAt(now):
		return ErrLeaseExpired
	case worker != "" && l.Worker != "" && worker != l.Worker:
		return ErrLeaseHeldByOther
	}
	return nil
}

func leaseOf(row dbsqlc.JobLeaseRow) Lease {
	l := Lease{Until: row.LeaseUntil, FetchAt: row.FetchAt, Result: row.Result, Attributes: row.Attributes,
		LeaseMs: row.LeaseMs, Deadline: row.DeadlineAt, Priority: row.Priority, VisibilityMs: row.VisibilityMs, TimeoutMs: row.TimeoutMs}
	if row.WorkerID != nil {
		l.Worker = *row.WorkerID
	}
	return l
}

// ExpiredAt says whether the lease passed before now: a lease holds until
// Until inclusive, compared to the microsecond Postgres keeps (as the
// statements compare it). No lease has not expired.
func (l Lease) ExpiredAt(now time.Time) bool {
	return l.Until != nil && l.Until.Before(now.Truncate(time.Microsecond))
}

// JobLease reads a record's lease, or ErrNotFound.
func (s *Store) JobLease(ctx context.Context, id string) (Lease, error) {
	row, err := s.q.JobLease(ctx, s.pool, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Lease{}, ErrNotFound
	}
	if err != nil {
		return Lease{}, fmt.Errorf("read lease of %s: %w", id, err)
	}
	return leaseOf(row), nil
}

// ExpiredLeases lists up to limit records whose lease passed before now,
// oldest expiry first.
func (s *Store) ExpiredLeases(ctx context.Context, now time.Time, limit int) ([]string, error) {
	ids, err := s.q.ExpiredLeases(ctx, s.pool, now, int32(limit))
	if err != nil {
		return nil, fmt.Errorf("list expired leases: %w", err)
	}
	return ids, nil
}

// JobFailure is what becomes of a leased record after a failed attempt.
type JobFailure struct {
	// State is retryable or discarded; Exhaustion is set when discarded.
	State      dlq.State
	Exhaustion dlq.Exhaustion
	// Errors is the record's whole new error history, oldest first.
	Errors []dlq.ErrorEntry
	// DueAt is when a retryable record is due again.
	DueAt *time.Time
	// Fingerprint is the incident of the latest error ("" keeps it).
	Fingerprint string
	Now         time.Time
}

// FailJob locks leased record id and saves what decide makes of its failed
// attempt, in one transaction, judging its lease at now (the caller's
// clock). expired (the lease sweep) only takes a record whose lease passed
// before now: ErrNotLeased when it still holds. Otherwise (a worker's nack)
// only one whose lease holds at now: ErrLeaseExpired when it passed;
// ErrLeaseHeldByOther when worker is not "" and another worker holds it.
// ErrNotFound: no such record; ErrNotLeased: no worker holds it. A
// retryable job published over HTTP is due on fetch_at, any other record on
// next_retry_at; a discarded one is due to be archived.
func (s *Store) FailJob(ctx context.Context, id, worker string, now time.Time, expired bool,
	decide func(r *dlq.Record, l Lease) (*JobFailure, error)) (*dlq.Record, error) {
	var out *dlq.Record
	run := func(mode jsonMode) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, "SELECT "+storedSQL+" FROM redrive_record WHERE id = $1 FOR UPDATE", id)
			if err != nil {
				return err
			}
			r, err := pgx.CollectExactlyOneRow(rows, scanRecord)
			if errors.Is(err, pgx.ErrNoRows) {
				return ErrNotFound
			}
			if err != nil {
				return err
			}
			row, err := s.q.JobLease(ctx, tx, id)
			if err != nil {
				return err
			}
			l := leaseOf(row)
			switch {
			case l.Until == nil, expired && !l.ExpiredAt(now):
				return ErrNotLeased
			case !expired:
				if err := l.refusal(worker, now); err != nil {
					return err
				}
			}
			f, err := decide(&r, l)
			if err != nil {
				return err
			}
			r.State, r.Exhaustion, r.Errors, r.UpdatedAt = f.State, f.Exhaustion, f.Errors, f.Now
			r.NextRetryAt, r.DiscardedAt = nil, nil
			if f.State == dlq.StateDiscarded {
				r.DiscardedAt = &f.Now
			} else {
				r.NextRetryAt = f.DueAt
			}
			if f.Fingerprint != "" {
				r.Fingerprint = f.Fingerprint
			}
			errs, err := encodeErrors(r.Errors, mode)
			if err != nil {
				return fmt.Errorf("encode errors: %w", err)
			}
			_, err = tx.Exec(ctx, `WITH l AS (
					UPDATE redrive_lifecycle SET state = $2, exhaustion = $3, error_type = $5,
					next_retry_at = CASE WHEN format = 'ojs' THEN NULL ELSE $6::timestamptz END,
					fetch_at = CASE WHEN format = 'ojs' THEN $6::timestamptz END,
					discarded_at = $7, updated_at = $8, fingerprint = coalesce(nullif($10, ''), fingerprint),
					lease_until = NULL, worker_id = NULL,
					`+archiveAgainIf(`$2 = 'discarded'`)+`
					WHERE id = $1 RETURNING id)
				UPDATE redrive_record_data d SET errors = $4, error_type = $5, failed_at = $9,
					fingerprint = coalesce(nullif($10, ''), d.fingerprint)
				FROM l WHERE d.id = l.id`,
				r.ID, string(r.State), nullIfEmpty(r.Exhaustion), errs, clean(r.LastError().Type),
				f.DueAt, r.DiscardedAt, f.Now, FailedAt(&r), f.Fingerprint)
			if err != nil {
				return err
			}
			out = &r
			return nil
		})
	}
	err := run(asJSON)
	if rowFault(err) {
		err = run(asText)
	}
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrNotLeased), errors.Is(err, ErrLeaseExpired), errors.Is(err, ErrLeaseHeldByOther):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("fail job %s: %w", id, err)
	}
	return out, nil
}

// TimedOut says whether the lease ends at the attempt's execution deadline:
// once it passes, the attempt failed by its timeout, not by a worker gone
// quiet.
func (l Lease) TimedOut() bool {
	return l.Until != nil && l.Deadline != nil && !l.Until.Before(*l.Deadline)
}

// ErrJobTerminal is returned when a job to cancel is completed, discarded or
// cancelled already.
var ErrJobTerminal = errors.New("the job is in a terminal state")

// CancelJob cancels job id at now (OJS HTTP binding §9.4): a job published
// over HTTP that is available, scheduled, retryable or held by a worker
// becomes discarded, exhaustion cancelled; a worker's later ack or nack of
// it is refused (ErrNotLeased). It returns the job's state before, as the
// OJS view names it. ErrNotFound: no such record; ErrJobTerminal: the job is
// terminal already, or is a record read from Kafka (not a job to cancel).
func (s *Store) CancelJob(ctx context.Context, id string, now time.Time) (string, error) {
	previous, err := s.q.CancelJob(ctx, s.pool, now, id)
	if errors.Is(err, pgx.ErrNoRows) {
		exists, xerr := s.q.JobExists(ctx, s.pool, id)
		switch {
		case xerr != nil:
			return "", fmt.Errorf("cancel job %s: %w", id, xerr)
		case !exists:
			return "", ErrNotFound
		}
		return "", ErrJobTerminal
	}
	if err != nil {
		return "", fmt.Errorf("cancel job %s: %w", id, err)
	}
	return previous, nil
}

// Job is a record with its lease, as GetJobs reads it.
type Job struct {
	Record *dlq.Record
	Lease  Lease
}

// GetJobs reads the records of ids with their leases in two statements,
// keyed by id; an id with no record is left out. A fetch reads the jobs it
// leased so, not one record and one lease at a time.
func (s *Store) GetJobs(ctx context.Context, ids []string) (map[string]Job, error) {
	rows, err := s.q.RecordGetMany(ctx, s.pool, ids)
	if err != nil {
		return nil, fmt.Errorf("get jobs: %w", err)
	}
	out := make(map[string]Job, len(rows))
	for i := range rows {
		row := dbsqlc.RecordGetRow(rows[i])
		r, err := recordOf(&row)
		if err == nil {
			err = showInFlight(&r, row.ClaimPrior)
		}
		if err != nil {
			return nil, fmt.Errorf("get job %s: %w", row.ID, err)
		}
		out[r.ID] = Job{Record: &r}
	}
	leases, err := s.q.JobLeases(ctx, s.pool, ids)
	if err != nil {
		return nil, fmt.Errorf("get job leases: %w", err)
	}
	for _, l := range leases {
		if j, ok := out[l.ID]; ok {
			j.Lease = leaseOf(dbsqlc.JobLeaseRow{LeaseUntil: l.LeaseUntil, WorkerID: l.WorkerID, FetchAt: l.FetchAt,
				Result: l.Result, Attributes: l.Attributes, Priority: l.Priority, VisibilityMs: l.VisibilityMs,
				TimeoutMs: l.TimeoutMs, LeaseMs: l.LeaseMs, DeadlineAt: l.DeadlineAt})
			out[l.ID] = j
		}
	}
	return out, nil
}
