package records

import (
	"context"
	"fmt"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/store"
)

// BulkParams is a bulk retry or purge of the records a filter matches.
type BulkParams struct {
	// Kind is TaskRetry or TaskPurge.
	Kind   TaskKind
	Filter filter.Filter
	// Confirm creates the task; without it only the counts are returned.
	Confirm bool
	// RateLimit bounds records per second (0: unlimited).
	RateLimit float64
	// CreatedBy names who asked (an API key's name).
	CreatedBy string
	// BatchSize is the most records per batch of the task. Default 500.
	BatchSize int
	// Patch, for a retry, is a JSON Patch applied to each record's payload
	// (patch.go): the dry run evaluates it, the task carries it.
	Patch *Patch
	// Canary, for a retry, redelivers a sample first and watches it before
	// the rest (canary.go); nil: none.
	Canary *Canary
	// Target, for a retry, replaces each record's redelivery target:
	// "group" or "topic" ("": each record's policy).
	Target string
	// QueueGlobs, when non-nil, are the queues the caller's roles allow
	// this operation on: counts, the dry run and every batch of the task
	// leave other queues' records alone. Nil: every queue.
	QueueGlobs []string
}

// BulkResult is what a bulk operation would do, and the task doing it.
type BulkResult struct {
	// N is how many records it would affect (at the time of the count).
	N int64
	// Skipped is how many records the filter matches that a retry leaves
	// alone: those of reserved queues (see route.go). Always 0 for a purge.
	Skipped int64
	// Task is the task created; nil for a dry run.
	Task *Task
	// Patch is what the patch would do (a dry run with a patch only).
	Patch *PatchDryRun
	// Canary is the canary, its sample sized from N (with a canary only).
	Canary *CanarySpec
}

// Bulk counts what a bulk retry or purge of p.Filter would affect and, when
// confirmed, creates the task that carries it out (a retry task leaves the
// records of reserved queues alone, as the count does).
func (s *Service) Bulk(ctx context.Context, p *BulkParams) (*BulkResult, error) {
	res := &BulkResult{}
	var err error
	switch p.Kind {
	case TaskRetry:
		all, err := s.store.CountRetryable(ctx, &p.Filter, filter.Scope{QueueGlobs: p.QueueGlobs})
		if err != nil {
			return nil, err
		}
		sc := s.RetryScope()
		sc.QueueGlobs = p.QueueGlobs
		if res.N, err = s.store.CountRetryable(ctx, &p.Filter, sc); err != nil {
			return nil, err
		}
		res.Skipped = all - res.N
	case TaskPurge:
		if res.N, err = s.store.CountScoped(ctx, &p.Filter, filter.Scope{QueueGlobs: p.QueueGlobs}); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("bulk: unknown kind %q", p.Kind)
	}
	if p.Patch != nil && p.Kind != TaskRetry {
		return nil, fmt.Errorf("bulk: a patch is for a retry only")
	}
	if p.Target != "" && p.Kind != TaskRetry {
		return nil, fmt.Errorf("bulk: a target is for a retry only")
	}
	if p.Canary != nil {
		if p.Kind != TaskRetry {
			return nil, fmt.Errorf("bulk: a canary is for a retry only")
		}
		spec := p.Canary.Spec(res.N)
		res.Canary = &spec
	}
	if !p.Confirm {
		if p.Patch != nil {
			if res.Patch, err = s.dryRunPatch(ctx, &p.Filter, p.QueueGlobs, p.Patch); err != nil {
				return nil, err
			}
		}
		return res, nil
	}
	var patch []byte
	if p.Patch != nil {
		patch = p.Patch.Raw
	}
	batch := p.BatchSize
	if batch <= 0 {
		batch = 500
	}
	if res.Task, err = s.store.CreateTask(ctx, &store.CreateTaskParams{Kind: p.Kind, Filter: p.Filter.Canonical(), RateLimit: p.RateLimit,
		BatchSize: batch, Total: res.N, CreatedBy: p.CreatedBy, Patch: patch, Canary: res.Canary, Target: p.Target,
		QueueGlobs: p.QueueGlobs}); err != nil {
		return nil, err
	}
	s.cfg.KickTasks()
	return res, nil
}

// DeadLetters are the dead letters (state discarded) of topic: what the
// compatibility routes call the queue "dlq:<topic>".
func DeadLetters(topic string) filter.Filter {
	return filter.Filter{Queue: topic, State: dlq.StateDiscarded}
}

// RequeueDeadLetters retries up to n of the oldest dead letters of topic
// (a compatibility requeue), leaving records of reserved queues alone as
// every retry of many records does, and returns their ids. The scheduler
// is woken; Redelivered says when they are out.
func (s *Service) RequeueDeadLetters(ctx context.Context, topic string, n int) ([]string, error) {
	f := DeadLetters(topic)
	ids, err := s.store.RetryOldest(ctx, &f, s.RetryScope(), n)
	if err != nil {
		return nil, err
	}
	if len(ids) > 0 {
		s.cfg.Wake()
	}
	return ids, nil
}

// Redelivered counts how many of ids were produced to Kafka since their retry.
func (s *Service) Redelivered(ctx context.Context, ids []string) (int, error) {
	return s.store.Redelivered(ctx, ids)
}

// ClearDeadLetters deletes every dead letter of topic (a compatibility
// clear) and returns how many.
func (s *Service) ClearDeadLetters(ctx context.Context, topic string) (int64, error) {
	f := DeadLetters(topic)
	return s.store.PurgeAll(ctx, &f)
}
