// Package redeliver is the durable scheduler: it claims records that are due
// for (re)delivery, produces them back to their topic, and marks them — and
// copies discarded records to their archive topic.
//
// Claims are row locks held by the claiming transaction (FOR UPDATE SKIP
// LOCKED): replicas never take the same record, and a crash between produce and
// mark rolls the claim back, so the record is redelivered again rather than
// lost (at least once; redrive.id + redrive.attempt let consumers dedupe).
// It never decides retry policy: ingest and the API set next_retry_at.
package redeliver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/store"
)

// Scheduler redelivers due records and archives discarded ones.
type Scheduler struct {
	cfg    Config
	store  *store.Store
	client *kgo.Client
	wake   chan struct{}

	mu       sync.Mutex
	limiters map[string]*rate.Limiter

	// afterProduce, when set, runs between produce and mark (crash tests).
	afterProduce func()
}

// New creates a Scheduler; Run starts it.
func New(cfg Config, st *store.Store) (*Scheduler, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.RecordPartitioner(kgo.BasicConsistentPartitioner(partitionFor)),
		// A produce that cannot finish must fail well within the lease, so the
		// claim is postponed rather than abandoned.
		kgo.RecordDeliveryTimeout(cfg.Lease / 2),
		kgo.ProducerLinger(0),
	}, cfg.ClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("redeliver: create kafka client: %w", err)
	}
	return &Scheduler{cfg: cfg, store: st, client: cl, wake: make(chan struct{}, 1), limiters: map[string]*rate.Limiter{}}, nil
}

// Wake makes the scheduler look for due records now, instead of at its next
// due time or poll. Safe to call from anywhere, never blocks.
func (s *Scheduler) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Close releases the Kafka client. Run closes it itself.
func (s *Scheduler) Close() { s.client.Close() }

// Run schedules until ctx is done.
func (s *Scheduler) Run(ctx context.Context) error {
	defer s.client.Close()
	log := s.cfg.Logger.With("component", "redeliver")
	log.Info("scheduler started", "workers", s.cfg.Workers)
	g, ctx := errgroup.WithContext(ctx)
	for range s.cfg.Workers {
		g.Go(func() error { s.loop(ctx); return nil })
	}
	return g.Wait()
}

func (s *Scheduler) loop(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		done, next, err := s.pass(ctx)
		wait := s.cfg.PollInterval
		switch {
		case err != nil && ctx.Err() == nil:
			s.cfg.Logger.Error("scheduler pass failed; retrying", "component", "redeliver", "retry_in", backoff, "err", err)
			wait, backoff = backoff, min(backoff*2, 10*time.Second)
		case done > 0:
			backoff = 100 * time.Millisecond
			continue // there may be more due right now
		case !next.IsZero():
			wait = min(wait, max(next.Sub(s.cfg.Now()), time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-s.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// RunOnce redelivers and archives everything due at the scheduler's clock,
// until nothing is left, and returns how many records it handled. Tests drive
// the scheduler with it and an injected clock.
func (s *Scheduler) RunOnce(ctx context.Context) (int, error) {
	total := 0
	for {
		done, _, err := s.pass(ctx)
		total += done
		if err != nil || done == 0 {
			return total, err
		}
	}
}

// pass handles one batch per active queue plus one archive batch. It returns
// how many records it handled and when the next record is due.
func (s *Scheduler) pass(ctx context.Context) (int, time.Time, error) {
	now := s.cfg.Now()
	queues, err := s.store.WaitingQueues(ctx)
	if err != nil {
		return 0, time.Time{}, err
	}
	var (
		done   int
		active []string
		next   time.Time
		errs   []error
	)
	for _, q := range queues {
		t := s.cfg.Policies.Resolve(q, "")
		if t.State == policy.TopicPaused {
			continue
		}
		limit := s.cfg.BatchSize
		lim := s.limiter(q, t.Redelivery.RateLimit)
		if lim != nil {
			tokens := int(math.Floor(lim.TokensAt(now)))
			if tokens < 1 {
				next = earliest(next, now.Add(time.Duration(float64(time.Second)/float64(lim.Limit()))))
				continue
			}
			limit = min(limit, tokens)
		}
		active = append(active, q)
		n, err := s.redeliverQueue(ctx, q, t, now, limit, lim)
		done += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	if !s.cfg.ArchiveDisabled {
		n, err := s.archive(ctx, now)
		done += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	if done == 0 && len(active) > 0 {
		due, err := s.store.NextDue(ctx, active)
		if err != nil {
			errs = append(errs, err)
		}
		for _, at := range due {
			next = earliest(next, at)
		}
	}
	return done, next, errors.Join(errs...)
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// limiter returns the queue's rate limiter, or nil when it is unlimited.
func (s *Scheduler) limiter(queue string, perSecond float64) *rate.Limiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	if perSecond <= 0 {
		delete(s.limiters, queue)
		return nil
	}
	lim, ok := s.limiters[queue]
	if !ok {
		// A burst of one second's worth: a backlog drains at the rate, not in a spike.
		lim = rate.NewLimiter(rate.Limit(perSecond), max(1, int(perSecond)))
		lim.SetBurstAt(s.cfg.Now(), max(1, int(perSecond)))
		s.limiters[queue] = lim
	} else if lim.Limit() != rate.Limit(perSecond) {
		now := s.cfg.Now()
		lim.SetLimitAt(now, rate.Limit(perSecond))
		lim.SetBurstAt(now, max(1, int(perSecond)))
	}
	return lim
}

// redeliverQueue claims up to limit due records of one queue, produces them
// and marks them, in one claim.
func (s *Scheduler) redeliverQueue(ctx context.Context, queue string, t policy.Topic, now time.Time, limit int, lim *rate.Limiter) (int, error) {
	start := time.Now()
	claim, err := s.store.ClaimDue(ctx, queue, now, limit, s.cfg.Lease)
	if err != nil || len(claim.Records) == 0 {
		return 0, err
	}
	defer claim.Abort(ctx) // no-op after Commit
	if lim != nil {
		lim.AllowN(now, len(claim.Records))
	}
	out := make([]*kgo.Record, len(claim.Records))
	for i := range claim.Records {
		r := &claim.Records[i]
		out[i] = envelope.Redelivery(r, target(r, t), partition(r, t), r.Attempt, now)
	}
	ok, failed := s.produce(ctx, claim.Records, out)
	if s.afterProduce != nil {
		s.afterProduce()
	}
	if err := claim.Postpone(ctx, failed, now.Add(s.cfg.RetryBackoff)); err != nil {
		return 0, err
	}
	if err := claim.Commit(ctx); err != nil {
		return 0, err
	}
	m := s.cfg.Metrics.Redelivery
	m.Redelivered.WithLabelValues(queue).Add(float64(len(ok)))
	if len(failed) > 0 {
		m.Failures.WithLabelValues(queue).Add(float64(len(failed)))
	}
	for i := range claim.Records {
		if due := claim.Records[i].NextRetryAt; due != nil {
			m.Lateness.Observe(max(now.Sub(*due), 0).Seconds())
		}
	}
	m.BatchSeconds.Observe(time.Since(start).Seconds())
	return len(claim.Records), nil
}

// produce sends the records and sorts the claimed ids by outcome.
func (s *Scheduler) produce(ctx context.Context, recs []dlq.Record, out []*kgo.Record) (ok, failed []string) {
	results := s.client.ProduceSync(ctx, out...)
	byRecord := make(map[*kgo.Record]error, len(results))
	for _, res := range results {
		byRecord[res.Record] = res.Err
	}
	for i, rec := range out {
		if err := byRecord[rec]; err != nil {
			s.cfg.Logger.Warn("redelivery failed; will retry", "component", "redeliver",
				"id", recs[i].ID, "topic", rec.Topic, "err", err)
			failed = append(failed, recs[i].ID)
			continue
		}
		ok = append(ok, recs[i].ID)
	}
	return ok, failed
}

// target is the topic a record is redelivered to: the operator's override,
// else the topic policy's target topic, else its source topic.
func target(r *dlq.Record, t policy.Topic) string {
	if r.Redelivery != nil && r.Redelivery.Topic != "" {
		return r.Redelivery.Topic
	}
	if t.Redelivery.TargetTopic != "" {
		return t.Redelivery.TargetTopic
	}
	return r.Queue
}

// partition keeps the original partition when the policy asks for it and the
// record goes back to its source topic; -1 lets the key decide.
func partition(r *dlq.Record, t policy.Topic) int32 {
	if t.Redelivery.KeepPartition && r.Source.Partition >= 0 && target(r, t) == r.Source.Topic {
		return r.Source.Partition
	}
	return -1
}

// partitionFor honours a record's explicit partition and otherwise hashes the
// key as Kafka's default partitioner does (murmur2), so keyed records keep
// their per-key order; null keys spread evenly.
func partitionFor(string) func(*kgo.Record, int) int {
	var rr atomic.Uint32
	return func(r *kgo.Record, n int) int {
		switch {
		case r.Partition >= 0 && int(r.Partition) < n:
			return int(r.Partition)
		case r.Key == nil:
			return int(rr.Add(1) % uint32(n))
		}
		return int(murmur2(r.Key)&0x7fffffff) % n
	}
}

// archive copies one batch of discarded records to their archive topics.
func (s *Scheduler) archive(ctx context.Context, now time.Time) (int, error) {
	claim, err := s.store.ClaimArchive(ctx, s.cfg.BatchSize, s.cfg.Lease)
	if err != nil || len(claim.Records) == 0 {
		return 0, err
	}
	defer claim.Abort(ctx)
	out := make([]*kgo.Record, len(claim.Records))
	queues := make(map[string]string, len(claim.Records))
	for i := range claim.Records {
		r := &claim.Records[i]
		out[i] = envelope.Archive(r, s.cfg.ArchiveTopic(r.DLQ.Topic))
		queues[r.ID] = r.Queue
	}
	// Records whose copy failed stay unarchived and are claimed again later.
	ok, _ := s.produce(ctx, claim.Records, out)
	if err := claim.Archived(ctx, ok, now); err != nil {
		return 0, err
	}
	if err := claim.Commit(ctx); err != nil {
		return 0, err
	}
	for _, id := range ok {
		s.cfg.Metrics.Redelivery.Archived.WithLabelValues(queues[id]).Inc()
	}
	return len(ok), nil
}
