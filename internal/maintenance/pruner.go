package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/service"
	"github.com/redrive/redrive/internal/store"
)

// Pruning reasons, as in metrics and dead_letter.pruned events.
const (
	ReasonMaxAge             = "max_age"
	ReasonMaxCount           = "max_count"
	ReasonRetentionDiscarded = "retention.discarded"
	ReasonRetentionCompleted = "retention.completed"
	ReasonRetentionCancelled = "retention.cancelled"
)

// PrunerConfig configures a Pruner. Zero fields take the defaults noted.
type PrunerConfig struct {
	// Deps: Policy gives each queue's retention and pruning_policy, Events
	// receives dead_letter.pruned, Metrics counts pruned records, and the
	// Clock is the time retention is measured at.
	Deps
	// Interval between passes. Default 5 minutes (OJS dead-letter spec §8.1).
	Interval time.Duration
	// BatchSize is the most rows one DELETE removes (one short transaction
	// each). Default 1000.
	BatchSize int
	// Archiving says whether archive copies are made (the archiver runs).
	// Then a record whose copy is due but not yet made is never pruned, and
	// under pruning_policy archive completed records get a copy before they
	// are pruned. Without it, records under pruning_policy archive are kept
	// (and an error logged) rather than deleted without their copy.
	Archiving bool
	// WakeArchiver is called after the pruner asked for archive copies. Optional.
	WakeArchiver func()
	// CheckArchive, with Archiving, runs before each pass: it makes the
	// copies lost with an archive topic that was deleted and created again
	// due again (the archiver's CheckTopics), so that their records are not
	// deleted. When it fails (Kafka unreachable, an archive topic missing)
	// the pass is skipped: nothing is pruned while a copy may be lost.
	// Optional.
	CheckArchive func(context.Context) error
}

func (c PrunerConfig) withDefaults() PrunerConfig {
	c.Deps = c.Deps.withDefaults()
	c.Interval = positiveOr(c.Interval, 5*time.Minute)
	c.BatchSize = positiveOr(c.BatchSize, 1000)
	if c.WakeArchiver == nil {
		c.WakeArchiver = func() {}
	}
	return c
}

// Pruner removes records past their retention: dead letters by age
// (dead_letter.retention.max_age) and then the oldest beyond max_count,
// discards past retention.discarded, cancelled records past
// retention.cancelled and completed records past retention.completed, per queue, in batches. One replica prunes at a time.
// It is a service.Service: Start prunes every Interval.
type Pruner struct {
	service.Base
	cfg PrunerConfig
	log *slog.Logger

	mu     sync.Mutex
	nextAt time.Time

	// keptUntil is, by partition, when a past partition found still needed
	// is read again (the pass's own goroutine only).
	keptUntil map[string]time.Time
}

// NewPruner returns a Pruner; Start it, or call RunOnce.
func NewPruner(cfg PrunerConfig) (*Pruner, error) {
	if cfg.Store == nil {
		return nil, errors.New("pruner: Store is required")
	}
	cfg = cfg.withDefaults()
	return &Pruner{cfg: cfg, log: cfg.Logger.With("component", "pruner")}, nil
}

// PruneCount is what one pass removed from one queue for one reason.
type PruneCount struct {
	Queue  string
	Reason string
	State  dlq.State
	Count  int64
}

// PruneResult is the outcome of one pass.
type PruneResult struct {
	// Leader is false when another replica held the pruning lock; nothing was done.
	Leader bool
	Pruned []PruneCount
}

// Total is the number of records the pass removed.
func (r *PruneResult) Total() int64 {
	var n int64
	for _, p := range r.Pruned {
		n += p.Count
	}
	return n
}

// NextPruneAt is when the next pass is due, nil before Start.
func (p *Pruner) NextPruneAt() *time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nextAt.IsZero() {
		return nil
	}
	t := p.nextAt
	return &t
}

// Name implements service.Service.
func (p *Pruner) Name() string { return "pruner" }

// Start prunes at once and then every Interval until ctx ends or Stop.
func (p *Pruner) Start(ctx context.Context) error {
	p.setNext(p.cfg.Clock.Now())
	loop := &service.Loop{Clock: p.cfg.Clock, Logger: p.log, What: "prune", Severe: true, Interval: p.cfg.Interval,
		Pass: func(ctx context.Context) (service.Next, error) {
			_, err := p.RunOnce(ctx)
			p.setNext(p.cfg.Clock.Now().Add(p.cfg.Interval))
			return service.Next{}, err
		}}
	return p.Go(ctx, loop.Run)
}

func (p *Pruner) setNext(t time.Time) {
	p.mu.Lock()
	p.nextAt = t.UTC()
	p.mu.Unlock()
}

// RunOnce runs one pruning pass if no other replica is running one.
func (p *Pruner) RunOnce(ctx context.Context) (*PruneResult, error) {
	m := p.cfg.Metrics
	res := &PruneResult{}
	leader, err := asLeader(ctx, p.cfg.Store, lockPruner, m.PrunerRuns, func(db *store.Maint) error {
		res.Leader = true
		if p.cfg.Archiving && p.cfg.CheckArchive != nil {
			if err := p.cfg.CheckArchive(ctx); err != nil {
				return fmt.Errorf("pass skipped, nothing pruned: cannot make sure the archive copies exist: %w", err)
			}
		}
		start := time.Now() // wall time: how long the pass took, for PrunerDuration
		defer func() { m.PrunerDuration.Observe(time.Since(start).Seconds()) }()
		return p.prune(ctx, db, res)
	})
	if err != nil {
		if !leader {
			return nil, err
		}
		return res, err
	}
	m.PrunerLastSuccess.Set(float64(p.cfg.Clock.Now().Unix()))
	if n := res.Total(); n > 0 {
		p.log.Info("pruned", "records", n)
	}
	return res, nil
}

// prune runs a pass on db, the connection holding the pruning lock.
func (p *Pruner) prune(ctx context.Context, db *store.Maint, res *PruneResult) error {
	now := p.cfg.Clock.Now()
	var errs []error
	if err := p.partitions(ctx, db, now, res); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The batched deletes go on: a partition that cannot be made or
		// dropped now (a lock not granted in time) is tried next pass.
		errs = append(errs, fmt.Errorf("partitions: %w", err))
	}
	queues, err := db.TerminalQueues(ctx)
	if err != nil {
		return err
	}
	for _, q := range queues {
		if err := p.pruneQueue(ctx, db, q, p.cfg.Policy(q), now, res); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// One queue's failure (an archive topic missing) does not stop the others.
			errs = append(errs, fmt.Errorf("queue %s: %w", q, err))
		}
	}
	return errors.Join(errs...)
}

func (p *Pruner) pruneQueue(ctx context.Context, db *store.Maint, q string, t policy.Topic, now time.Time, res *PruneResult) error {
	dead := store.PruneSet{Queue: q, State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDeadLetter}
	ret := t.DeadLetter.Retention
	if ret.MaxAge > 0 {
		if err := p.byAge(ctx, db, dead, now.Add(-ret.MaxAge), ReasonMaxAge, t, res); err != nil {
			return err
		}
	}
	if ret.MaxCount > 0 {
		n, err := db.CountPruneSet(ctx, &dead)
		if err != nil {
			return err
		}
		if excess := n - int64(ret.MaxCount); excess > 0 {
			if err := p.batches(ctx, db, store.PruneBatchParams{PruneSet: dead}, excess, ReasonMaxCount, t, res); err != nil {
				return err
			}
		}
	}
	if d := t.Retention.Discarded; d > 0 {
		set := store.PruneSet{Queue: q, State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDiscard}
		if err := p.byAge(ctx, db, set, now.Add(-d), ReasonRetentionDiscarded, t, res); err != nil {
			return err
		}
	}
	if d := t.Retention.Cancelled; d > 0 {
		set := store.PruneSet{Queue: q, State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionCancelled}
		if err := p.byAge(ctx, db, set, now.Add(-d), ReasonRetentionCancelled, t, res); err != nil {
			return err
		}
	}
	if d := t.Retention.Completed; d > 0 {
		set := store.PruneSet{Queue: q, State: dlq.StateCompleted}
		if err := p.byAge(ctx, db, set, now.Add(-d), ReasonRetentionCompleted, t, res); err != nil {
			return err
		}
	}
	return nil
}

func (p *Pruner) byAge(ctx context.Context, db *store.Maint, set store.PruneSet, before time.Time, reason string, t policy.Topic, res *PruneResult) error {
	return p.batches(ctx, db, store.PruneBatchParams{PruneSet: set, Before: before}, -1, reason, t, res)
}

// batches deletes in batches until nothing matches or max records (max < 0:
// no bound) are gone, then reports the count. With archiving on, records whose
// archive copy is still due are kept; under pruning_policy archive, records
// without a copy (completed ones) get one asked for, and are pruned by a later
// pass once the archiver has made it.
func (p *Pruner) batches(ctx context.Context, db *store.Maint, params store.PruneBatchParams, max int64, reason string, t policy.Topic, res *PruneResult) error {
	archivePolicy := t.PruningPolicy == policy.PruneArchive
	if archivePolicy && !p.cfg.Archiving {
		return errors.New("pruning_policy is archive but archiving is off (REDRIVE_ARCHIVE_TOPIC=off); records kept")
	}
	params.Archived = p.cfg.Archiving && (archivePolicy || params.State == dlq.StateDiscarded)
	limit := func(done int64) int {
		if max < 0 {
			return p.cfg.BatchSize
		}
		return int(min(int64(p.cfg.BatchSize), max-done))
	}
	if archivePolicy {
		var asked int64
		for max < 0 || asked < max {
			params.Limit = limit(asked)
			n, err := db.RequestArchive(ctx, &params)
			asked += n
			if err != nil {
				return err
			}
			if n < int64(params.Limit) {
				break
			}
		}
		if asked > 0 {
			p.log.Info("asked for archive copies before pruning", "queue", params.Queue, "state", params.State, "records", asked)
			p.cfg.WakeArchiver()
		}
	}
	var total int64
	var err error
	for max < 0 || total < max {
		params.Limit = limit(total)
		var n int64
		n, err = db.PruneBatch(ctx, &params)
		total += n
		if err != nil || n < int64(params.Limit) {
			break
		}
	}
	p.report(ctx, params.PruneSet, reason, t.PruningPolicy, total, res)
	return err
}

func (p *Pruner) report(ctx context.Context, set store.PruneSet, reason string, pp policy.PruningPolicy, n int64, res *PruneResult) {
	if n == 0 {
		return
	}
	res.Pruned = append(res.Pruned, PruneCount{Queue: set.Queue, Reason: reason, State: set.State, Count: n})
	m := p.cfg.Metrics
	m.RecordsPruned.WithLabelValues(set.Queue, string(set.State), reason).Add(float64(n))
	if set.Exhaustion == dlq.ExhaustionDeadLetter {
		m.PrunedTotal.WithLabelValues(set.Queue).Add(float64(n))
	}
	p.cfg.Events.Publish(ctx, events.Event{
		Type: events.DeadLetterPruned, Subject: set.Queue, Queue: set.Queue,
		Data: events.PrunedData{Queue: set.Queue, Count: n, Reason: reason, State: string(set.State),
			Exhaustion: string(set.Exhaustion), PruningPolicy: string(pp)},
	})
}
