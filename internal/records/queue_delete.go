package records

import (
	"context"
	"fmt"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/store"
)

// QueueStrategy is what a queue delete does with the records the queue
// still holds (queue-config spec §5.3).
type QueueStrategy string

// Queue delete strategies.
const (
	// StrategyReject refuses the delete while records wait (the default).
	StrategyReject QueueStrategy = "reject"
	// StrategyDiscard discards the waiting records, kept as cancelled.
	StrategyDiscard QueueStrategy = "discard"
	// StrategyMove re-homes the waiting records to a target queue and
	// redelivers them there.
	StrategyMove QueueStrategy = "move"
)

// QueueStrategies lists every strategy.
var QueueStrategies = []QueueStrategy{StrategyReject, StrategyDiscard, StrategyMove}

// Task kinds of a queue delete, and the error type of a discard.
const (
	TaskQueueDiscard      = store.TaskQueueDiscard
	TaskQueueMove         = store.TaskQueueMove
	ErrorTypeQueueDeleted = store.ErrorTypeQueueDeleted
)

// QueueDeleteCounts is what a queue delete would take (store.QueueDeleteCounts).
type QueueDeleteCounts = store.QueueDeleteCounts

// QueueDeleteParams is a delete of a queue with strategy discard or move.
// The caller has checked the names (the queue is no policy file's, the
// target is a topic a redelivery may go to).
type QueueDeleteParams struct {
	Queue    string
	Strategy QueueStrategy
	// TargetQueue is a move's target.
	TargetQueue string
	// Confirm creates the task; without it only the counts are returned.
	Confirm bool
	// RateLimit bounds records per second (0: unlimited).
	RateLimit float64
	// CreatedBy names who asked (an API key's name).
	CreatedBy string
	// BatchSize is the most records per batch of the task. Default 500.
	BatchSize int
}

// QueueDeleteResult is what a queue delete would take and, confirmed, the
// task taking it, with the queue's API config before and after its pause.
type QueueDeleteResult struct {
	Counts        QueueDeleteCounts
	Task          *Task
	Before, After *QueueConfig
}

// DeleteQueueRecords counts what a delete of p.Queue with strategy discard
// or move would take and, confirmed, pauses the queue and creates the task
// that takes them, in one transaction. The task removes the queue's API
// config when it completes (store.FinishQueueDelete).
func (s *Service) DeleteQueueRecords(ctx context.Context, p *QueueDeleteParams) (*QueueDeleteResult, error) {
	kind := TaskQueueDiscard
	switch p.Strategy {
	case StrategyDiscard:
	case StrategyMove:
		kind = TaskQueueMove
		if p.TargetQueue == "" || p.TargetQueue == p.Queue {
			return nil, fmt.Errorf("delete queue %s: a move needs another queue as its target", p.Queue)
		}
	default:
		return nil, fmt.Errorf("delete queue %s: strategy %q takes no records", p.Queue, p.Strategy)
	}
	counts, err := s.store.CountQueueDelete(ctx, p.Queue)
	if err != nil {
		return nil, err
	}
	res := &QueueDeleteResult{Counts: counts}
	if !p.Confirm {
		return res, nil
	}
	batch := p.BatchSize
	if batch <= 0 {
		batch = 500
	}
	f := filter.Filter{Queue: p.Queue}
	target := ""
	if kind == TaskQueueMove {
		target = p.TargetQueue
	}
	res.Task, res.Before, res.After, err = s.store.PauseQueueForDelete(ctx, p.Queue, &store.CreateTaskParams{Kind: kind,
		Filter: f.Canonical(), RateLimit: p.RateLimit, BatchSize: batch, Total: counts.Total(), CreatedBy: p.CreatedBy,
		TargetQueue: target})
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Queues.Refresh(ctx); err != nil {
		// The pause is committed; other replicas see it within seconds, and
		// so does this one.
		s.log.Warn("refresh queue configs after a queue delete", "queue", p.Queue, "err", err)
	}
	s.cfg.KickTasks()
	return res, nil
}

// QueueDeleteEvents turns the records a batch of queue delete task t
// touched into lifecycle events: job.discarded for a discard,
// dead_letter.moved for a move.
func QueueDeleteEvents(t *Task, from string, rows []BatchRow) []events.Event {
	out := make([]events.Event, len(rows))
	for i, r := range rows {
		d := events.RecordData{ID: r.ID, Queue: r.Queue, RecordKeyData: events.RecordKey(r.KeyPrefix, r.KeySize), Type: r.Type}
		typ := events.JobDiscarded
		if t.Kind == TaskQueueMove {
			typ, d.FromQueue, d.State = events.DeadLetterMoved, from, string(dlq.StateAvailable)
		} else {
			d.State, d.Exhaustion, d.ErrorType = string(dlq.StateDiscarded), string(dlq.ExhaustionCancelled), ErrorTypeQueueDeleted
		}
		out[i] = events.Record(typ, d)
	}
	return out
}

// PublishTaskBatch emits the lifecycle events of a committed batch of task
// t (the task runner calls it after each).
func (s *Service) PublishTaskBatch(ctx context.Context, t *Task, rows []BatchRow) {
	if !t.Kind.QueueDelete() {
		s.PublishBatch(ctx, t.Kind, rows)
		return
	}
	from := ""
	if f, err := filter.ParseJSON(t.Filter, filter.Bulk, "filter"); err == nil {
		from = f.Queue
	}
	s.cfg.Events.Publish(ctx, QueueDeleteEvents(t, from, rows)...)
}

// QueueDeleted is called when queue delete task t completed: the queue
// configs are refreshed and, when none of its records is left waiting,
// queue.deleted is published.
func (s *Service) QueueDeleted(ctx context.Context, t *Task, queue string, remaining int64) {
	if err := s.cfg.Queues.Refresh(ctx); err != nil {
		s.log.Warn("refresh queue configs after a queue delete", "queue", queue, "err", err)
	}
	if remaining > 0 {
		return
	}
	d := events.QueueDeletedData{Queue: queue, Strategy: string(StrategyDiscard), TaskID: t.ID, Records: t.Processed}
	if t.Kind == TaskQueueMove {
		d.Strategy, d.TargetQueue = string(StrategyMove), t.TargetQueue
	}
	s.cfg.Events.Publish(ctx, events.Deleted(d))
}
