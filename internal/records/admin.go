package records

import (
	"context"
	"time"

	"github.com/redrive/redrive/internal/store"
)

// The OJS admin API's reads (docs/api.md#admin): records counted and listed
// by OJS job state (store/admin.go says how Redrive's states map onto them).

type (
	// JobCounts are a queue's records by OJS job state.
	JobCounts = store.JobCounts
	// Throughput is a queue's records completed and failed in a window.
	Throughput = store.Throughput
	// JobListParams selects a page of the job list.
	JobListParams = store.JobListParams
	// JobRow is a record as a row of the job list.
	JobRow = store.JobRow
	// JobPage is a page of the job list.
	JobPage = store.JobPage
)

// OJS job states (store.JobStates).
const (
	JobAvailable = store.JobAvailable
	JobActive    = store.JobActive
	JobScheduled = store.JobScheduled
	JobRetryable = store.JobRetryable
	JobCompleted = store.JobCompleted
	JobDiscarded = store.JobDiscarded
	JobCancelled = store.JobCancelled
)

// JobStates lists the OJS job states.
var JobStates = store.JobStates

// JobCounts counts records by OJS job state at now: of queue alone (""
// : every queue), among the queues matching queueGlobs (nil: every queue).
func (s *Service) JobCounts(ctx context.Context, queue string, queueGlobs []string, now time.Time) (map[string]JobCounts, error) {
	return s.store.JobCounts(ctx, queue, queueGlobs, now)
}

// QueueDepth is a queue's depth at now: its jobs available, scheduled or
// retryable (OJS backpressure spec §3).
func (s *Service) QueueDepth(ctx context.Context, queue string, now time.Time) (int64, error) {
	return s.store.QueueDepth(ctx, queue, now)
}

// QueueThroughput counts each of queues' records completed and failed after
// since.
func (s *Service) QueueThroughput(ctx context.Context, queues []string, since time.Time) (map[string]Throughput, error) {
	return s.store.QueueThroughput(ctx, queues, since)
}

// ListJobs reads a page of records as OJS jobs.
func (s *Service) ListJobs(ctx context.Context, p *JobListParams) (*JobPage, error) {
	return s.store.ListJobs(ctx, p)
}
