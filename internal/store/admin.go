package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
)

// The OJS admin API's reads (docs/api.md#admin): records counted and listed
// by OJS job state. Redrive keeps four states (retryable, available,
// completed, discarded); the OJS states map onto them so:
//
//   - active: available and held by a worker (lease_until not passed);
//   - scheduled: available, a job published over HTTP due for a fetch later
//     (fetch_at after now);
//   - available: available, neither of those (an expired lease the sweep has
//     not failed yet counts here);
//   - retryable: retryable (waiting for a redelivery or a worker's next
//     fetch);
//   - completed: completed (redelivered or acked);
//   - cancelled: discarded with exhaustion cancelled (an operator gave up on
//     it: a queue deleted with strategy discard, a job cancelled);
//   - discarded: discarded otherwise (dead_letter, discard).
//
// Counts come from the statistics table the triggers keep, plus, for what
// depends on the time (held, due later), the lifecycle's small indexes:
// never a scan of the records.

// OJS job states (admin spec §7.1).
const (
	JobAvailable = "available"
	JobActive    = "active"
	JobScheduled = "scheduled"
	JobRetryable = "retryable"
	JobCompleted = "completed"
	JobDiscarded = "discarded"
	JobCancelled = "cancelled"
)

// JobStates lists the OJS job states, in lifecycle order.
var JobStates = []string{JobScheduled, JobAvailable, JobActive, JobRetryable, JobCompleted, JobDiscarded, JobCancelled}

// JobCounts are a queue's records by OJS job state.
type JobCounts struct {
	Available, Active, Scheduled, Retryable, Completed, Discarded, Cancelled int64
}

// Depth is the queue's depth (OJS backpressure spec §3): its jobs
// available, scheduled or retryable — not settled, not held by a worker.
func (c JobCounts) Depth() int64 { return c.Available + c.Scheduled + c.Retryable }

// Add adds o to c.
func (c *JobCounts) Add(o JobCounts) {
	c.Available += o.Available
	c.Active += o.Active
	c.Scheduled += o.Scheduled
	c.Retryable += o.Retryable
	c.Completed += o.Completed
	c.Discarded += o.Discarded
	c.Cancelled += o.Cancelled
}

// JobCounts counts, at now, the records of each queue with records by OJS
// job state: of queue alone when it is not "", of the queues matching
// queueGlobs (nil: every queue). It reads the statistics table (a row per
// queue, state and exhaustion), the records held by a worker (the lease
// index: leased records only) and, for the queues with available records,
// their jobs due later (one index range per queue, over those jobs only).
func (s *Store) JobCounts(ctx context.Context, queue string, queueGlobs []string, now time.Time) (map[string]JobCounts, error) {
	byState := map[string]map[string]int64{}
	if queue == "" {
		all, err := s.QueueCounts(ctx)
		if err != nil {
			return nil, err
		}
		byState = all
	} else {
		rows, err := s.q.StatsQueueCounts(ctx, s.pool, queue)
		if err != nil {
			return nil, fmt.Errorf("count jobs: %w", err)
		}
		m := map[string]int64{}
		for _, r := range rows {
			m[r.State] += r.N
			if r.Exhaustion != "" {
				m[r.Exhaustion] += r.N
			}
		}
		byState[queue] = m
	}
	out := map[string]JobCounts{}
	var waiting []string
	for q, m := range byState {
		if !inGlobs(queueGlobs, q) {
			continue
		}
		out[q] = JobCounts{Available: m[string(dlq.StateAvailable)], Retryable: m[string(dlq.StateRetryable)],
			Completed: m[string(dlq.StateCompleted)], Cancelled: m[string(dlq.ExhaustionCancelled)],
			Discarded: m[string(dlq.StateDiscarded)] - m[string(dlq.ExhaustionCancelled)]}
		if m[string(dlq.StateAvailable)] > 0 {
			waiting = append(waiting, q)
		}
	}
	if len(waiting) == 0 {
		return out, nil
	}
	held, err := s.q.HeldPerQueue(ctx, s.pool, now)
	if err != nil {
		return nil, fmt.Errorf("count held jobs: %w", err)
	}
	for _, r := range held {
		if c, ok := out[r.Queue]; ok {
			c.Active = r.N
			out[r.Queue] = c
		}
	}
	due, err := s.q.ScheduledPerQueue(ctx, s.pool, waiting, now)
	if err != nil {
		return nil, fmt.Errorf("count scheduled jobs: %w", err)
	}
	for _, r := range due {
		c := out[r.Queue]
		c.Scheduled = r.N
		out[r.Queue] = c
	}
	for q, c := range out {
		// The statistics table and the lifecycle are read one after the
		// other: a job fetched in between is counted held but not yet
		// available. Never below zero.
		c.Available = max(c.Available-c.Active-c.Scheduled, 0)
		out[q] = c
	}
	return out, nil
}

// QueueDepth is queue's depth at now (JobCounts.Depth): one read of the
// statistics table and of the lease index.
func (s *Store) QueueDepth(ctx context.Context, queue string, now time.Time) (int64, error) {
	n, err := s.q.QueueDepth(ctx, s.pool, queue, now)
	if err != nil {
		return 0, fmt.Errorf("read queue depth: %w", err)
	}
	return max(n, 0), nil
}

// Throughput is how many records of a queue completed, and how many failed
// (their latest failure), in a window.
type Throughput struct {
	Completed, Failed int64
}

// QueueThroughput counts, for each of queues, the records completed
// (redelivered or acked) after since and those whose latest failure (stored
// from Kafka, a worker's nack, an expired lease) happened after since: one
// range of an index per queue, over the window's records only. Queues
// without any are absent.
func (s *Store) QueueThroughput(ctx context.Context, queues []string, since time.Time) (map[string]Throughput, error) {
	out := map[string]Throughput{}
	if len(queues) == 0 {
		return out, nil
	}
	done, err := s.q.CompletedPerQueue(ctx, s.pool, queues, since)
	if err != nil {
		return nil, fmt.Errorf("count completed records: %w", err)
	}
	for _, r := range done {
		t := out[r.Queue]
		t.Completed = r.N
		out[r.Queue] = t
	}
	failed, err := s.q.FailedPerQueue(ctx, s.pool, queues, since)
	if err != nil {
		return nil, fmt.Errorf("count failed records: %w", err)
	}
	for _, r := range failed {
		t := out[r.Queue]
		t.Failed = r.N
		out[r.Queue] = t
	}
	return out, nil
}

// JobListParams selects a page of records as OJS jobs.
type JobListParams struct {
	// Filter selects by the record filter's keys (queue, type, since,
	// until); its State and Exhaustion are set from State.
	Filter filter.Filter
	// State is an OJS job state (JobStates), "" for any.
	State string
	// TypePrefix keeps the records whose type starts with it ("" : any).
	TypePrefix string
	// Scope narrows (the queues the caller may read).
	Scope filter.Scope
	// Asc lists oldest first; otherwise newest first (by id: UUIDv7, the
	// order of creation).
	Asc           bool
	Offset, Limit int
	// Now judges leases and due times.
	Now time.Time
}

// JobRow is a record as a row of the job list.
type JobRow struct {
	ID, Queue, Type string
	// State is the OJS job state at the time of the listing.
	State                string
	Exhaustion           *string
	Attempt, MaxAttempts int
	Priority             int16
	CreatedAt            time.Time
	EnqueuedAt           *time.Time
	// DueAt is when the job is due: for a redelivery (next_retry_at) or a
	// worker's fetch (fetch_at).
	DueAt                    *time.Time
	StartedAt                *time.Time
	CompletedAt, DiscardedAt *time.Time
	LeaseUntil               *time.Time
	stateRaw, exhaustionRaw  string
	nextRetryAt, fetchAt     *time.Time
}

// JobPage is a page of the job list.
type JobPage struct {
	Jobs []JobRow
	// Total counts the matching records across pages: exact, a lower bound
	// (TotalCapped) or the planner's estimate (TotalEstimated), as the
	// record list's is.
	Total                       int64
	TotalCapped, TotalEstimated bool
	HasMore                     bool
}

// JobStateOf is the OJS state, at now, of a record in Redrive state st with
// exhaustion exh, lease until lease and due for a fetch at fetchAt.
func JobStateOf(st dlq.State, exh string, lease, fetchAt *time.Time, now time.Time) string {
	switch {
	case st == dlq.StateAvailable && lease != nil && !lease.Before(now):
		return JobActive
	case st == dlq.StateAvailable && fetchAt != nil && fetchAt.After(now):
		return JobScheduled
	case st == dlq.StateDiscarded && exh == string(dlq.ExhaustionCancelled):
		return JobCancelled
	}
	return string(st)
}

// jobStateConds are, per OJS state, the Redrive state and exhaustion it
// reads, and the condition on the lifecycle it adds (over redrive_record,
// with @now).
var jobStateConds = map[string]struct {
	state      dlq.State
	exhaustion dlq.Exhaustion
	extra      string
}{
	JobAvailable: {dlq.StateAvailable, "", "(lease_until IS NULL OR lease_until < @now) AND (fetch_at IS NULL OR fetch_at <= @now)"},
	JobActive:    {"", "", "lease_until >= @now"},
	JobScheduled: {dlq.StateAvailable, "", "fetch_at > @now"},
	JobRetryable: {dlq.StateRetryable, "", ""},
	JobCompleted: {dlq.StateCompleted, "", ""},
	JobDiscarded: {dlq.StateDiscarded, "", "exhaustion IS DISTINCT FROM 'cancelled'"},
	JobCancelled: {dlq.StateDiscarded, dlq.ExhaustionCancelled, ""},
}

// ListJobs reads a page of the records p selects, as OJS jobs, by id, and
// their total.
func (s *Store) ListJobs(ctx context.Context, p *JobListParams) (*JobPage, error) {
	f := p.Filter
	extra := ""
	if p.State != "" {
		c, ok := jobStateConds[p.State]
		if !ok {
			return nil, fmt.Errorf("list jobs: unknown state %q", p.State)
		}
		f.State, f.Exhaustion, extra = c.state, c.exhaustion, c.extra
	}
	if p.TypePrefix != "" {
		extra = and(extra, "starts_with(type, @type_prefix)")
	}
	args := pgx.NamedArgs{"now": p.Now, "type_prefix": p.TypePrefix, "limit": p.Limit + 1, "offset": p.Offset}
	cond := and(where(&f, &p.Scope, "f_", args), extra)
	order := "DESC"
	if p.Asc {
		order = "ASC"
	}
	q := `SELECT r.id, r.queue, r.type, r.state, coalesce(r.exhaustion, ''), r.attempt, r.max_attempts,
		(SELECT pl.priority FROM redrive_lifecycle pl WHERE pl.id = r.id), r.created_at, r.enqueued_at, r.next_retry_at,
		r.fetch_at, r.redelivered_at, r.completed_at, r.discarded_at, r.lease_until
		FROM redrive_record r WHERE ` + cond + ` ORDER BY r.id ` + order + ` LIMIT @limit OFFSET @offset`
	rows, err := collect(ctx, s.pool, "list jobs", func(row pgx.CollectableRow) (JobRow, error) {
		var j JobRow
		err := row.Scan(&j.ID, &j.Queue, &j.Type, &j.stateRaw, &j.exhaustionRaw, &j.Attempt, &j.MaxAttempts, &j.Priority,
			&j.CreatedAt, &j.EnqueuedAt, &j.nextRetryAt, &j.fetchAt, &j.StartedAt, &j.CompletedAt, &j.DiscardedAt, &j.LeaseUntil)
		return j, err
	}, q, args)
	if err != nil {
		return nil, err
	}
	page := &JobPage{Jobs: rows}
	if len(rows) > p.Limit {
		page.Jobs, page.HasMore = rows[:p.Limit], true
	}
	for i := range page.Jobs {
		j := &page.Jobs[i]
		j.State = JobStateOf(dlq.State(j.stateRaw), j.exhaustionRaw, j.LeaseUntil, j.fetchAt, p.Now)
		if j.exhaustionRaw != "" {
			e := j.exhaustionRaw
			j.Exhaustion = &e
		}
		j.DueAt = j.nextRetryAt
		if j.fetchAt != nil {
			j.DueAt = j.fetchAt
		}
	}
	if err := s.countJobs(ctx, p, &f, page); err != nil {
		return nil, err
	}
	return page, nil
}

// countJobs sets page's total: from the statistics table when the filter
// reads only its dimensions (a state of its own, or discarded less
// cancelled, or available less held and due later), else by a bounded scan.
func (s *Store) countJobs(ctx context.Context, p *JobListParams, f *filter.Filter, page *JobPage) error {
	scan := func(state string) (int64, bool, bool, error) {
		g := *f
		extra := ""
		if state != "" {
			c := jobStateConds[state]
			g.State, g.Exhaustion, extra = c.state, c.exhaustion, c.extra
		}
		if p.TypePrefix != "" {
			extra = and(extra, "starts_with(type, @type_prefix)")
		}
		return s.countWith(ctx, &g, &p.Scope, extra, pgx.NamedArgs{"now": p.Now, "type_prefix": p.TypePrefix})
	}
	var n int64
	var capped, estimated bool
	var err error
	switch {
	case p.TypePrefix != "" || p.State == JobActive || p.State == JobScheduled:
		n, capped, estimated, err = scan(p.State)
	case p.State == JobDiscarded:
		cancelled := *f
		cancelled.Exhaustion = dlq.ExhaustionCancelled
		var m int64
		var mc, me bool
		if n, capped, estimated, err = s.countFor(ctx, f, &p.Scope); err == nil {
			m, mc, me, err = s.countFor(ctx, &cancelled, &p.Scope)
			n, capped, estimated = max(n-m, 0), capped || mc, estimated || me
		}
	case p.State == JobAvailable:
		if n, capped, estimated, err = s.countFor(ctx, f, &p.Scope); err == nil {
			for _, st := range []string{JobActive, JobScheduled} {
				var m int64
				var mc, me bool
				if m, mc, me, err = scan(st); err != nil {
					break
				}
				n, capped, estimated = max(n-m, 0), capped || mc, estimated || me
			}
		}
	default:
		n, capped, estimated, err = s.countFor(ctx, f, &p.Scope)
	}
	if err != nil {
		return err
	}
	page.Total, page.TotalCapped, page.TotalEstimated = n, capped, estimated
	if !page.HasMore && (len(page.Jobs) > 0 || p.Offset == 0) {
		// The last page: every match has been read (the count and the page
		// are read one after the other; the page is what was found).
		page.Total, page.TotalCapped, page.TotalEstimated = int64(p.Offset+len(page.Jobs)), false, false
	}
	return nil
}

// countWith is countFor with a condition over redrive_record beside f's
// (extra, binding into args): counted by a scan of at most countCap+1
// records within countBudget, else the planner's estimate.
func (s *Store) countWith(ctx context.Context, f *filter.Filter, sc *filter.Scope, extra string, args pgx.NamedArgs) (n int64, capped, estimated bool, err error) {
	if extra == "" {
		return s.countFor(ctx, f, sc)
	}
	args["count_cap"] = countCap + 1
	cond := and(where(f, sc, "f_", args), extra)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, setCountBudget); err != nil {
			return err
		}
		return tx.QueryRow(ctx, countScanSQL("redrive_record", cond), args).Scan(&n)
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "57014" && ctx.Err() == nil { // query_canceled: over budget
		est, err := s.estimate(ctx, "SELECT 1 FROM redrive_record WHERE "+cond, args)
		return est, false, true, err
	}
	if err != nil {
		return 0, false, false, fmt.Errorf("count jobs: %w", err)
	}
	if n > countCap {
		return countCap, true, false, nil
	}
	return n, false, false, nil
}

// and joins two conditions, either of which may be "".
func and(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return "(" + a + ") AND (" + b + ")"
}
