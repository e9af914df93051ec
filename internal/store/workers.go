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

// InsertJob stores a job published over HTTP: r (format ojs, state
// available, no next_retry_at) gets the next job number as its DLQ offset
// and is due for a fetch at fetchAt. It is committed when InsertJob returns.
// A payload Postgres cannot hold as jsonb is left out, the value kept, as
// ingest does (r.PayloadOmitted).
func (s *Store) InsertJob(ctx context.Context, r *dlq.Record, fetchAt time.Time) error {
	return s.InsertJobWithAttributes(ctx, r, fetchAt, nil)
}

// InsertJobWithAttributes is InsertJob that also keeps attrs, the
// attributes of the job's envelope Redrive does not act on (a JSON object,
// or nil: none), in the same transaction. JobLease reads them back.
func (s *Store) InsertJobWithAttributes(ctx context.Context, r *dlq.Record, fetchAt time.Time, attrs json.RawMessage) error {
	if r.Format != dlq.FormatOJS || r.NextRetryAt != nil {
		return fmt.Errorf("insert job %s: not a job published over HTTP", r.ID)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		seq, err := s.q.NextJobSeq(ctx, tx)
		if err != nil {
			return fmt.Errorf("number job: %w", err)
		}
		r.DLQ = dlq.Coord{Topic: "", Partition: -1, Offset: seq, Timestamp: r.CreatedAt}
		recs := []dlq.Record{*r}
		var res InsertResult
		if err := insertDegrading(ctx, tx, recs, 0, &res); err != nil {
			return err
		}
		if res.N != 1 {
			return fmt.Errorf("job %s was not stored", r.ID)
		}
		r.PayloadOmitted = res.Degraded(0)
		if _, err = tx.Exec(ctx, "UPDATE redrive_lifecycle SET fetch_at = $2 WHERE id = $1", r.ID, fetchAt); err != nil {
			return err
		}
		if len(attrs) > 0 {
			if err := s.q.SetJobAttributes(ctx, tx, attrs, r.ID); err != nil {
				return fmt.Errorf("keep attributes: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("insert job %s: %w", r.ID, err)
	}
	return nil
}

// FetchParams asks for up to Limit due records of Queues for Worker.
type FetchParams struct {
	// Queues are the queues asked for; jobs published over HTTP are taken
	// from any of them.
	Queues []string
	// PullQueues are those of Queues whose policy says redelivery.mode:
	// pull: their records are taken too.
	PullQueues []string
	// Worker names the worker the jobs are leased to; "" leases them to an
	// anonymous worker (no worker_id).
	Worker string
	Limit  int
	Now    time.Time
	Lease  time.Duration
}

// Fetched is a record a fetch leased, and when it had been due.
type Fetched struct {
	ID    string
	DueAt time.Time
}

// FetchJobs leases up to Limit due records, oldest due first (see
// FetchParams), in one statement that commits at once: each is available,
// attempt + 1, held by the worker until Now + Lease.
func (s *Store) FetchJobs(ctx context.Context, p *FetchParams) ([]Fetched, error) {
	rows, err := s.q.FetchJobs(ctx, s.pool, dbsqlc.FetchJobsParams{Now: p.Now, LeaseMs: p.Lease.Milliseconds(), WorkerID: p.Worker,
		PullQueues: nonNil(p.PullQueues), Queues: nonNil(p.Queues), Max: int32(p.Limit)})
	if err != nil {
		return nil, fmt.Errorf("fetch jobs: %w", err)
	}
	out := make([]Fetched, len(rows))
	for i, r := range rows {
		out[i] = Fetched{ID: r.ID, DueAt: r.DueAt}
	}
	// An UPDATE returns its rows in the order it wrote them, not in the
	// order its subquery chose them.
	slices.SortFunc(out, func(a, b Fetched) int {
		return cmp.Or(a.DueAt.Compare(b.DueAt), strings.Compare(a.ID, b.ID))
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
	l := Lease{Until: row.LeaseUntil, FetchAt: row.FetchAt, Result: row.Result, Attributes: row.Attributes}
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
