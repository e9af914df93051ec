package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Task states.
const (
	TaskPending   = "pending"
	TaskRunning   = "running"
	TaskCompleted = "completed"
	TaskCancelled = "cancelled"
	TaskFailed    = "failed"
)

// Task kinds.
const (
	TaskRetry = "retry"
	TaskPurge = "purge"
)

// Task is a background bulk operation.
type Task struct {
	ID              string
	Kind            string
	State           string
	Filter          json.RawMessage // the filter, as filter.Canonical wrote it (or, made before it, as given)
	RateLimit       float64         // records/s, 0 = unlimited
	BatchSize       int
	Total           int64
	Processed       int64
	Skipped         int64
	Errors          []TaskError
	CursorID        *string
	MaxID           *string
	CancelRequested bool
	CreatedBy       string
	LeaseOwner      *string
	LeaseToken      *string
	LeaseUntil      *time.Time
	CreatedAt       time.Time
	StartedAt       *time.Time
	UpdatedAt       time.Time
	FinishedAt      *time.Time
}

// TaskError is one error a task met.
type TaskError struct {
	At      time.Time `json:"at"`
	Message string    `json:"message"`
}

// maxTaskErrors bounds the errors kept per task (the newest).
const maxTaskErrors = 20

const taskColumns = `id, kind, state, filter, rate_limit, batch_size, total, processed, skipped, errors,
	cursor_id, max_id, cancel_requested, created_by, lease_owner, lease_token, lease_until,
	created_at, started_at, updated_at, finished_at`

func scanTask(row pgx.CollectableRow) (Task, error) {
	var t Task
	var errs []byte
	err := row.Scan(&t.ID, &t.Kind, &t.State, &t.Filter, &t.RateLimit, &t.BatchSize, &t.Total, &t.Processed,
		&t.Skipped, &errs, &t.CursorID, &t.MaxID, &t.CancelRequested, &t.CreatedBy, &t.LeaseOwner, &t.LeaseToken,
		&t.LeaseUntil, &t.CreatedAt, &t.StartedAt, &t.UpdatedAt, &t.FinishedAt)
	if err != nil {
		return t, err
	}
	if err := json.Unmarshal(errs, &t.Errors); err != nil {
		return t, fmt.Errorf("decode task errors: %w", err)
	}
	return t, nil
}

func (s *Store) oneTask(ctx context.Context, q string, args ...any) (*Task, error) {
	return collectOne(ctx, s.pool, "task", scanTask, q, args...)
}

// CreateTaskParams describes a new task.
type CreateTaskParams struct {
	Kind      string
	Filter    json.RawMessage
	RateLimit float64
	BatchSize int
	Total     int64
	CreatedBy string
}

// CreateTask stores a pending task. Records created after it (a greater id)
// are left alone by it.
func (s *Store) CreateTask(ctx context.Context, p *CreateTaskParams) (*Task, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	t, err := s.oneTask(ctx, `INSERT INTO redrive_task (id, kind, state, filter, rate_limit, batch_size, total, created_by,
		max_id, created_at, updated_at)
		VALUES ($1, $2, 'pending', $3, $4, $5, $6, $7, (SELECT id FROM redrive_record ORDER BY id DESC LIMIT 1), now(), now())
		RETURNING `+taskColumns, id.String(), p.Kind, p.Filter, p.RateLimit, p.BatchSize, p.Total, p.CreatedBy)
	if err != nil {
		return nil, fmt.Errorf("create task: %w", err)
	}
	return t, nil
}

// GetTask returns one task, or ErrNotFound.
func (s *Store) GetTask(ctx context.Context, id string) (*Task, error) {
	t, err := s.oneTask(ctx, "SELECT "+taskColumns+" FROM redrive_task WHERE id = $1", id)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("get task %s: %w", id, err)
	}
	return t, err
}

// ListTasksParams selects tasks, newest first.
type ListTasksParams struct {
	State    string
	Limit    int
	BeforeID string
}

// ListTasks returns tasks newest first and whether more follow.
func (s *Store) ListTasks(ctx context.Context, p *ListTasksParams) ([]Task, bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+taskColumns+` FROM redrive_task
		WHERE ($1 = '' OR state = $1) AND ($2 = '' OR id < $2::uuid) ORDER BY id DESC LIMIT $3`,
		p.State, p.BeforeID, p.Limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("list tasks: %w", err)
	}
	ts, err := pgx.CollectRows(rows, scanTask)
	if err != nil {
		return nil, false, fmt.Errorf("list tasks: %w", err)
	}
	if len(ts) > p.Limit {
		return ts[:p.Limit], true, nil
	}
	return ts, false, nil
}

// CancelTask asks a task to stop. A pending task is cancelled at once; a
// running one stops after its current batch. It returns the task, ErrNotFound,
// or ErrConflict when the task has already finished.
func (s *Store) CancelTask(ctx context.Context, id string) (*Task, error) {
	t, err := s.oneTask(ctx, `UPDATE redrive_task SET cancel_requested = true, updated_at = now(),
		state = CASE WHEN state = 'pending' THEN 'cancelled' ELSE state END,
		finished_at = CASE WHEN state = 'pending' THEN now() ELSE finished_at END
		WHERE id = $1 AND state IN ('pending', 'running') RETURNING `+taskColumns, id)
	if errors.Is(err, ErrNotFound) {
		if _, gerr := s.GetTask(ctx, id); gerr != nil {
			return nil, gerr
		}
		return nil, ErrConflict
	}
	if err != nil {
		return nil, fmt.Errorf("cancel task %s: %w", id, err)
	}
	return t, nil
}

// ClaimTask takes the oldest open task nobody holds a live lease on, under a
// lease of the given length, and marks it running. It returns ErrNotFound
// when there is none.
func (s *Store) ClaimTask(ctx context.Context, owner string, lease time.Duration) (*Task, error) {
	token := uuid.NewString()
	t, err := s.oneTask(ctx, `UPDATE redrive_task SET state = 'running', lease_owner = $1, lease_token = $2,
		lease_until = now() + $3 * interval '1 millisecond', started_at = coalesce(started_at, now()), updated_at = now()
		WHERE id = (SELECT id FROM redrive_task WHERE state IN ('pending', 'running')
			AND (lease_until IS NULL OR lease_until < now()) ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING `+taskColumns, owner, token, lease.Milliseconds())
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("claim task: %w", err)
	}
	return t, err
}

// ErrLeaseLost is returned when a lease (a task's, a redelivery claim's)
// passed and another holder took over.
var ErrLeaseLost = errors.New("lease lost")

// TaskBatch runs one batch of a task in a transaction with its progress: fn
// changes records, then the task's counters, cursor and lease are advanced —
// both or neither. It returns the task as updated, ErrLeaseLost when another
// replica holds the task now.
func (s *Store) TaskBatch(ctx context.Context, t *Task, lease time.Duration,
	fn func(tx pgx.Tx) (BatchResult, error)) (*Task, BatchResult, error) {
	var out *Task
	var res BatchResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if res, err = fn(tx); err != nil {
			return err
		}
		var cursor *string
		if res.LastID != "" {
			cursor = &res.LastID
		}
		rows, err := tx.Query(ctx, `UPDATE redrive_task SET processed = processed + $3, cursor_id = coalesce($4, cursor_id),
			lease_until = now() + $5 * interval '1 millisecond', updated_at = now()
			WHERE id = $1 AND lease_token = $2 RETURNING `+taskColumns, t.ID, t.LeaseToken, res.N, cursor, lease.Milliseconds())
		if err != nil {
			return err
		}
		nt, err := pgx.CollectExactlyOneRow(rows, scanTask)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrLeaseLost
		}
		out = &nt
		return err
	})
	if err != nil {
		if errors.Is(err, ErrLeaseLost) {
			return nil, res, err
		}
		return nil, res, fmt.Errorf("task %s batch: %w", t.ID, err)
	}
	return out, res, nil
}

// FinishTask sets a task's final state and releases its lease.
func (s *Store) FinishTask(ctx context.Context, t *Task, state string) (*Task, error) {
	nt, err := s.oneTask(ctx, `UPDATE redrive_task SET state = $3, finished_at = now(), updated_at = now(),
		lease_until = NULL, lease_owner = NULL, lease_token = NULL
		WHERE id = $1 AND lease_token = $2 RETURNING `+taskColumns, t.ID, t.LeaseToken, state)
	if errors.Is(err, ErrNotFound) {
		return nil, ErrLeaseLost
	}
	if err != nil {
		return nil, fmt.Errorf("finish task %s: %w", t.ID, err)
	}
	return nt, nil
}

// ReleaseTask gives up a task's lease without finishing it (at shutdown), so
// that any replica may resume it at once.
func (s *Store) ReleaseTask(ctx context.Context, t *Task) error {
	_, err := s.pool.Exec(ctx, `UPDATE redrive_task SET lease_until = NULL, lease_owner = NULL, lease_token = NULL,
		updated_at = now() WHERE id = $1 AND lease_token = $2`, t.ID, t.LeaseToken)
	if err != nil {
		return fmt.Errorf("release task %s: %w", t.ID, err)
	}
	return nil
}

// AddTaskError records msg, an error the task met at the time given (the
// newest maxTaskErrors are kept). Only the lease holder can: it changes
// nothing once another replica took the task over.
func (s *Store) AddTaskError(ctx context.Context, t *Task, at time.Time, msg string) error {
	e, _ := json.Marshal([]TaskError{{At: at.UTC(), Message: msg}})
	_, err := s.pool.Exec(ctx, `UPDATE redrive_task SET errors = (
			SELECT coalesce(jsonb_agg(e ORDER BY i), '[]') FROM (
				SELECT e, i FROM jsonb_array_elements(errors || $3::jsonb) WITH ORDINALITY AS x(e, i)
				ORDER BY i DESC LIMIT $4) y),
		updated_at = now() WHERE id = $1 AND lease_token = $2`, t.ID, t.LeaseToken, e, maxTaskErrors)
	if err != nil {
		return fmt.Errorf("record task %s error: %w", t.ID, err)
	}
	return nil
}

// TaskCancelRequested reports whether cancellation of the task was asked.
func (s *Store) TaskCancelRequested(ctx context.Context, id string) (bool, error) {
	var c bool
	if err := s.pool.QueryRow(ctx, "SELECT cancel_requested FROM redrive_task WHERE id = $1", id).Scan(&c); err != nil {
		return false, fmt.Errorf("read task %s: %w", id, err)
	}
	return c, nil
}
