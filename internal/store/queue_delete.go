package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/store/internal/dbsqlc"
)

// Deleting a queue with the records it still holds (queue-config spec §5.3).
// The records a delete takes are those not settled yet (retryable and
// available) of the queue, stored before the delete was confirmed, and not
// being produced by a scheduler right now (in flight: those finish their
// redelivery). A task carries the delete out in batches:
//
//   - TaskQueueDiscard makes each one discarded, kept as cancelled
//     (retention.cancelled), its latest error of type ErrorTypeQueueDeleted,
//     its archive copy due;
//   - TaskQueueMove re-homes each one to the task's TargetQueue and makes it
//     available there at once, for every consumer group of that topic.
//
// FinishQueueDelete then removes the queue's API config, unless records of
// it are still waiting.

// Task kinds of a queue delete.
const (
	TaskQueueDiscard TaskKind = "queue_discard"
	TaskQueueMove    TaskKind = "queue_move"
)

// QueueDelete reports whether k is a queue delete's task.
func (k TaskKind) QueueDelete() bool { return k == TaskQueueDiscard || k == TaskQueueMove }

// ErrorTypeQueueDeleted is the error type of the error a discarding queue
// delete adds to each record it discards.
const ErrorTypeQueueDeleted = "queue_deleted"

// QueueDeleteStates are the states a queue delete takes records from.
var QueueDeleteStates = []dlq.State{dlq.StateRetryable, dlq.StateAvailable}

// queueDeleteScope narrows sc to what a queue delete takes: QueueDeleteStates,
// not in flight.
func queueDeleteScope(sc filter.Scope) filter.Scope {
	sc.States = intersectStates(sc.States, QueueDeleteStates)
	notInFlight := false
	sc.InFlight = &notInFlight
	return sc
}

// QueueDeleteCounts is what a delete of a queue would take now.
type QueueDeleteCounts struct {
	// Retryable and Available count the records it takes, by state.
	Retryable, Available int64
	// InFlight counts the waiting records a scheduler is producing right
	// now: left to that redelivery.
	InFlight int64
}

// Total is how many records the delete takes.
func (c QueueDeleteCounts) Total() int64 { return c.Retryable + c.Available }

// CountQueueDelete counts, exactly, the records a delete of queue would take.
func (s *Store) CountQueueDelete(ctx context.Context, queue string) (QueueDeleteCounts, error) {
	var out QueueDeleteCounts
	inFlight := true
	for _, st := range QueueDeleteStates {
		f := filter.Filter{Queue: queue, State: st}
		all, err := s.count(ctx, &f, nil)
		if err != nil {
			return out, fmt.Errorf("count queue %s: %w", queue, err)
		}
		busy, err := s.count(ctx, &f, &filter.Scope{InFlight: &inFlight})
		if err != nil {
			return out, fmt.Errorf("count queue %s: %w", queue, err)
		}
		out.InFlight += busy
		if st == dlq.StateRetryable {
			out.Retryable = all - busy
		} else {
			out.Available = all - busy
		}
	}
	return out, nil
}

// DiscardQueueBatch discards up to Limit of the records a queue delete
// takes (p.Filter names the queue), in id order: each becomes discarded at
// now, kept as cancelled, with entry (its attempt set to the record's) as
// its latest error, its archive copy due. Nothing of its pending
// redelivery, fetch or worker lease is left. Rows another statement holds
// are waited for, as in RetryBatch.
func (s *Store) DiscardQueueBatch(ctx context.Context, tx *Tx, p *BatchParams, entry dlq.ErrorEntry, now time.Time) (BatchResult, error) {
	sc := queueDeleteScope(p.Scope)
	e, err := encodeErrors([]dlq.ErrorEntry{entry}, asJSON)
	if err != nil {
		return BatchResult{}, fmt.Errorf("encode error entry: %w", err)
	}
	args := pgx.NamedArgs{"now": now, "entry": e, "error_type": clean(entry.Type), "keep": dlq.MaxErrorHistory}
	lifeSet := `state = 'discarded', exhaustion = 'cancelled', discarded_at = @now, updated_at = @now,
		next_retry_at = NULL, fetch_at = NULL, lease_until = NULL, worker_id = NULL, ack_due_at = NULL,
		unacknowledged_at = NULL, redelivery_failure = NULL, error_type = @error_type,
		` + archiveAgainIf("true")
	dataSet := `failed_at = @now, error_type = @error_type,
		errors = (SELECT coalesce(jsonb_agg(x.e ORDER BY x.i), '[]'::jsonb) FROM (
			SELECT y.e, y.i FROM jsonb_array_elements(errors || jsonb_set(@entry::jsonb, '{0,attempt}', to_jsonb(l.attempt)))
				WITH ORDINALITY AS y(e, i) ORDER BY y.i DESC LIMIT @keep::int) x)`
	return batch(ctx, tx, p, &sc, args, func(sel string) string { return changeSQL(sel, lifeSet, dataSet) })
}

// MoveQueueBatch re-homes up to Limit of the records a queue delete takes
// (p.Filter names the queue) to target, in id order, and makes each
// available there at once as a retry does (attempt 0, nothing of its
// exhaustion or completion left). Its redelivery goes to target itself —
// an earlier override of the topic is dropped — and to every consumer
// group there (target "topic"): the group that failed it read another
// topic. Its meta says where it came from (redrive.moved_from: the old
// queue); its source partition, offset and group are kept.
func (s *Store) MoveQueueBatch(ctx context.Context, tx *Tx, p *BatchParams, target string) (BatchResult, error) {
	sc := queueDeleteScope(p.Scope)
	args := pgx.NamedArgs{"available_at": p.availableAt(), "target_queue": target}
	lifeSet := makeAvailable + `, queue = @target_queue::text`
	dataSet := `queue = @target_queue::text,
		meta = coalesce(meta, '{}'::jsonb) || jsonb_build_object('redrive.moved_from', queue),
		redelivery = (coalesce(redelivery, '{}'::jsonb) - 'topic') || '{"target": "topic"}'::jsonb`
	return batch(ctx, tx, p, &sc, args, func(sel string) string { return changeSQL(sel, lifeSet, dataSet) })
}

// FinishQueueDelete ends queue delete task t: when no record of its queue
// stored before it was created is waiting any more (in flight included),
// the queue's API config is removed and the task completed, in one
// transaction; otherwise the task is completed with the error note gives
// (at at) and the config kept, and remaining says how many records still
// wait. removed is false too when the queue had no API config. The task
// accounts for its whole total as FinishTask does, inFlight being the
// records after its cursor it left in flight.
func (s *Store) FinishQueueDelete(ctx context.Context, t *Task, queue string, at time.Time, inFlight int64,
	note func(remaining int64) string) (nt *Task, removed bool, remaining int64, err error) {
	fp, err := finishParams(t, TaskCompleted, inFlight)
	if err != nil {
		return nil, false, 0, fmt.Errorf("finish queue delete task %s: %w", t.ID, err)
	}
	err = s.WithTx(ctx, func(ctx context.Context, tx *Tx) error {
		args := pgx.NamedArgs{"queue": queue, "states": stateStrings(QueueDeleteStates)}
		cond := "queue = @queue AND state = ANY(@states)"
		if t.MaxID != nil {
			args["max_id"] = *t.MaxID
			cond += " AND id <= @max_id"
		}
		if err := tx.tx.QueryRow(ctx, "SELECT count(*) FROM redrive_lifecycle WHERE "+cond, args).Scan(&remaining); err != nil {
			return fmt.Errorf("count remaining records: %w", err)
		}
		if remaining == 0 {
			n, err := s.q.QueueDelete(ctx, tx.tx, queue)
			if err != nil {
				return fmt.Errorf("delete queue config: %w", err)
			}
			removed = n > 0
		} else {
			e, _ := json.Marshal([]TaskError{{At: at.UTC(), Message: note(remaining)}})
			if err := s.q.TaskAddError(ctx, tx.tx, dbsqlc.TaskAddErrorParams{ID: t.ID, LeaseToken: t.LeaseToken,
				Error: e, Keep: maxTaskErrors}); err != nil {
				return fmt.Errorf("record task error: %w", err)
			}
		}
		nt, err = oneTask(s.q.TaskFinish(ctx, tx.tx, fp))
		if errors.Is(err, ErrNotFound) {
			return ErrLeaseLost
		}
		return err
	})
	if err != nil {
		if errors.Is(err, ErrLeaseLost) {
			return nil, false, 0, err
		}
		return nil, false, 0, fmt.Errorf("finish queue delete task %s: %w", t.ID, err)
	}
	return nt, removed, remaining, nil
}

// PauseQueueForDelete merges state paused into queue's API config (creating
// one if it has none) and creates the delete's task, in one transaction:
// the scheduler stops claiming the queue's records while the task takes
// them. It returns the task and the API config before and after.
func (s *Store) PauseQueueForDelete(ctx context.Context, queue string, p *CreateTaskParams) (t *Task, before, after *QueueConfig, err error) {
	err = s.WithTx(ctx, func(ctx context.Context, tx *Tx) error {
		row, err := s.q.QueueConfigGet(ctx, tx.tx, queue)
		b, err := oneQueue("get queue config "+queue, row, err)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		before = b
		paused, _ := json.Marshal(map[string]string{"state": "paused"})
		row, err = s.q.QueueConfigMerge(ctx, tx.tx, queue, paused)
		if after, err = oneQueue("pause queue "+queue, row, err); err != nil {
			return err
		}
		var target *string
		if p.TargetQueue != "" {
			target = &p.TargetQueue
		}
		id, err := uuid.NewV7()
		if err != nil {
			return err
		}
		t, err = oneTask(s.q.TaskCreate(ctx, tx.tx, dbsqlc.TaskCreateParams{ID: id.String(), Kind: string(p.Kind), Filter: p.Filter,
			RateLimit: p.RateLimit, BatchSize: int32(p.BatchSize), Total: p.Total, CreatedBy: p.CreatedBy, TargetQueue: target}))
		return err
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("delete queue %s: %w", queue, err)
	}
	return t, before, after, nil
}
