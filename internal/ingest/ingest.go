// Package ingest consumes DLQ topics and persists every record in Postgres.
//
// Per batch: poll → decode → apply the retry policy → insert (idempotent on the
// DLQ coordinates) → commit offsets. Offsets are committed only after the rows
// are; a batch that cannot be written is retried, with backoff, until it is —
// ingest pauses rather than drops. It never decides anything about redelivery.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/store"
)

// ErrPaused is reported by Ready while ingest waits for Postgres.
var ErrPaused = errors.New("ingest paused: cannot write to Postgres")

// Ingester is a consumer-group member that stores DLQ records.
type Ingester struct {
	cfg    Config
	client *kgo.Client
	store  *store.Store
	paused atomic.Bool
}

// New creates an Ingester; Run starts consuming.
func New(cfg Config, st *store.Store) (*Ingester, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		// No rebalance between a poll and the commit of what it returned: a
		// partition is never revoked while its records are being persisted.
		kgo.BlockRebalanceOnPoll(),
	}, cfg.ClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("ingest: create kafka client: %w", err)
	}
	return &Ingester{cfg: cfg, client: cl, store: st}, nil
}

// Ready returns nil while ingest can write, ErrPaused while it waits for Postgres.
func (in *Ingester) Ready() error {
	if in.paused.Load() {
		return ErrPaused
	}
	return nil
}

// Client is the ingest consumer's Kafka client (for health checks).
func (in *Ingester) Client() *kgo.Client { return in.client }

// Run consumes until ctx is done, then leaves the group and closes the client.
// Records polled but not yet persisted when ctx ends are not committed, so the
// group delivers them again.
func (in *Ingester) Run(ctx context.Context) error {
	defer func() {
		// Leaving the group is a rebalance: unblock it, or Close waits forever.
		in.client.AllowRebalance()
		in.client.Close()
	}()
	log := in.cfg.Logger.With("component", "ingest")
	log.Info("ingest started", "topics", in.cfg.Topics, "group", in.cfg.Group)
	for {
		fetches := in.client.PollRecords(ctx, in.cfg.BatchSize)
		if ctx.Err() != nil {
			return nil
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			log.Warn("fetch error", "topic", topic, "partition", partition, "err", err)
		})
		if recs := fetches.Records(); len(recs) > 0 {
			if err := in.handleBatch(ctx, recs); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		in.client.AllowRebalance()
	}
}

func (in *Ingester) handleBatch(ctx context.Context, recs []*kgo.Record) error {
	start := time.Now()
	records := in.buildRecords(recs)
	inserted, err := in.persist(ctx, records)
	if err != nil {
		return err
	}
	if err := in.client.CommitRecords(ctx, recs...); err != nil {
		// Rows are stored; the batch will be consumed again and skipped as duplicates.
		in.cfg.Logger.Warn("commit offsets failed; the batch will be re-consumed and deduplicated",
			"component", "ingest", "err", err)
	}
	m := in.cfg.Metrics
	for i := range records {
		m.IngestRecords.WithLabelValues(records[i].DLQ.Topic, string(records[i].Format)).Inc()
	}
	if dup := len(records) - inserted; dup > 0 {
		m.IngestDuplicates.WithLabelValues(recs[0].Topic).Add(float64(dup))
	}
	m.IngestBatchRecords.Observe(float64(len(recs)))
	m.IngestBatchSeconds.Observe(time.Since(start).Seconds())
	return nil
}

// persist writes the batch, retrying with backoff until it succeeds or ctx ends.
func (in *Ingester) persist(ctx context.Context, records []dlq.Record) (int, error) {
	backoff := in.cfg.RetryBackoffMin
	for {
		n, err := in.store.InsertRecords(ctx, records)
		if err == nil {
			if in.paused.Swap(false) {
				in.cfg.Metrics.IngestPaused.Set(0)
				in.cfg.Logger.Info("ingest resumed: Postgres is writable again", "component", "ingest")
			}
			return n, nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		in.cfg.Metrics.IngestWriteErrors.Inc()
		if !in.paused.Swap(true) {
			in.cfg.Metrics.IngestPaused.Set(1)
		}
		in.cfg.Logger.Error("ingest paused: cannot persist batch; retrying, nothing is committed or dropped",
			"component", "ingest", "records", len(records), "retry_in", backoff, "err", err)
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, in.cfg.RetryBackoffMax)
	}
}

func randFloat() float64 { return rand.Float64() }
