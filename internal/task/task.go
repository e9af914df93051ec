// Package task runs background bulk operations (retry or purge by filter)
// that the API creates. Tasks live in Postgres: any replica claims an open
// task under a lease and works through it in batches, committing progress with
// each batch, so a task survives restarts and moves to another replica when
// its owner dies. A rate limit (records/s) keeps a million-record retry from
// flooding a topic; small batches keep it from locking the table.
//
// It never decides which records a filter means: the API stores the task's
// filter as filter.Canonical writes it, and this package reads it back with
// the filter package (Selection).
package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/service"
	"github.com/redrive/redrive/internal/store"
)

// Config configures a Runner. Zero fields take the defaults noted.
type Config struct {
	// BatchSize is the most records per batch (one transaction). Default 500.
	BatchSize int
	// Lease is how long a claim lasts without progress. Default 30s.
	Lease time.Duration
	// Poll is how often to look for open tasks when not woken. Default 1s.
	Poll time.Duration
	// Wake is called after records were retried, so that the scheduler
	// redelivers them promptly. Optional.
	Wake func()
	// OnBatch is called after each committed batch with the records it
	// retried or deleted (to publish events). Optional.
	OnBatch func(t *store.Task, rows []store.BatchRow)
	// OnCanary is called after a canary's phase changed: it watches its
	// sample, passed or aborted (to publish events). Optional.
	OnCanary func(t *store.Task)
	// OnQueueDeleted is called when a queue delete's task completed, with
	// its queue, whether the queue's API config was removed, and how many
	// of its records still wait (to refresh the queue configs and publish
	// events). Optional.
	OnQueueDeleted func(t *store.Task, queue string, removed bool, remaining int64)
	// RetryScope is what records adds to every retry of many records
	// (records.Service.RetryScope: records of Redrive's own topics and
	// Kafka's internal ones, which have no topic to go back to, are left
	// alone). Nil: nothing is added.
	RetryScope *filter.Scope
	// PatchRecord is the step of a patched retry for one record
	// (records.Service.PatchForTask): its redelivery edit, or why it is
	// skipped; an error fails the batch. Required for tasks with a patch.
	PatchRecord func(ctx context.Context, patch json.RawMessage, r *dlq.Record) (*dlq.Redelivery, string, error)
	// MaxBatchErrors fails a task after this many consecutive batches that
	// Postgres refused. Batches that could not reach Postgres at all do not
	// count: the task waits for the server instead. Default 10.
	MaxBatchErrors int
	// Clock paces rate-limited tasks and times every wait: polls, the
	// backoff after a failed batch, the wait for Postgres during an outage.
	// Default: clock.Wall.
	Clock clock.Clock
	// Owner names this replica in leases. Default: hostname and pid.
	Owner  string
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.BatchSize == 0 {
		c.BatchSize = 500
	}
	if c.Lease == 0 {
		c.Lease = 30 * time.Second
	}
	if c.Poll == 0 {
		c.Poll = time.Second
	}
	if c.MaxBatchErrors == 0 {
		c.MaxBatchErrors = 10
	}
	c.Clock = clock.Or(c.Clock)
	if c.Owner == "" {
		h, _ := os.Hostname()
		c.Owner = fmt.Sprintf("%s/%d/%s", h, os.Getpid(), uuid.NewString()[:8])
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Wake == nil {
		c.Wake = func() {}
	}
	if c.OnBatch == nil {
		c.OnBatch = func(*store.Task, []store.BatchRow) {}
	}
	if c.OnCanary == nil {
		c.OnCanary = func(*store.Task) {}
	}
	if c.OnQueueDeleted == nil {
		c.OnQueueDeleted = func(*store.Task, string, bool, int64) {}
	}
	return c
}

// Runner claims and runs tasks. It is a service.Service: Start looks for
// open tasks every Poll and at each Kick, and works through them.
type Runner struct {
	service.Base
	cfg   Config
	store *store.Store
	log   *slog.Logger
	kick  service.Wake
}

// New returns a Runner on st.
func New(cfg Config, st *store.Store) (*Runner, error) {
	cfg = cfg.withDefaults()
	if cfg.BatchSize < 1 || cfg.Lease <= 0 {
		return nil, errors.New("task: BatchSize and Lease must be positive")
	}
	return &Runner{cfg: cfg, store: st, log: cfg.Logger.With("component", "task"), kick: service.NewWake()}, nil
}

// Kick makes the runner look for tasks now (after one was created).
func (r *Runner) Kick() {
	r.kick.Signal()
}

// Name implements service.Service.
func (r *Runner) Name() string { return "task" }

// Start works on tasks until ctx ends or Stop: each pass claims open tasks
// and works through them one after the other, until none is left; the next
// pass comes after Poll or at a Kick. A task interrupted by Stop keeps its
// progress and is released for any replica to resume.
func (r *Runner) Start(ctx context.Context) error {
	loop := &service.Loop{Clock: r.cfg.Clock, Logger: r.log, What: "claim task", Interval: r.cfg.Poll, Wake: r.kick,
		Pass: func(ctx context.Context) (service.Next, error) {
			for ctx.Err() == nil {
				task, err := r.store.ClaimTask(ctx, r.cfg.Owner, r.cfg.Lease)
				if errors.Is(err, store.ErrNotFound) {
					break
				}
				if err != nil {
					return service.Next{}, err
				}
				r.work(ctx, task)
			}
			return service.Next{}, nil
		}}
	return r.Go(ctx, loop.Run)
}

// maxContended is how many times in a row a batch Postgres rolled back for
// another transaction's sake (Contended) is run again before it counts as a
// failed batch.
const maxContended = 10

// outageBackoffCap bounds the wait between batches while Postgres is away.
const outageBackoffCap = 5 * time.Second

func (r *Runner) work(ctx context.Context, t *store.Task) {
	log := r.log.With("task", t.ID, "kind", t.Kind)
	log.Info("task claimed", "processed", t.Processed, "total", t.Total)
	f, scope, err := Selection(t, r.cfg.RetryScope)
	if err != nil {
		_ = r.store.AddTaskError(ctx, t, r.cfg.Clock.Now(), "invalid stored filter: "+err.Error())
		r.finish(ctx, t, store.TaskFailed, log)
		return
	}
	patched := t.Kind == store.TaskRetry && len(t.Patch) > 0
	if patched && r.cfg.PatchRecord == nil {
		_ = r.store.AddTaskError(ctx, t, r.cfg.Clock.Now(), "this replica cannot apply a patch")
		r.finish(ctx, t, store.TaskFailed, log)
		return
	}
	batch := t.BatchSize
	if batch <= 0 || batch > r.cfg.BatchSize {
		batch = r.cfg.BatchSize
	}
	var lim *rate.Limiter
	if t.RateLimit > 0 {
		// A batch never asks for more than a second's worth of records, so
		// the limiter's burst covers it and records flow evenly.
		batch = max(1, min(batch, int(t.RateLimit)))
		lim = rate.NewLimiter(rate.Limit(t.RateLimit), batch)
		// Empty at the start: the first batch goes at once but is paid for
		// like every other, so that n records take n/rate seconds. (A full
		// bucket let a second batch through at once too: 20 records at 4/s
		// took 4 s, 5/s.)
		lim.AllowN(r.cfg.Clock.Now(), batch)
	}
	canary := t.Kind == store.TaskRetry && t.Canary != nil
	if canary {
		log.Info("canary task", "phase", t.CanaryState.Phase, "sample", t.Canary.SampleSize, "sampled", t.CanaryState.Sampled,
			"watch", t.Canary.Watch, "abort_if_refail", t.Canary.AbortIfRefail)
	}
	failures, outages, empty, contended := 0, 0, 0, 0
	for {
		if ctx.Err() != nil {
			r.release(t, log)
			return
		}
		cancel, err := r.store.TaskCancelRequested(ctx, t.ID)
		if err == nil && cancel {
			r.finish(ctx, t, store.TaskCancelled, log)
			return
		}
		// A canary first retries its sample, then watches it: the rest
		// waits for its verdict.
		sampling := false
		if canary {
			switch c := &t.CanaryState; {
			case c.Phase == store.CanaryAborted:
				r.finish(ctx, t, store.TaskAborted, log)
				return
			case c.Phase == store.CanaryWatch || c.Phase == store.CanarySample && (c.SampledAt != nil || c.Sampled >= t.Canary.SampleSize):
				if c.Sampled == 0 { // nothing was there to sample: nothing is left either
					r.complete(ctx, t, &f, scope, log)
					return
				}
				nt, stop := r.watch(ctx, t, log)
				if stop {
					return
				}
				t = nt
				continue
			case c.Phase == store.CanarySample:
				sampling = true
			}
		}
		cursor := ""
		if t.CursorID != nil {
			cursor = *t.CursorID
		}
		p := &store.BatchParams{Filter: f, Scope: scope, AfterID: cursor, Limit: batch, Target: t.Target}
		if canary || t.Kind.QueueDelete() {
			// Due on the runner's clock, which the watch is timed on; a
			// discard's time.
			p.At = r.cfg.Clock.Now()
		}
		if sampling {
			p.Limit = int(min(int64(batch), t.Canary.SampleSize-t.CanaryState.Sampled))
		}
		nt, res, err := r.store.TaskBatch(ctx, t, r.cfg.Lease, func(tx *store.Tx) (store.BatchResult, error) {
			var res store.BatchResult
			var err error
			switch {
			case t.Kind == store.TaskPurge:
				return r.store.PurgeBatch(ctx, tx, p)
			case t.Kind == store.TaskQueueDiscard:
				return r.store.DiscardQueueBatch(ctx, tx, p, queueDeletedError(t, f.Queue, p.At), p.At)
			case t.Kind == store.TaskQueueMove:
				return r.store.MoveQueueBatch(ctx, tx, p, t.TargetQueue)
			case patched:
				res, err = r.store.PatchRetryBatch(ctx, tx, p, func(rec *dlq.Record) (*dlq.Redelivery, string, error) {
					rd, skip, err := r.cfg.PatchRecord(ctx, t.Patch, rec)
					if rd != nil && t.Target != "" {
						rd.Target = t.Target
					}
					return rd, skip, err
				})
			default:
				res, err = r.store.RetryBatch(ctx, tx, p)
			}
			if err == nil && sampling {
				ids := make([]string, len(res.Rows))
				for i, row := range res.Rows {
					ids[i] = row.ID
				}
				err = r.store.AddSample(ctx, tx, t.ID, ids)
			}
			return res, err
		})
		switch {
		case errors.Is(err, store.ErrLeaseLost):
			log.Warn("task lease lost; another replica has it")
			return
		case err != nil && ctx.Err() != nil:
			r.release(t, log)
			return
		case store.Unavailable(err):
			// An outage is not the task's fault: keep the task and wait for
			// Postgres, however long it takes. Its token still matches when
			// the server returns, unless another replica took it over.
			outages++
			if outages == 1 {
				log.Warn("task waits for postgres", "err", err)
			}
			if !clock.Sleep(ctx, r.cfg.Clock, min(outageBackoffCap, time.Duration(outages)*200*time.Millisecond)) {
				r.release(t, log)
				return
			}
			continue
		case store.Contended(err) && contended < maxContended:
			// Rolled back for another transaction's sake (a week's
			// partitions made meanwhile, say): not the task's fault, and
			// nothing of the batch was applied. Run it again.
			contended++
			log.Info("task batch rolled back by lock contention; running it again", "err", err, "consecutive", contended)
			if !clock.Sleep(ctx, r.cfg.Clock, time.Duration(contended)*50*time.Millisecond) {
				r.release(t, log)
				return
			}
			continue
		case err != nil:
			failures++
			log.Warn("task batch failed", "err", err, "consecutive", failures)
			_ = r.store.AddTaskError(ctx, t, r.cfg.Clock.Now(), err.Error())
			if failures >= r.cfg.MaxBatchErrors {
				r.finish(ctx, t, store.TaskFailed, log)
				return
			}
			clock.Sleep(ctx, r.cfg.Clock, time.Duration(failures)*200*time.Millisecond)
			continue
		}
		if outages > 0 {
			log.Info("postgres is back; task resumes", "waited_batches", outages)
			outages = 0
		}
		failures, contended = 0, 0
		// Records a patch skipped count as progress: the cursor moved.
		seen := res.N + len(res.Skipped)
		if seen > 0 {
			empty = 0
		}
		t = nt
		if res.N > 0 {
			if t.Kind == store.TaskRetry || t.Kind == store.TaskQueueMove {
				r.cfg.Wake()
			}
			r.cfg.OnBatch(t, res.Rows)
			// Pay for the batch done: the next waits until the rate allows
			// it, and the last (empty) one waits for nothing.
			if lim != nil {
				now := r.cfg.Clock.Now()
				if d := lim.ReserveN(now, res.N).DelayFrom(now); d > 0 && !clock.Sleep(ctx, r.cfg.Clock, d) {
					r.release(t, log)
					return
				}
			}
		}
		if seen == 0 {
			after := ""
			if t.CursorID != nil {
				after = *t.CursorID
			}
			empty++
			if more, err := r.store.RemainsAfter(ctx, t.Kind, &f, scope, after); err == nil && more && empty < 5 {
				continue // the rows it locked all changed meanwhile; go on
			}
			if sampling && t.CanaryState.Sampled > 0 {
				// Fewer records than the sample asked for: they are the
				// sample, watched as any.
				if t, err = r.sampled(ctx, t, log); err != nil {
					return
				}
				continue
			}
			if t.Kind.QueueDelete() {
				r.finishQueueDelete(ctx, t, &f, scope, log)
				return
			}
			r.complete(ctx, t, &f, scope, log)
			return
		}
		if sampling && t.CanaryState.Sampled >= t.Canary.SampleSize {
			if t, err = r.sampled(ctx, t, log); err != nil {
				return
			}
		}
	}
}

// Selection is what task t touches, each time it is claimed: its stored
// filter, read back, and the scope its creation and kind impose — records
// stored after it was created are left alone, and a retry is narrowed by
// retry, the scope records adds to every retry of many records (nil: none).
func Selection(t *store.Task, retry *filter.Scope) (filter.Filter, filter.Scope, error) {
	var scope filter.Scope
	if retry != nil && t.Kind == store.TaskRetry {
		scope = *retry
		scope.NotQueues = slices.Clone(retry.NotQueues)
	}
	f, err := filter.ParseJSON(t.Filter, filter.Bulk, "filter")
	if err != nil {
		return f, scope, err
	}
	if t.MaxID != nil {
		scope.MaxID = *t.MaxID
	}
	if t.QueueGlobs != nil {
		scope.QueueGlobs = t.QueueGlobs
	}
	return f, scope, nil
}

// finish ends t in state, short of completing it: what it has not got to
// remains, left as it was by that end (cancelled, aborted, failed).
func (r *Runner) finish(ctx context.Context, t *store.Task, state store.TaskState, log *slog.Logger) {
	if _, err := r.store.FinishTask(context.WithoutCancel(ctx), t, state, 0); err != nil {
		log.Warn("finish task", "state", state, "err", err)
		return
	}
	log.Info("task finished", "state", state, "processed", t.Processed, "skipped", t.Skipped, "remaining", t.Remaining())
}

// inFlightAfter counts the records after t's cursor it goes past because a
// scheduler is producing them (f narrowed by scope): skipped as in flight
// when it completes. When they cannot be counted they are left to the
// count of those no longer matching (logged).
func (r *Runner) inFlightAfter(ctx context.Context, t *store.Task, f *filter.Filter, scope filter.Scope, log *slog.Logger) int64 {
	after := ""
	if t.CursorID != nil {
		after = *t.CursorID
	}
	n, err := r.store.InFlightAfter(ctx, t.Kind, f, scope, after)
	if err != nil {
		log.Warn("count the records in flight the task leaves; counted as no longer matching", "err", err)
		return 0
	}
	return n
}

// complete ends t completed: every record of its total is accounted for,
// processed or skipped with its reason (store.FinishTask).
func (r *Runner) complete(ctx context.Context, t *store.Task, f *filter.Filter, scope filter.Scope, log *slog.Logger) {
	ctx = context.WithoutCancel(ctx)
	nt, err := r.store.FinishTask(ctx, t, store.TaskCompleted, r.inFlightAfter(ctx, t, f, scope, log))
	if err != nil {
		log.Warn("finish task", "state", store.TaskCompleted, "err", err)
		return
	}
	log.Info("task finished", "state", nt.State, "total", nt.Total, "processed", nt.Processed, "skipped", nt.Skipped,
		"skipped_reasons", nt.SkippedReasons)
}

func (r *Runner) release(t *store.Task, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.store.ReleaseTask(ctx, t); err != nil {
		log.Warn("release task", "err", err)
		return
	}
	log.Info("task released for resumption", "processed", t.Processed)
}

// queueDeletedError is the error a discarding delete of queue (task t)
// adds to each record it discards, at now.
func queueDeletedError(t *store.Task, queue string, now time.Time) dlq.ErrorEntry {
	by := ""
	if t.CreatedBy != "" {
		by = " by " + t.CreatedBy
	}
	return dlq.ErrorEntry{Type: store.ErrorTypeQueueDeleted, Code: dlq.CodeDiscard, OccurredAt: now,
		Message: "queue " + queue + " was deleted" + by + " (strategy discard, task " + t.ID + ")"}
}

// finishQueueDelete completes queue delete task t: the queue's API config
// is removed unless records of it still wait (they were being produced
// when the task passed them, and their redelivery failed), which the task's
// errors then say.
func (r *Runner) finishQueueDelete(ctx context.Context, t *store.Task, f *filter.Filter, scope filter.Scope, log *slog.Logger) {
	ctx = context.WithoutCancel(ctx)
	queue := f.Queue
	note := func(remaining int64) string {
		return fmt.Sprintf("%d records of queue %s still wait (they were being redelivered when the task passed them); "+
			"the queue keeps its API config, paused: delete it again", remaining, queue)
	}
	nt, removed, remaining, err := r.store.FinishQueueDelete(ctx, t, queue, r.cfg.Clock.Now(), r.inFlightAfter(ctx, t, f, scope, log), note)
	if err != nil {
		log.Warn("finish queue delete", "queue", queue, "err", err)
		if !errors.Is(err, store.ErrLeaseLost) {
			r.release(t, log)
		}
		return
	}
	if remaining > 0 {
		log.Warn("queue delete left records", "queue", queue, "records", remaining)
	}
	log.Info("task finished", "state", nt.State, "queue", queue, "config_removed", removed)
	r.cfg.OnQueueDeleted(nt, queue, removed, remaining)
}
