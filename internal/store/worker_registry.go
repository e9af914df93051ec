package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/store/internal/dbsqlc"
)

// The worker registry (docs/api.md#worker-lifecycle; OJS worker protocol §3,
// §4, §10; admin API §9). A worker is known by the worker_id it names itself
// with: it appears on its first heartbeat (Heartbeat) or on a fetch that
// names it (TouchWorker), and is stale once it has not been seen (a heartbeat
// or a fetch) for WorkerHeartbeatTimeout. Its directive is what an operator
// told it (SetWorkerDirective), which the next heartbeat answers; it only
// moves forward, running → quiet → terminate (worker protocol §2.3: "Workers
// MUST NOT transition backward from terminate"). A worker not seen for
// WorkerForgetAfter is forgotten by a later heartbeat. The leases a worker
// holds are the jobs' (redrive_lifecycle.lease_until, worker_id; see
// workers.go): the registry keeps only what the worker reports.

// WorkerState is a worker's lifecycle state (OJS worker protocol §2.1), as it
// reports it or as an operator directs it, or how the registry lists it.
type WorkerState string

// Worker states. Each is further along than the one before it.
const (
	WorkerRunning   WorkerState = "running"
	WorkerQuiet     WorkerState = "quiet"
	WorkerTerminate WorkerState = "terminate"
	// WorkerStale is how a worker not seen for WorkerHeartbeatTimeout is
	// listed; never a directive nor a reported state.
	WorkerStale WorkerState = "stale"
)

// Bounds of the registry.
const (
	// WorkerHeartbeatTimeout is how long a worker may go unseen before it is
	// listed as stale (worker protocol §10.1: "default: 30 seconds"; 6
	// missed heartbeats at the default interval of 5 s).
	WorkerHeartbeatTimeout = 30 * time.Second
	// WorkerForgetAfter is how long a worker may go unseen before a later
	// heartbeat removes it from the registry.
	WorkerForgetAfter = 24 * time.Hour
	// MaxWorkerJobIDs is the most job ids a heartbeat may report, and the
	// registry keeps.
	MaxWorkerJobIDs = 1000
	// MaxWorkerLeasesShown is the most leases WorkerLeases returns.
	MaxWorkerLeasesShown = 1000
)

// ErrWorkerNotFound is returned for a worker the registry does not know.
var ErrWorkerNotFound = errors.New("no such worker")

// ErrWorkerNotStale is returned when a worker seen within the heartbeat
// timeout is deregistered (admin API §9.4: "Only workers that have missed
// their heartbeat deadline can be deregistered").
var ErrWorkerNotStale = errors.New("the worker is not stale")

// ErrWorkerDirectiveBackward is returned when a worker told to terminate is
// told to quiet.
var ErrWorkerDirectiveBackward = errors.New("a worker's directive only moves forward: running, quiet, terminate")

// Valid reports whether s is a state a worker reports or is directed to.
func (s WorkerState) Valid() bool {
	return s == WorkerRunning || s == WorkerQuiet || s == WorkerTerminate
}

// Fetches reports whether a worker in state s (a directive, a reported
// state, or what WorkerDirective answers) is given jobs: only when running
// (worker protocol §6.6; graceful shutdown §5.1: "The backend MUST NOT
// assign new jobs to a quiet worker").
func (s WorkerState) Fetches() bool { return s == WorkerRunning || s == "" }

func (s WorkerState) rank() int {
	switch s {
	case WorkerQuiet:
		return 1
	case WorkerTerminate:
		return 2
	}
	return 0
}

// FurtherState is the state of a and b further along running → quiet →
// terminate; "" counts as running.
func FurtherState(a, b WorkerState) WorkerState {
	if b.rank() > a.rank() {
		return b
	}
	if a == "" {
		return WorkerRunning
	}
	return a
}

func stateOf(directive string, reported *string) WorkerState {
	s := WorkerState(directive)
	if reported != nil {
		s = FurtherState(s, WorkerState(*reported))
	}
	return s
}

// Heartbeat is one heartbeat of a worker (worker protocol §4.2, HTTP
// binding §10.4). Nil fields were not reported: the registry keeps what it
// had.
type Heartbeat struct {
	WorkerID string
	// State is the state the worker reports.
	State       *WorkerState
	Hostname    *string
	PID         *int64
	Queues      []string
	Concurrency *int32
	Labels      []string
	StartedAt   *time.Time
	// ActiveJobs is the number of jobs the worker says it is processing;
	// ActiveJobIDs their ids (at most MaxWorkerJobIDs).
	ActiveJobs   int
	ActiveJobIDs []string
	// Extend are the jobs whose leases the heartbeat extends (UUIDs).
	Extend []string
	// ExtendBy is the visibility timeout the heartbeat asks for; nil: each
	// job's own lease length.
	ExtendBy *time.Duration
	Now      time.Time
}

// HeartbeatResult is what a heartbeat answers.
type HeartbeatResult struct {
	// State is the directive for the worker (worker protocol §4.5): the
	// operator's, or the state the worker reports when that is further
	// along, so that no answer asks a worker to go back.
	State WorkerState
	// Extended are the jobs whose lease the heartbeat extended, by id;
	// Leases says, in the same order, what each lease now is.
	Extended []string
	Leases   []ExtendedLease
}

// ExtendedLease is a job's lease a heartbeat extended.
type ExtendedLease struct {
	ID, Queue, Type string
	Attempt         int
	// Until is the lease's new end.
	Until time.Time
}

// Heartbeat records h in the registry and extends the leases it names that
// the worker (or an anonymous fetch) holds at h.Now, in one statement: each
// is held until h.Now + h.ExtendBy, or + the length of its lease, never past
// the job's execution deadline and never shortened. A listed job the worker
// does not hold (another worker's, acked, expired, unknown) is left alone.
func (s *Store) Heartbeat(ctx context.Context, h *Heartbeat) (*HeartbeatResult, error) {
	if len(h.ActiveJobIDs) > MaxWorkerJobIDs || len(h.Extend) > MaxWorkerJobIDs {
		return nil, fmt.Errorf("heartbeat of worker %s: more than %d job ids", h.WorkerID, MaxWorkerJobIDs)
	}
	p := dbsqlc.WorkerHeartbeatParams{ForgetBefore: h.Now.Add(-WorkerForgetAfter), ID: h.WorkerID, Hostname: h.Hostname,
		Pid: h.PID, Queues: h.Queues, Concurrency: h.Concurrency, Labels: h.Labels, StartedAt: h.StartedAt, Now: h.Now,
		ActiveJobs: int32(min(h.ActiveJobs, 1<<31-1)), ActiveJobIds: nonNil(h.ActiveJobIDs), Extend: nonNil(h.Extend)}
	if h.State != nil {
		st := string(*h.State)
		p.ReportedState = &st
	}
	if h.ExtendBy != nil {
		ms := h.ExtendBy.Milliseconds()
		p.ExtendMs = &ms
	}
	row, err := s.q.WorkerHeartbeat(ctx, s.pool, p)
	if err != nil {
		return nil, fmt.Errorf("heartbeat of worker %s: %w", h.WorkerID, err)
	}
	res := &HeartbeatResult{State: stateOf(row.Directive, row.ReportedState), Extended: nonNil(row.Extended)}
	if n := len(row.Extended); len(row.ExtendedQueues) == n && len(row.ExtendedTypes) == n && len(row.ExtendedAttempts) == n && len(row.ExtendedUntil) == n {
		for i, id := range row.Extended {
			res.Leases = append(res.Leases, ExtendedLease{ID: id, Queue: row.ExtendedQueues[i], Type: row.ExtendedTypes[i],
				Attempt: int(row.ExtendedAttempts[i]), Until: row.ExtendedUntil[i]})
		}
	}
	return res, nil
}

// TouchWorker notes that worker id fetched from queues at now: it is added to
// the registry if new, and seen now; its queues become these unless its
// heartbeats report its own. It returns what WorkerDirective would: a
// fetch gives a worker whose answer does not Fetch no job. One upsert, for
// the fetch of a named worker.
func (s *Store) TouchWorker(ctx context.Context, id string, queues []string, now time.Time) (WorkerState, error) {
	if len(queues) > 100 {
		queues = queues[:100]
	}
	row, err := s.q.TouchWorker(ctx, s.pool, id, nonNil(queues), now)
	if err != nil {
		return "", fmt.Errorf("note fetch of worker %s: %w", id, err)
	}
	return stateOf(row.Directive, row.ReportedState), nil
}

// WorkerDirective is what the next heartbeat of worker id answers: the
// operator's directive, or the state the worker reported when that is
// further along (running, quiet, terminate). A worker the registry does not
// know is running. One primary-key read: a fetch checks it with
// WorkerState.Fetches before leasing anything.
func (s *Store) WorkerDirective(ctx context.Context, id string) (WorkerState, error) {
	row, err := s.q.WorkerDirective(ctx, s.pool, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return WorkerRunning, nil
	}
	if err != nil {
		return "", fmt.Errorf("read directive of worker %s: %w", id, err)
	}
	return stateOf(row.Directive, row.ReportedState), nil
}

// Worker is a worker as the registry knows it.
type Worker struct {
	ID       string
	Hostname *string
	PID      *int64
	// Queues are the queues its heartbeats report (QueuesReported), else
	// those of its latest fetch.
	Queues         []string
	QueuesReported bool
	Concurrency    *int32
	Labels         []string
	// State is how it stands: stale when not seen for
	// WorkerHeartbeatTimeout, else the further of Directive and
	// ReportedState.
	State         WorkerState
	ReportedState *WorkerState
	Directive     WorkerState
	DirectiveAt   *time.Time
	DirectiveBy   *string
	StartedAt     *time.Time
	FirstSeenAt   time.Time
	// LastSeenAt is its latest heartbeat or fetch.
	LastSeenAt      time.Time
	LastHeartbeatAt *time.Time
	Heartbeats      int64
	// ActiveJobs and ActiveJobIDs are what its latest heartbeat reported
	// (nil: it never sent one).
	ActiveJobs   *int32
	ActiveJobIDs []string
	// Leases is how many jobs it holds a lease on (ListWorkers: of the
	// queues the caller may see).
	Leases int64
}

func workerOf(r dbsqlc.RedriveWorker, now time.Time) Worker {
	w := Worker{ID: r.ID, Hostname: r.Hostname, PID: r.Pid, Queues: nonNil(r.Queues), QueuesReported: r.QueuesReported,
		Concurrency: r.Concurrency, Labels: nonNil(r.Labels), Directive: WorkerState(r.Directive), DirectiveAt: r.DirectiveAt,
		DirectiveBy: r.DirectiveBy, StartedAt: r.StartedAt, FirstSeenAt: r.FirstSeenAt, LastSeenAt: r.LastSeenAt,
		LastHeartbeatAt: r.LastHeartbeatAt, Heartbeats: r.Heartbeats, ActiveJobs: r.ActiveJobs, ActiveJobIDs: nonNil(r.ActiveJobIds)}
	if r.ReportedState != nil {
		st := WorkerState(*r.ReportedState)
		w.ReportedState = &st
	}
	w.State = stateOf(r.Directive, r.ReportedState)
	if w.LastSeenAt.Before(now.Add(-WorkerHeartbeatTimeout)) {
		w.State = WorkerStale
	}
	return w
}

// WorkerListParams asks for a page of the workers.
type WorkerListParams struct {
	// QueueGlobs are the queues the caller may see (nil: every queue): it
	// sees the workers whose queues all match them, and no worker that
	// names none; their leases are counted on those queues only.
	QueueGlobs []string
	// Queue ("" : any) keeps the workers that name it; State ("" : any)
	// those in that state.
	Queue string
	State WorkerState
	// Page counts from 1.
	Page, PerPage int
	Now           time.Time
}

// WorkerPage is a page of the workers, by id, and the counts of all those
// the caller may see (of Queue, whatever their state).
type WorkerPage struct {
	Items []Worker
	// Total is how many workers match the params, State included.
	Total int64
	// Summary counts the workers by state.
	Summary WorkerSummary
}

// WorkerSummary counts workers by how they stand.
type WorkerSummary struct {
	Total, Running, Quiet, Terminate, Stale int64
}

// ListWorkers lists a page of the workers (see WorkerListParams).
func (s *Store) ListWorkers(ctx context.Context, p *WorkerListParams) (*WorkerPage, error) {
	staleBefore := p.Now.Add(-WorkerHeartbeatTimeout)
	likes := LikePatterns(p.QueueGlobs)
	all := p.QueueGlobs == nil
	sum, err := s.q.WorkerSummary(ctx, s.pool, dbsqlc.WorkerSummaryParams{StaleBefore: staleBefore, AllQueues: all,
		QueueLikes: likes, Queue: p.Queue})
	if err != nil {
		return nil, fmt.Errorf("count workers: %w", err)
	}
	out := &WorkerPage{Summary: WorkerSummary{Total: sum.Total, Running: sum.Running, Quiet: sum.Quiet,
		Terminate: sum.Terminate, Stale: sum.Stale}}
	out.Total = map[WorkerState]int64{"": sum.Total, WorkerRunning: sum.Running, WorkerQuiet: sum.Quiet,
		WorkerTerminate: sum.Terminate, WorkerStale: sum.Stale}[p.State]
	rows, err := s.q.ListWorkers(ctx, s.pool, dbsqlc.ListWorkersParams{StaleBefore: staleBefore, AllQueues: all,
		QueueLikes: likes, Queue: p.Queue, State: string(p.State), Skip: int32(min((p.Page-1)*p.PerPage, 1<<31-1)),
		Max: int32(p.PerPage)})
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	out.Items = make([]Worker, len(rows))
	ids := make([]string, len(rows))
	for i, r := range rows {
		out.Items[i] = workerOf(dbsqlc.RedriveWorker{ID: r.ID, Hostname: r.Hostname, Pid: r.Pid, Queues: r.Queues,
			QueuesReported: r.QueuesReported, Concurrency: r.Concurrency, Labels: r.Labels, ReportedState: r.ReportedState,
			Directive: r.Directive, DirectiveAt: r.DirectiveAt, DirectiveBy: r.DirectiveBy, StartedAt: r.StartedAt,
			FirstSeenAt: r.FirstSeenAt, LastSeenAt: r.LastSeenAt, LastHeartbeatAt: r.LastHeartbeatAt, Heartbeats: r.Heartbeats,
			ActiveJobs: r.ActiveJobs, ActiveJobIds: r.ActiveJobIds}, p.Now)
		out.Items[i].State = WorkerState(r.State) // as the statement judged it
		ids[i] = r.ID
	}
	if len(ids) == 0 {
		return out, nil
	}
	counts, err := s.q.WorkerLeaseCounts(ctx, s.pool, dbsqlc.WorkerLeaseCountsParams{Ids: ids, Now: p.Now, AllQueues: all, QueueLikes: likes})
	if err != nil {
		return nil, fmt.Errorf("count workers' leases: %w", err)
	}
	for _, c := range counts {
		if i := slices.Index(ids, c.WorkerID); i >= 0 {
			out.Items[i].Leases = c.Leases
		}
	}
	return out, nil
}

// GetWorker reads worker id as it stands at now, or ErrWorkerNotFound. Its
// Leases are all it holds.
func (s *Store) GetWorker(ctx context.Context, id string, now time.Time) (*Worker, error) {
	r, err := s.q.GetWorker(ctx, s.pool, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrWorkerNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read worker %s: %w", id, err)
	}
	w := workerOf(r, now)
	counts, err := s.q.WorkerLeaseCounts(ctx, s.pool, dbsqlc.WorkerLeaseCountsParams{Ids: []string{id}, Now: now, AllQueues: true, QueueLikes: []string{}})
	if err != nil {
		return nil, fmt.Errorf("count leases of worker %s: %w", id, err)
	}
	for _, c := range counts {
		w.Leases = c.Leases
	}
	return &w, nil
}

// CountWorkers counts the workers in the registry, stale ones included (the
// summary total of an unrestricted ListWorkers).
func (s *Store) CountWorkers(ctx context.Context) (int, error) {
	n, err := s.q.CountWorkers(ctx, s.pool)
	if err != nil {
		return 0, fmt.Errorf("count workers: %w", err)
	}
	return int(n), nil
}

// WorkerLease is a job a worker holds a lease on.
type WorkerLease struct {
	JobID, Queue string
	Until        time.Time
}

// WorkerLeases lists the jobs worker id holds a lease on at now, soonest
// expiry first, at most MaxWorkerLeasesShown.
func (s *Store) WorkerLeases(ctx context.Context, id string, now time.Time) ([]WorkerLease, error) {
	rows, err := s.q.WorkerLeases(ctx, s.pool, id, now, MaxWorkerLeasesShown)
	if err != nil {
		return nil, fmt.Errorf("list leases of worker %s: %w", id, err)
	}
	out := make([]WorkerLease, len(rows))
	for i, r := range rows {
		out[i] = WorkerLease{JobID: r.ID, Queue: r.Queue, Until: r.LeaseUntil}
	}
	return out, nil
}

// JobQueues reads the queue of each of ids (UUIDs) that is a record, by id.
func (s *Store) JobQueues(ctx context.Context, ids []string) (map[string]string, error) {
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.q.JobQueues(ctx, s.pool, ids)
	if err != nil {
		return nil, fmt.Errorf("read queues of jobs: %w", err)
	}
	for _, r := range rows {
		out[r.ID] = r.Queue
	}
	return out, nil
}

// SetWorkerDirective tells worker id d (quiet or terminate) on behalf of by,
// at now: its next heartbeat answers it. Telling it what it was told already
// changes nothing (who and when stay the first's). ErrWorkerNotFound;
// ErrWorkerDirectiveBackward when a worker told to terminate is told to
// quiet.
func (s *Store) SetWorkerDirective(ctx context.Context, id string, d WorkerState, by string, now time.Time) error {
	var from []string
	switch d {
	case WorkerQuiet:
		from = []string{string(WorkerRunning), string(WorkerQuiet)}
	case WorkerTerminate:
		from = []string{string(WorkerRunning), string(WorkerQuiet), string(WorkerTerminate)}
	default:
		return fmt.Errorf("direct worker %s: %q is no directive an operator gives", id, d)
	}
	_, err := s.q.SetWorkerDirective(ctx, s.pool, dbsqlc.SetWorkerDirectiveParams{Directive: string(d), Now: now, By: by, ID: id, FromDirectives: from})
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := s.q.WorkerDirective(ctx, s.pool, id); errors.Is(err, pgx.ErrNoRows) {
			return ErrWorkerNotFound
		} else if err != nil {
			return fmt.Errorf("direct worker %s: %w", id, err)
		}
		return ErrWorkerDirectiveBackward
	}
	if err != nil {
		return fmt.Errorf("direct worker %s: %w", id, err)
	}
	return nil
}

// DeregisterWorker removes stale worker id from the registry (admin API §9.4)
// and releases the leases it holds at now, in one transaction: each is made
// to have expired a millisecond before now, so that the lease sweep fails its
// attempt exactly as it fails any expired lease (the attempt is counted and
// the retry policy decides). check is given the queues of those leases
// before anything changes; its error is returned as it is, and nothing is
// changed. It returns the released jobs. ErrWorkerNotFound;
// ErrWorkerNotStale when the worker was seen within WorkerHeartbeatTimeout.
func (s *Store) DeregisterWorker(ctx context.Context, id string, now time.Time, check func(queues []string) error) ([]string, error) {
	var released []string
	var refused error
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		seen, err := s.q.LockWorker(ctx, tx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrWorkerNotFound
		}
		if err != nil {
			return err
		}
		if !seen.Before(now.Add(-WorkerHeartbeatTimeout)) {
			return ErrWorkerNotStale
		}
		leases, err := s.q.LockWorkerLeases(ctx, tx, id, now)
		if err != nil {
			return err
		}
		var queues []string
		for _, l := range leases {
			if !slices.Contains(queues, l.Queue) {
				queues = append(queues, l.Queue)
			}
		}
		if check != nil {
			if refused = check(queues); refused != nil {
				return refused
			}
		}
		if released, err = s.q.ReleaseWorkerLeases(ctx, tx, now, id); err != nil {
			return err
		}
		return s.q.DeleteWorker(ctx, tx, id)
	})
	switch {
	case refused != nil:
		return nil, refused
	case errors.Is(err, ErrWorkerNotFound), errors.Is(err, ErrWorkerNotStale):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("deregister worker %s: %w", id, err)
	}
	slices.Sort(released)
	return nonNil(released), nil
}
