package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/redeliver"
	"github.com/redrive/redrive/internal/store/rawbench"
)

// Fairness sizes: the failing backlog, over how many missing topics, and
// the healthy records due beside it.
const (
	FairnessFailing      = 100_000
	FairnessFailingTopic = 1000
	FairnessHealthy      = 2_000
	// FairnessTarget is the most the healthy records may take, in seconds.
	FairnessTarget = 30
)

// FairnessResult is one run of the fairness suite.
type FairnessResult struct {
	// Healthy is how long the healthy topic's due records took to be
	// redelivered beside the failing backlog; Alone, without it (the
	// baseline of the same run).
	Healthy, Alone time.Duration
	// FailedRecords counts the failing records tried (produced, and failed)
	// meanwhile: with missing topics parked, a batch or two per topic, not
	// the backlog.
	FailedRecords int
}

// Figures are the healthy records' time beside the backlog, and its ratio to
// the time alone.
func (r *FairnessResult) Figures() []Figure {
	return []Figure{{Name: "fairness: healthy records beside a failing backlog / alone", Value: r.Alone.Seconds() / r.Healthy.Seconds()}}
}

// Fairness measures how long FairnessHealthy due records of a healthy topic
// take to be redelivered while FairnessFailing due records of topics that do
// not exist fail beside them, against the same records alone, with the
// scheduler's defaults.
func Fairness(ctx context.Context, cfg Config) (*FairnessResult, error) {
	cfg = cfg.withDefaults()
	pool, _, cleanup, err := scratchDB(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	// The missing topics must stay missing: no auto-creation.
	broker, addr, err := startBroker(ctx, []string{redeliverQueue}, "--discard-produced", "--auto-create-topics=false")
	if err != nil {
		return nil, err
	}
	defer broker.stop()
	fmt.Fprintf(cfg.Out, "fairness: %d due records of %s beside %d due records of %d topics that do not exist\n",
		FairnessHealthy, redeliverQueue, FairnessFailing, FairnessFailingTopic)
	res := &FairnessResult{}
	if err := loadQueues(ctx, pool, []string{redeliverQueue}, FairnessHealthy, cfg.ValueSize); err != nil {
		return nil, err
	}
	if res.Alone, _, err = timeHealthy(ctx, pool, addr); err != nil {
		return nil, err
	}
	if err := makeDueAgain(ctx, pool); err != nil {
		return nil, err
	}
	missing := make([]string, FairnessFailingTopic)
	for i := range missing {
		missing[i] = fmt.Sprintf("missing-%d", i)
	}
	if err := loadQueues(ctx, pool, missing, FairnessFailing/FairnessFailingTopic, cfg.ValueSize); err != nil {
		return nil, err
	}
	if res.Healthy, res.FailedRecords, err = timeHealthy(ctx, pool, addr); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Out, "  healthy alone %.1f s; beside the failing backlog %.1f s (target <= %d s); failing records tried meanwhile %d\n",
		res.Alone.Seconds(), res.Healthy.Seconds(), FairnessTarget, res.FailedRecords)
	return res, nil
}

// fairOffsets hands out the DLQ offsets of loadQueues' records.
var fairOffsets atomic.Int64

// loadQueues stores n retryable records due now of each queue, and analyzes
// the tables once.
func loadQueues(ctx context.Context, pool *rawbench.DB, queues []string, n, size int) error {
	st := pool.Store()
	past := time.Now().Add(-time.Minute)
	const chunk = 5000
	recs := make([]dlq.Record, 0, chunk)
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		_, err := st.InsertRecords(ctx, recs)
		recs = recs[:0]
		return err
	}
	for _, queue := range queues {
		for i := range n {
			off := fairOffsets.Add(1)
			recs = append(recs, dlq.Record{
				ID: uuid.Must(uuid.NewV7()).String(), Queue: queue, Type: "order.created",
				State: dlq.StateRetryable, Attempt: 1, MaxAttempts: 5,
				Source: dlq.Source{Topic: queue, Partition: int32(i % 3), Offset: int64(i)},
				DLQ:    dlq.Coord{Topic: benchTopic, Partition: 0, Offset: off},
				Format: dlq.FormatRedrive, Key: fmt.Appendf(nil, "order-%d", i), Value: distinctValue(int(off), size),
				Errors:    []dlq.ErrorEntry{{Attempt: 1, Type: "db.down", Code: dlq.CodeRetry, OccurredAt: past}},
				CreatedAt: past, UpdatedAt: past, NextRetryAt: &past,
			})
			if len(recs) == chunk {
				if err := flush(); err != nil {
					return fmt.Errorf("load %s: %w", queue, err)
				}
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, "ANALYZE redrive_record_data, redrive_lifecycle")
	return err
}

// timeHealthy runs the scheduler with its defaults until every record of
// the healthy queue is redelivered, and counts the failed produces of the
// others meanwhile.
func timeHealthy(ctx context.Context, pool *rawbench.DB, brokers string) (time.Duration, int, error) {
	m := metrics.New()
	s, err := redeliver.New(redeliver.Config{Brokers: []string{brokers}, Logger: quiet, Metrics: m}, pool.Store())
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if err := s.Start(ctx); err != nil {
		return 0, 0, err
	}
	defer func() { _ = s.Stop() }()
	redelivered := m.Redelivery.Redelivered.WithLabelValues(redeliverQueue)
	failed := func() int {
		var n int
		_ = pool.QueryRow(ctx, "SELECT count(*) FROM redrive_lifecycle WHERE redelivery_failure IS NOT NULL").Scan(&n)
		return n
	}
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		if int(counterValue(redelivered)) >= FairnessHealthy {
			return time.Since(start), failed(), nil
		}
		select {
		case <-s.Done():
			return 0, 0, fmt.Errorf("scheduler stopped: %w", s.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return 0, 0, fmt.Errorf("the healthy records were not redelivered within 5 minutes (%d of %d; %d failing produced)",
		int(counterValue(redelivered)), FairnessHealthy, failed())
}
