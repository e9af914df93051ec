package records

import (
	"context"
	"errors"
	"time"

	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/store"
)

// The worker registry (store/worker_registry.go), for the HTTP API's
// heartbeat and admin worker routes: the store's types, named here so that
// callers need not import internal/store, and the calls passed on.
type (
	WorkerState      = store.WorkerState
	Heartbeat        = store.Heartbeat
	HeartbeatResult  = store.HeartbeatResult
	Worker           = store.Worker
	WorkerListParams = store.WorkerListParams
	WorkerPage       = store.WorkerPage
	WorkerSummary    = store.WorkerSummary
	WorkerLease      = store.WorkerLease
)

// Worker states, bounds and errors (store/worker_registry.go).
const (
	WorkerRunning          = store.WorkerRunning
	WorkerQuiet            = store.WorkerQuiet
	WorkerTerminate        = store.WorkerTerminate
	WorkerStale            = store.WorkerStale
	WorkerHeartbeatTimeout = store.WorkerHeartbeatTimeout
	MaxWorkerJobIDs        = store.MaxWorkerJobIDs
)

var (
	ErrWorkerNotFound          = store.ErrWorkerNotFound
	ErrWorkerNotStale          = store.ErrWorkerNotStale
	ErrWorkerDirectiveBackward = store.ErrWorkerDirectiveBackward
)

// WorkerHeartbeat records a worker's heartbeat and extends the leases it
// still holds among those it names (store.Store.Heartbeat).
func (s *Service) WorkerHeartbeat(ctx context.Context, h *Heartbeat) (*HeartbeatResult, error) {
	res, err := s.store.Heartbeat(ctx, h)
	if err != nil {
		return nil, err
	}
	// Events spec §3.2: job.heartbeat, a Level 1 MUST ("Visibility timeout
	// extensions must be trackable"), for each lease extended.
	for _, l := range res.Leases {
		until := l.Until
		s.cfg.Events.Publish(ctx, events.Job(events.JobHeartbeat, events.JobData{JobID: l.ID, JobType: l.Type, Queue: l.Queue,
			State: "active", Attempt: l.Attempt, WorkerID: h.WorkerID, VisibleUntil: &until}))
	}
	return res, nil
}

// ListWorkers lists a page of the workers (store.Store.ListWorkers).
func (s *Service) ListWorkers(ctx context.Context, p *WorkerListParams) (*WorkerPage, error) {
	return s.store.ListWorkers(ctx, p)
}

// GetWorker reads one worker as it stands at now, or ErrWorkerNotFound.
func (s *Service) GetWorker(ctx context.Context, id string, now time.Time) (*Worker, error) {
	return s.store.GetWorker(ctx, id, now)
}

// WorkerLeases lists the jobs a worker holds a lease on at now.
func (s *Service) WorkerLeases(ctx context.Context, id string, now time.Time) ([]WorkerLease, error) {
	return s.store.WorkerLeases(ctx, id, now)
}

// JobQueues reads the queue of each of ids that is a record, by id.
func (s *Service) JobQueues(ctx context.Context, ids []string) (map[string]string, error) {
	return s.store.JobQueues(ctx, ids)
}

// SetWorkerDirective tells a worker to quiet or terminate; its next
// heartbeat answers it (store.Store.SetWorkerDirective).
func (s *Service) SetWorkerDirective(ctx context.Context, id string, d WorkerState, by string, now time.Time) error {
	return s.store.SetWorkerDirective(ctx, id, d, by, now)
}

// DeregisterWorker removes a stale worker and releases its leases, then
// fails the released attempts as the lease sweep fails any expired lease
// (ExpireLeases), so that they move on at once: each counts as a failed
// attempt (error type visibility_timeout) and the retry policy decides.
// check sees the queues of its leases first (store.Store.DeregisterWorker).
// It returns the released jobs.
func (s *Service) DeregisterWorker(ctx context.Context, id string, now time.Time, check func(queues []string) error) ([]string, error) {
	ids, err := s.store.DeregisterWorker(ctx, id, now, check)
	if err != nil {
		return nil, err
	}
	for _, j := range ids {
		// Committed as expired: a failure here leaves it to the next
		// fetch or read, which expire it the same way.
		if _, err := s.expireLease(ctx, j, now); err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrNotLeased) {
			s.log.Warn("failing the attempt of a deregistered worker's job failed; the next fetch will", "id", j, "worker", id, "err", err)
		}
	}
	return ids, nil
}
