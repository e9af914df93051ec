package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/store/internal/dbsqlc"
)

// TaskState is where a task is in its life.
type TaskState string

// Task states.
const (
	TaskPending   TaskState = "pending"
	TaskRunning   TaskState = "running"
	TaskCompleted TaskState = "completed"
	TaskCancelled TaskState = "cancelled"
	TaskFailed    TaskState = "failed"
	// TaskAborted: a canary's verdict stopped the task after its sample
	// (the rest of its records were left alone).
	TaskAborted TaskState = "aborted"
)

// TaskKind is what a task does to the records its filter selects.
type TaskKind string

// Task kinds.
const (
	TaskRetry TaskKind = "retry"
	TaskPurge TaskKind = "purge"
)

// Task is a background bulk operation.
type Task struct {
	ID        string
	Kind      TaskKind
	State     TaskState
	Filter    json.RawMessage // the filter, as filter.Canonical wrote it (or, made before it, as given)
	RateLimit float64         // records/s, 0 = unlimited
	BatchSize int
	// Total is how many records the task is about: those its filter matched
	// when it was created, raised when more came to match before it got to
	// them. Processed counts the records it changed (retried, deleted,
	// discarded, moved), Skipped those it left as they were, each under one
	// of SkippedReasons; Remaining is the rest. They add up: Processed +
	// Skipped + Remaining = Total, and a completed task has nothing remaining.
	Total     int64
	Processed int64
	Skipped   int64
	// SkippedReasons counts the skipped records by why (Skip* reasons).
	SkippedReasons map[string]int64
	// Patch is the JSON Patch a retry applies to each record's payload
	// (nil: none); SkippedRecords the first MaxSkippedRecords records it
	// skipped (Skipped counts them all).
	Patch          json.RawMessage
	SkippedRecords []SkippedRecord
	// Canary is a retry's canary (nil: none), CanaryState where it stands.
	Canary      *CanarySpec
	CanaryState CanaryState
	// Target, for a retry, replaces each record's redelivery.target
	// ("group" or "topic"); empty keeps each record's policy.
	Target string
	// TargetQueue is the queue a queue_move task re-homes the records to.
	TargetQueue string
	// QueueGlobs, when non-nil, are the queues the task may touch (its
	// creator's roles): each batch is narrowed to them.
	QueueGlobs      []string
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

// Why a task left a record as it was (Task.SkippedReasons).
const (
	// SkipPatch: a patched retry's patch failed on the record, or its result
	// did not match the record's schema (SkippedRecords says which).
	SkipPatch = "patch"
	// SkipInFlight: a scheduler was producing the record (its redelivery
	// under way) when the task got to it; the task went past it.
	SkipInFlight = "in_flight"
	// SkipNoLongerMatches: the record was counted when the task was created
	// but no longer matched its filter when the task got to it: retried,
	// changed or deleted meanwhile (the task cannot tell which), or in a
	// state its kind does not touch any more. Counted when the task
	// completes, as what is left of its total.
	SkipNoLongerMatches = "no_longer_matches"
)

// Remaining is how many of the task's records it has not got to: still to
// do while it is pending or running, left as they were when it was
// cancelled, aborted by its canary or failed; 0 once it completed.
func (t *Task) Remaining() int64 {
	return max(0, t.Total-t.Processed-t.Skipped)
}

// addReasons is reasons plus n records skipped for each of more's reasons.
func addReasons(reasons map[string]int64, more map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(reasons)+len(more))
	for k, v := range reasons {
		out[k] = v
	}
	for k, v := range more {
		if v != 0 {
			out[k] += v
		}
	}
	return out
}

// accountFor is what completed task t ends with: inFlight more records
// skipped as in flight (those after its cursor a scheduler was producing
// when it ended), and what is left of its total after those as no longer
// matching its filter. Processed + the skipped count it returns is its
// total, or more.
func accountFor(t *Task, inFlight int64) (int64, map[string]int64) {
	more := map[string]int64{SkipInFlight: inFlight}
	skipped := t.Skipped + inFlight
	if gone := t.Total - t.Processed - skipped; gone > 0 {
		more[SkipNoLongerMatches] = gone
		skipped += gone
	}
	return skipped, addReasons(t.SkippedReasons, more)
}

// TaskError is one error a task met.
type TaskError struct {
	At      time.Time `json:"at"`
	Message string    `json:"message"`
}

// SkippedRecord is a record a patched retry left as it was, and why.
type SkippedRecord struct {
	ID      string `json:"id"`
	Message string `json:"message"`
}

// MaxSkippedRecords bounds the skipped records a task lists (the first).
const MaxSkippedRecords = 100

// maxTaskErrors bounds the errors kept per task (the newest).
const maxTaskErrors = 20

// taskOf is a task as read.
func taskOf(r dbsqlc.RedriveTask) (*Task, error) {
	t := &Task{ID: r.ID, Kind: TaskKind(r.Kind), State: TaskState(r.State), Filter: r.Filter, RateLimit: r.RateLimit,
		BatchSize: int(r.BatchSize), Total: r.Total, Processed: r.Processed, Skipped: r.Skipped, CursorID: r.CursorID,
		MaxID: r.MaxID, CancelRequested: r.CancelRequested, CreatedBy: r.CreatedBy, LeaseOwner: r.LeaseOwner,
		LeaseToken: r.LeaseToken, LeaseUntil: r.LeaseUntil, CreatedAt: r.CreatedAt, StartedAt: r.StartedAt,
		UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt, Patch: r.Patch, QueueGlobs: r.QueueGlobs}
	if r.RedeliveryTarget != nil {
		t.Target = *r.RedeliveryTarget
	}
	if r.TargetQueue != nil {
		t.TargetQueue = *r.TargetQueue
	}
	if err := json.Unmarshal(r.Errors, &t.Errors); err != nil {
		return nil, fmt.Errorf("decode task errors: %w", err)
	}
	if len(r.SkippedRecords) > 0 {
		if err := json.Unmarshal(r.SkippedRecords, &t.SkippedRecords); err != nil {
			return nil, fmt.Errorf("decode task skipped records: %w", err)
		}
	}
	t.SkippedReasons = map[string]int64{}
	if len(r.SkippedReasons) > 0 {
		if err := json.Unmarshal(r.SkippedReasons, &t.SkippedReasons); err != nil {
			return nil, fmt.Errorf("decode task skipped reasons: %w", err)
		}
	}
	if err := canaryOf(t, &r); err != nil {
		return nil, err
	}
	return t, nil
}

// oneTask is the task a statement read, or ErrNotFound when it read none.
func oneTask(r dbsqlc.RedriveTask, err error) (*Task, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return taskOf(r)
}

// CreateTaskParams describes a new task.
type CreateTaskParams struct {
	Kind      TaskKind
	Filter    json.RawMessage
	RateLimit float64
	BatchSize int
	Total     int64
	CreatedBy string
	// Patch is a retry's JSON Patch (nil: none).
	Patch json.RawMessage
	// Canary is a retry's canary (nil: none).
	Canary *CanarySpec
	// Quiet, when set, is the "redrive when quiet" request of an incident
	// that this task carries out: it is marked started with the task, in
	// one transaction, or the task is not created (ErrConflict: the
	// request was withdrawn or replaced meanwhile).
	Quiet *QuietRequest
	// Target is a retry's redelivery target ("group", "topic"; "": each
	// record's policy).
	Target string
	// TargetQueue is a queue_move's target queue ("": none).
	TargetQueue string
	// QueueGlobs, when non-nil, restricts the task to these queues.
	QueueGlobs []string
}

// CreateTask stores a pending task. Records created after it (a greater id)
// are left alone by it.
func (s *Store) CreateTask(ctx context.Context, p *CreateTaskParams) (*Task, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	var canary json.RawMessage
	if p.Canary != nil {
		if canary, err = json.Marshal(p.Canary); err != nil {
			return nil, fmt.Errorf("create task: encode canary: %w", err)
		}
	}
	var target, targetQueue *string
	if p.Target != "" {
		target = &p.Target
	}
	if p.TargetQueue != "" {
		targetQueue = &p.TargetQueue
	}
	params := dbsqlc.TaskCreateParams{ID: id.String(), Kind: string(p.Kind), Filter: p.Filter,
		RateLimit: p.RateLimit, BatchSize: int32(p.BatchSize), Total: p.Total, CreatedBy: p.CreatedBy, Patch: p.Patch, Canary: canary,
		RedeliveryTarget: target, TargetQueue: targetQueue, QueueGlobs: p.QueueGlobs}
	if p.Quiet == nil {
		t, err := oneTask(s.q.TaskCreate(ctx, s.pool, params))
		if err != nil {
			return nil, fmt.Errorf("create task: %w", err)
		}
		return t, nil
	}
	var t *Task
	err = s.WithTx(ctx, func(ctx context.Context, tx *Tx) error {
		var err error
		if t, err = oneTask(s.q.TaskCreate(ctx, tx.tx, params)); err != nil {
			return err
		}
		n, err := s.q.QuietStarted(ctx, tx.tx, dbsqlc.QuietStartedParams{TaskID: &t.ID, StartedAt: &p.Quiet.StartedAt,
			Fingerprint: p.Quiet.Incident, RequestedAt: p.Quiet.RequestedAt})
		if err == nil && n == 0 {
			err = ErrConflict
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create task for incident %s: %w", p.Quiet.Incident, err)
	}
	return t, nil
}

// GetTask returns one task, or ErrNotFound.
func (s *Store) GetTask(ctx context.Context, id string) (*Task, error) {
	t, err := oneTask(s.q.TaskGet(ctx, s.pool, id))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("get task %s: %w", id, err)
	}
	return t, err
}

// ListTasksParams selects tasks, newest first.
type ListTasksParams struct {
	State    TaskState
	Limit    int
	BeforeID string
}

// ListTasks returns tasks newest first and whether more follow.
func (s *Store) ListTasks(ctx context.Context, p *ListTasksParams) ([]Task, bool, error) {
	var rows []dbsqlc.RedriveTask
	var err error
	limit := int32(p.Limit + 1)
	switch {
	case p.State == "" && p.BeforeID == "":
		rows, err = s.q.TaskList(ctx, s.pool, limit)
	case p.State == "":
		rows, err = s.q.TaskListBefore(ctx, s.pool, p.BeforeID, limit)
	case p.BeforeID == "":
		rows, err = s.q.TaskListState(ctx, s.pool, string(p.State), limit)
	default:
		rows, err = s.q.TaskListStateBefore(ctx, s.pool, string(p.State), p.BeforeID, limit)
	}
	if err != nil {
		return nil, false, fmt.Errorf("list tasks: %w", err)
	}
	ts := make([]Task, len(rows))
	for i, r := range rows {
		t, err := taskOf(r)
		if err != nil {
			return nil, false, fmt.Errorf("list tasks: %w", err)
		}
		ts[i] = *t
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
	t, err := oneTask(s.q.TaskCancel(ctx, s.pool, id))
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
	t, err := oneTask(s.q.TaskClaim(ctx, s.pool, &owner, &token, lease.Milliseconds()))
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
// both or neither. The records the batch left (a patch's skips, those in
// flight it went past) count as skipped, each with its reason. It returns
// the task as updated, ErrLeaseLost when another replica holds the task now.
func (s *Store) TaskBatch(ctx context.Context, t *Task, lease time.Duration,
	fn func(tx *Tx) (BatchResult, error)) (*Task, BatchResult, error) {
	var out *Task
	var res BatchResult
	err := s.WithTx(ctx, func(ctx context.Context, tx *Tx) error {
		var err error
		if res, err = fn(tx); err != nil {
			return err
		}
		var cursor *string
		if res.LastID != "" {
			cursor = &res.LastID
		}
		var listed, reasons json.RawMessage
		if len(res.Skipped) > 0 && len(t.SkippedRecords) < MaxSkippedRecords {
			all := append(slices.Clone(t.SkippedRecords), res.Skipped...)
			if listed, err = json.Marshal(all[:min(len(all), MaxSkippedRecords)]); err != nil {
				return fmt.Errorf("encode skipped records: %w", err)
			}
		}
		skipped := int64(len(res.Skipped) + res.InFlight)
		if skipped > 0 {
			more := map[string]int64{SkipPatch: int64(len(res.Skipped)), SkipInFlight: int64(res.InFlight)}
			if reasons, err = json.Marshal(addReasons(t.SkippedReasons, more)); err != nil {
				return fmt.Errorf("encode skipped reasons: %w", err)
			}
		}
		out, err = oneTask(s.q.TaskAdvance(ctx, tx.tx, dbsqlc.TaskAdvanceParams{ID: t.ID, LeaseToken: t.LeaseToken,
			Processed: int64(res.N), CursorID: cursor, Skipped: skipped, SkippedRecords: listed, SkippedReasons: reasons,
			Dealt: int64(res.N) + skipped, LeaseMs: lease.Milliseconds()}))
		if errors.Is(err, ErrNotFound) {
			return ErrLeaseLost
		}
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

// FinishTask sets a task's final state and releases its lease. A completed
// task accounts for its whole total (accountFor): inFlight more records
// skipped as in flight, the rest of its total as no longer matching. Other
// states keep the counts as they are (what remains was left by the end).
func (s *Store) FinishTask(ctx context.Context, t *Task, state TaskState, inFlight int64) (*Task, error) {
	p, err := finishParams(t, state, inFlight)
	if err != nil {
		return nil, fmt.Errorf("finish task %s: %w", t.ID, err)
	}
	nt, err := oneTask(s.q.TaskFinish(ctx, s.pool, p))
	if errors.Is(err, ErrNotFound) {
		return nil, ErrLeaseLost
	}
	if err != nil {
		return nil, fmt.Errorf("finish task %s: %w", t.ID, err)
	}
	return nt, nil
}

// finishParams is the statement that ends task t in state (FinishTask).
func finishParams(t *Task, state TaskState, inFlight int64) (dbsqlc.TaskFinishParams, error) {
	p := dbsqlc.TaskFinishParams{State: string(state), ID: t.ID, LeaseToken: t.LeaseToken}
	if state != TaskCompleted {
		return p, nil
	}
	skipped, reasons := accountFor(t, inFlight)
	b, err := json.Marshal(reasons)
	if err != nil {
		return p, fmt.Errorf("encode skipped reasons: %w", err)
	}
	p.Skipped, p.SkippedReasons = &skipped, b
	return p, nil
}

// ReleaseTask gives up a task's lease without finishing it (at shutdown), so
// that any replica may resume it at once.
func (s *Store) ReleaseTask(ctx context.Context, t *Task) error {
	err := s.q.TaskRelease(ctx, s.pool, t.ID, t.LeaseToken)
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
	err := s.q.TaskAddError(ctx, s.pool, dbsqlc.TaskAddErrorParams{ID: t.ID, LeaseToken: t.LeaseToken, Error: e, Keep: maxTaskErrors})
	if err != nil {
		return fmt.Errorf("record task %s error: %w", t.ID, err)
	}
	return nil
}

// TaskCancelRequested reports whether cancellation of the task was asked.
func (s *Store) TaskCancelRequested(ctx context.Context, id string) (bool, error) {
	c, err := s.q.TaskCancelRequested(ctx, s.pool, id)
	if err != nil {
		return false, fmt.Errorf("read task %s: %w", id, err)
	}
	return c, nil
}
