package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/ingest"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/store/rawbench"
)

// PruneRecords is how many expired dead letters the prune suite loads.
const PruneRecords = 1_000_000

// pruneValueSize keeps the loaded table at a size a laptop loads in a minute.
const pruneValueSize = 256

// PruneResult holds the pruning figures of one run.
type PruneResult struct {
	Pruned        int64
	PruneTime     time.Duration
	IngestAlone   float64 // records/s with nothing else running
	IngestPruning float64 // records/s while the pruner runs
	IngestOverlap float64 // fraction of the ingest run during which pruning ran
}

// Prune loads PruneRecords expired dead letters (COPY), then measures ingest
// throughput alone, then prunes them all (max_age, batches of 1000) while a
// second ingest runs, and prints the pruning throughput and the ingest
// throughput during pruning against the one without.
func Prune(ctx context.Context, cfg Config) (*PruneResult, error) {
	cfg = cfg.withDefaults()
	pool, _, cleanup, err := scratchDB(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	const topicA, topicB = "dead_letter_queue_a", "dead_letter_queue_b"
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topicA, topicB))
	if err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	n := min(cfg.Records, 200_000)
	fmt.Fprintf(cfg.Out, "prune: %d expired dead letters (%d-byte values), ingest of %d records (%d-byte values) alongside\n",
		PruneRecords, pruneValueSize, n, cfg.ValueSize)

	now := time.Now()
	start := time.Now()
	if err := loadDeadLetters(ctx, pool, PruneRecords, now.Add(-200*24*time.Hour)); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Out, "  loaded by COPY in %v\n", time.Since(start).Round(time.Millisecond))
	for _, topic := range []string{topicA, topicB} {
		if err := produceFailuresTo(ctx, brokers, topic, n, cfg.ValueSize); err != nil {
			return nil, err
		}
	}

	res := &PruneResult{}
	// Ingest alone.
	d, count, err := timeIngestTopic(ctx, pool, brokers, topicA, n, nil)
	if err != nil {
		return nil, err
	}
	res.IngestAlone = rate(count, d)

	// Prune everything while the second ingest runs.
	st := pool.Store()
	pr, err := maintenance.NewPruner(maintenance.PrunerConfig{Deps: maintenance.Deps{Store: st, Logger: quiet}})
	if err != nil {
		return nil, err
	}
	pruneStart := make(chan time.Time, 1)
	pruneEnd := make(chan time.Time, 1)
	pruneDone := make(chan error, 1)
	startPrune := func() {
		go func() {
			t := time.Now()
			pruneStart <- t
			r, err := pr.RunOnce(ctx)
			pruneEnd <- time.Now()
			if err == nil {
				res.Pruned = r.Total()
				res.PruneTime = time.Since(t)
			}
			pruneDone <- err
		}()
	}
	d, count, err = timeIngestTopic(ctx, pool, brokers, topicB, n, startPrune)
	if err != nil {
		return nil, err
	}
	ingestEnd := time.Now()
	ingestStart := ingestEnd.Add(-d)
	res.IngestPruning = rate(count, d)
	if err := <-pruneDone; err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	ps, pe := <-pruneStart, <-pruneEnd
	if ingestEnd.Before(pe) {
		pe = ingestEnd
	}
	if ingestStart.After(ps) {
		ps = ingestStart
	}
	overlap := pe.Sub(ps)
	res.IngestOverlap = max(0, overlap.Seconds()/d.Seconds())
	var left int64
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM redrive_record WHERE state = 'discarded'").Scan(&left); err != nil {
		return nil, err
	}
	if res.Pruned != PruneRecords || left != 0 {
		return nil, fmt.Errorf("pruned %d of %d, %d left", res.Pruned, PruneRecords, left)
	}
	fmt.Fprintf(cfg.Out, "  pruning             %9.0f rows/s     (%d rows in %v, batches of 1000, ingest running)\n",
		rate(int(res.Pruned), res.PruneTime), res.Pruned, res.PruneTime.Round(time.Millisecond))
	fmt.Fprintf(cfg.Out, "  ingest alone        %9.0f records/s\n", res.IngestAlone)
	fmt.Fprintf(cfg.Out, "  ingest, pruning     %9.0f records/s  (%.0f%% of the ingest run overlapped pruning)\n",
		res.IngestPruning, 100*res.IngestOverlap)
	fmt.Fprintf(cfg.Out, "  ratio               %9.2f\n", res.IngestPruning/res.IngestAlone)
	return res, nil
}

// loadDeadLetters COPYs n dead letters discarded at `at` over four queues.
func loadDeadLetters(ctx context.Context, pool *rawbench.DB, n int, at time.Time) error {
	st := pool.Store()
	const chunk = 20_000
	value := distinctValue(0, pruneValueSize)
	for off := 0; off < n; off += chunk {
		recs := make([]dlq.Record, min(chunk, n-off))
		for i := range recs {
			k := off + i
			disc := at.Add(time.Duration(k) * time.Millisecond)
			recs[i] = dlq.Record{
				ID: uuid.Must(uuid.NewV7()).String(), Queue: fmt.Sprintf("orders-%d", k%4), Type: "order.created",
				State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDeadLetter, Attempt: 3, MaxAttempts: 3,
				Source: dlq.Source{Topic: "orders", Partition: int32(k % 12), Offset: int64(k)},
				DLQ:    dlq.Coord{Topic: "dead_letter_queue_old", Partition: int32(k % 3), Offset: int64(k)},
				Format: dlq.FormatRedrive, Key: fmt.Appendf(nil, "order-%d", k), Value: value,
				Errors: []dlq.ErrorEntry{{Attempt: 3, Type: "db.connection_refused", Message: "connection refused", Code: dlq.CodeRetry, OccurredAt: disc}},
				Retry:  []byte(`{}`), Meta: []byte(`{}`), CreatedAt: disc, UpdatedAt: disc, DiscardedAt: &disc,
			}
		}
		if _, err := st.InsertRecords(ctx, recs); err != nil {
			return fmt.Errorf("load dead letters: %w", err)
		}
	}
	_, err := pool.Exec(ctx, "VACUUM ANALYZE redrive_record_data, redrive_lifecycle")
	return err
}

// produceFailuresTo fills topic with n native envelopes of distinct values.
func produceFailuresTo(ctx context.Context, brokers []string, topic string, n, size int) error {
	return produceAll(ctx, brokers, n, func(i int) (*kgo.Record, error) {
		src := &kgo.Record{Topic: "orders", Partition: int32(i % 12), Offset: int64(i), Key: fmt.Appendf(nil, "order-%d", i),
			Value: distinctValue(i, size), Timestamp: time.Now()}
		return envelope.Encode(src, envelope.FailureInfo{DLQTopic: topic, Group: "billing", Type: "order.created",
			ErrorType: "db.connection_refused", Message: "dial tcp 10.0.0.5:5432: connection refused"}), nil
	})
}

// timeIngestTopic runs an ingester on topic until n records are stored and
// returns the steady-state time and count: the clock starts at the first
// committed batch, so the consumer group join is not counted. onStart, if
// set, is called then.
func timeIngestTopic(ctx context.Context, pool *rawbench.DB, brokers []string, topic string, n int, onStart func()) (time.Duration, int, error) {
	return timeIngestTopicWith(ctx, pool, brokers, topic, n, onStart, nil)
}

// ingestGroups numbers the consumer groups of timed ingests.
var ingestGroups atomic.Int64

// timeIngestTopicWith is timeIngestTopic with a change to the ingest config.
func timeIngestTopicWith(ctx context.Context, pool *rawbench.DB, brokers []string, topic string, n int, onStart func(),
	mod func(*ingest.Config)) (time.Duration, int, error) {
	m := metrics.New()
	// A group of its own: every call reads the topic from its start.
	group := fmt.Sprintf("bench-%s-%d", topic, ingestGroups.Add(1))
	cfg := ingest.Config{Brokers: brokers, Topics: []string{topic}, Group: group,
		BatchSize: ingestBatch, Logger: quiet, Metrics: m,
		ClientOpts: []kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond)}}
	if mod != nil {
		mod(&cfg)
	}
	in, err := ingest.New(cfg, pool.Store())
	if err != nil {
		return 0, 0, err
	}
	// As testing.B does before each benchmark: the garbage of what ran
	// before (producing the topic, an earlier suite) is not this run's to
	// collect.
	runtime.GC()
	if err := in.Start(ctx); err != nil {
		return 0, 0, err
	}
	defer func() {
		if err := in.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: stopping ingest:", err)
		}
	}()

	stored := m.IngestRecords.WithLabelValues(topic, string(dlq.FormatRedrive))
	var start time.Time
	var first int
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		got := int(counterValue(stored))
		if got > 0 && start.IsZero() {
			start, first = time.Now(), got
			if onStart != nil {
				onStart()
			}
		}
		if got >= n {
			return time.Since(start), n - first, nil
		}
		select {
		case <-in.Done():
			return 0, 0, fmt.Errorf("ingest stopped: %w", in.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
	return 0, 0, fmt.Errorf("ingest did not finish within 10 minutes")
}
