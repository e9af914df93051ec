package redeliver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/recreate"
	"github.com/redrive/redrive/internal/service"
	"github.com/redrive/redrive/internal/store"
)

// Archiver copies records to their archive topic: the one outbox loop behind
// every archive copy. Records become due for it when they are discarded, or
// when the pruner wants a copy before it deletes them (pruning_policy
// archive). Each copy is claimed with a lease, produced, then settled: done,
// or failed with the reason and its own backoff. A record too large for the
// archive topic is archived as a reference copy (headers, redrive.id and
// redrive.value_omitted=<bytes>, no value), the reason kept on the record.
//
// It is a service.Service: Start runs its loop, Stop ends it and closes its
// Kafka client.
type Archiver struct {
	outbox
	cfg ArchiverConfig

	checkMu      sync.Mutex // one topic check at a time
	checkedAt    time.Time  // when the last periodic check ran
	checkErrLog  time.Time  // when a failed periodic check was last logged
	checkFailing int        // periodic checks failed since that log
}

// NewArchiver creates an Archiver and its Kafka client; Start starts it,
// Stop closes the client (started or not).
func NewArchiver(cfg ArchiverConfig, st *store.Store) (*Archiver, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cl, err := newProducer(cfg.Brokers, cfg.ProduceTimeout, cfg.ClientOpts...)
	if err != nil {
		return nil, fmt.Errorf("archiver: create kafka client: %w", err)
	}
	return &Archiver{outbox: newOutbox("archiver", st, cl, cfg.Logger, cfg.Clock), cfg: cfg}, nil
}

// Name implements service.Service.
func (a *Archiver) Name() string { return "archiver" }

// Start starts the archive loop: a pass archives one batch; the next runs at
// once after a batch, else when the next copy is due, at a Wake or after
// PollInterval; after a failed pass, after a backoff growing from 100ms to
// 10s. A batch being produced when it stops is finished and settled first.
func (a *Archiver) Start(ctx context.Context) error {
	return a.Go(ctx, func(ctx context.Context) error {
		a.log.Info("archiver started")
		loop := &service.Loop{Clock: a.cfg.Clock, Logger: a.log, What: "archive pass", Severe: true,
			Interval: a.cfg.PollInterval, Wake: a.wake, Backoff: service.Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second},
			Pass: func(ctx context.Context) (service.Next, error) {
				n, next, err := a.pass(ctx)
				return service.Next{More: n > 0, At: next}, err
			}}
		return loop.Run(ctx)
	})
}

// RunOnce archives every copy due at the archiver's clock and returns how
// many records it settled as done. Tests drive it with an injected clock.
func (a *Archiver) RunOnce(ctx context.Context) (int, error) {
	done := 0
	for {
		claimed, err := a.archiveBatch(ctx, a.cfg.Clock.Now())
		done += claimed.done
		if err != nil || claimed.n == 0 {
			return done, err
		}
	}
}

// pass archives one batch and, when nothing was due, says when the next copy is.
func (a *Archiver) pass(ctx context.Context) (int, time.Time, error) {
	now := a.cfg.Clock.Now()
	b, err := a.archiveBatch(ctx, now)
	if err != nil || b.n > 0 {
		return b.n, time.Time{}, err
	}
	next, err := a.store.NextArchiveDue(ctx, now)
	return 0, next, err
}

type batchResult struct{ n, done int }

// archiveBatch claims, produces and settles one batch of copies. Every
// TopicCheckInterval, and first of all, it checks the archive topics
// (CheckTopics): the id a topic has is known before copies are made to it.
func (a *Archiver) archiveBatch(ctx context.Context, now time.Time) (batchResult, error) {
	a.checkTopicsEvery(ctx)
	c, err := a.store.ClaimArchive(ctx, now, a.cfg.BatchSize, a.cfg.Lease)
	if err != nil || len(c.Records) == 0 {
		return batchResult{}, err
	}
	ctx = context.WithoutCancel(ctx) // what is produced is settled, even at shutdown
	outcomes, recreated := a.produce(ctx, c.Records, func(r *dlq.Record) *kgo.Record {
		return envelope.Archive(r, a.cfg.Topic(r.DLQ.Topic))
	})
	if len(recreated) > 0 {
		// The copies made to the old topic are gone: make them due again
		// now, not at the next periodic check. This batch's copies were
		// produced to the new topic; if the check makes them due again too,
		// their settle below changes nothing and they are copied once more.
		if err := a.CheckTopics(ctx); err != nil {
			a.log.Warn("check archive topics after one was recreated", "topics", recreated, "err", err)
		}
	}
	// Copies too large for the topic go as reference copies instead.
	var large []dlq.Record
	var at []int
	for i, o := range outcomes {
		if o.Failure != nil && o.Failure.Reason == dlq.ReasonTooLarge {
			large, at = append(large, c.Records[i]), append(at, i)
		}
	}
	if len(large) > 0 {
		refs, _ := a.produce(ctx, large, func(r *dlq.Record) *kgo.Record {
			return envelope.ArchiveReference(r, a.cfg.Topic(r.DLQ.Topic))
		})
		for j, o := range refs {
			if o.Failure == nil {
				o.Reason = dlq.ReasonTooLarge
			}
			outcomes[at[j]] = o
		}
	}
	res := batchResult{n: len(c.Records)}
	type failedKey struct{ queue, reason string }
	failed := map[failedKey][]int{}
	for i, o := range outcomes {
		r := &c.Records[i]
		if o.Failure == nil {
			res.done++
			a.cfg.Metrics.Redelivery.Archived.WithLabelValues(r.Queue).Inc()
			continue
		}
		k := failedKey{r.Queue, o.Failure.Reason}
		failed[k] = append(failed[k], i)
	}
	for k, idx := range failed {
		r, f := &c.Records[idx[0]], outcomes[idx[0]].Failure
		a.cfg.Metrics.Redelivery.ArchiveFailures.WithLabelValues(k.queue, k.reason).Add(float64(len(idx)))
		a.fails.failed("archive copy failed; the record waits on its own backoff and is kept until it is archived",
			k.queue, a.cfg.Topic(r.DLQ.Topic), r.ID, len(idx), f)
	}
	// As the scheduler does: a Postgres blip while settling is waited out
	// within the lease; past it the claim expires and the copies are made
	// again (a duplicate copy, never a missing one).
	log := a.cfg.Logger.With("component", "archiver", "claim", c.Token)
	if !settleWithinLease(log, a.cfg.Clock, a.cfg.Lease, now, len(c.Records), func() error {
		_, err := a.store.SettleArchive(ctx, c, outcomes, a.cfg.Clock.Now())
		return err
	}) {
		return res, errors.New("archive claim not settled; its copies are made again when it expires")
	}
	return res, nil
}

// produce sends one record per claimed record and returns each outcome, a
// failure with its own backoff for those the brokers refused, and the archive
// topics found deleted and created again (produced to anew: see produceAll).
func (a *Archiver) produce(ctx context.Context, recs []dlq.Record, build func(*dlq.Record) *kgo.Record) ([]store.ArchiveOutcome, []string) {
	out := make([]*kgo.Record, len(recs))
	outcomes := make([]store.ArchiveOutcome, len(recs))
	for i := range recs {
		out[i] = build(&recs[i])
		outcomes[i].ID = recs[i].ID
	}
	res := produceAll(ctx, a.client, a.resets, out)
	now := a.cfg.Clock.Now()
	for i, err := range res.errs {
		if err == nil {
			continue
		}
		n := 1
		if f := recs[i].Archive; f != nil && f.Failure != nil {
			n = f.Failure.Failures + 1
		}
		f := a.cfg.FailureBackoff.failure(err, n, now)
		outcomes[i].Failure = &f
	}
	return outcomes, res.recreated
}

// CheckTopics makes sure that every copy marked done is on its archive topic
// as the topic is now. It reads the id of the archive topic of each of
// ArchiverConfig.DLQTopics from the brokers: an archive topic deleted and
// created again has a new id, and the copies made to the old one are gone
// with it, so they are made due again (store.ArchiveTopicSeen) — for the
// records of every DLQ topic archived to it — and the archiver is woken to
// make them. The pruner calls it before each pass and skips the pass when it
// fails, so that no record is deleted while its copy may be lost: when the
// brokers cannot be asked, or an archive topic that existed does not any
// more (deleted, not created again yet). One that never existed (not created
// yet) holds no copies to lose.
func (a *Archiver) CheckTopics(ctx context.Context) error {
	if len(a.cfg.DLQTopics) == 0 {
		return nil
	}
	a.checkMu.Lock()
	defer a.checkMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, a.cfg.ProduceTimeout)
	defer cancel()
	watched := map[string]bool{}
	for _, d := range a.cfg.DLQTopics {
		watched[a.cfg.Topic(d)] = true
	}
	names := slices.Sorted(maps.Keys(watched))
	ids, err := recreate.TopicIDs(ctx, a.client, names)
	if err != nil {
		return fmt.Errorf("check archive topics %s: %w", strings.Join(names, ", "), err)
	}
	var stored []string // DLQ topics of stored records, read once a topic was recreated
	var errs []error
	for _, name := range names {
		id, err := ids[name].ID, ids[name].Err
		switch {
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			// Missing and never seen (not created yet, as at a first
			// start): no copy was made to it, so none can be lost.
			// Missing after it was seen: deleted, with its copies.
			known, lerr := a.store.ArchiveTopicKnown(ctx, name)
			switch {
			case lerr != nil:
				errs = append(errs, lerr)
			case known:
				errs = append(errs, fmt.Errorf("archive topic %q does not exist (it did: deleted, and its copies with it)", name))
			}
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("check archive topic %q: %w", name, err))
			continue
		case id == [16]byte{}:
			continue // a broker without topic ids: nothing to compare
		}
		if stored == nil {
			if stored, err = a.store.DLQTopics(ctx); err != nil {
				return errors.Join(append(errs, err)...)
			}
		}
		var archived []string // the DLQ topics whose copies go to this topic
		for _, dt := range slices.Concat(a.cfg.DLQTopics, stored) {
			if a.cfg.Topic(dt) == name && !slices.Contains(archived, dt) {
				archived = append(archived, dt)
			}
		}
		n, err := a.store.ArchiveTopicSeen(ctx, name, id, archived, a.cfg.Clock.Now())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if n > 0 {
			a.log.Warn("archive topic was deleted and created again: the copies made to the old topic are made again",
				"topic", name, "records", n, "topic_id", uuid.UUID(id).String())
			a.Wake()
		}
	}
	return errors.Join(errs...)
}

// checkTopicsEvery runs CheckTopics every TopicCheckInterval; a failure is
// logged at most once a minute.
func (a *Archiver) checkTopicsEvery(ctx context.Context) {
	a.checkMu.Lock()
	now := a.cfg.Clock.Now()
	due := a.checkedAt.IsZero() || now.Sub(a.checkedAt) >= a.cfg.TopicCheckInterval
	if due {
		a.checkedAt = now
	}
	a.checkMu.Unlock()
	if !due {
		return
	}
	err := a.CheckTopics(ctx)
	if err == nil || ctx.Err() != nil {
		return
	}
	a.checkMu.Lock()
	defer a.checkMu.Unlock()
	a.checkFailing++
	if now := a.cfg.Clock.Now(); a.checkErrLog.IsZero() || now.Sub(a.checkErrLog) >= time.Minute {
		a.log.Warn("check archive topics failed; the pruner keeps every record until a check succeeds",
			"failed_since_last_log", a.checkFailing-1, "err", err)
		a.checkErrLog, a.checkFailing = now, 0
	}
}
