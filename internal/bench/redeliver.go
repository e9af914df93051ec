package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/redeliver"
	"github.com/redrive/redrive/internal/store/rawbench"
)

// redeliverQueue is the source topic the benchmark redelivers to.
const redeliverQueue = "orders"

// RedeliverRun is one scheduler-vs-raw comparison at a given concurrency.
type RedeliverRun struct {
	Workers   int
	Scheduler time.Duration // due → claimed → produced → marked, every record
	RawLoop   time.Duration // claim-and-update only, same table, same concurrency
}

// RedeliverResult holds the redelivery figures of one run.
type RedeliverResult struct {
	Records int
	Runs    []RedeliverRun
	// River is River's burn-down of as many no-op jobs on the same server,
	// configured as River's own benchmark runs it; 0 when not measured.
	River time.Duration
}

// Redeliver measures the scheduler's throughput (due records claimed, produced
// to their topic and marked) against a raw claim-and-update loop on the same
// table with the same concurrency, with one worker and with two, and prints them.
//
// The target compares single loops. With two workers on a two-core machine the
// raw loop is Postgres alone on both cores, while the scheduler shares them
// with Kafka and itself; the second line shows that cost.
func Redeliver(ctx context.Context, cfg Config) (*RedeliverResult, error) {
	cfg = cfg.withDefaults()
	pool, _, cleanup, err := scratchDB(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	// The broker acknowledges produced records without storing them: on a
	// real deployment the broker's storage runs on its own machines, while
	// here it would take the CPU Postgres and the scheduler share. Produce
	// requests are still sent, decoded, sequenced and acknowledged.
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, redeliverQueue), kfake.BlackholeProduce())
	if err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	defer cluster.Close()

	n := cfg.Records / 2 // each run updates every record; keep the whole suite short
	res := &RedeliverResult{Records: n}
	fmt.Fprintf(cfg.Out, "redelivery: %d due records, %d-byte values, batches of 500\n", n, cfg.ValueSize)
	if err := loadDue(ctx, pool, n, cfg.ValueSize); err != nil {
		return nil, err
	}
	for _, workers := range []int{1, 2} {
		run := RedeliverRun{Workers: workers}
		if err := makeDueAgain(ctx, pool); err != nil {
			return nil, err
		}
		if run.RawLoop, err = timeRawClaimLoop(ctx, pool, workers); err != nil {
			return nil, err
		}
		if err := makeDueAgain(ctx, pool); err != nil {
			return nil, err
		}
		if run.Scheduler, err = timeScheduler(ctx, pool, cluster.ListenAddrs(), n, workers); err != nil {
			return nil, err
		}
		res.Runs = append(res.Runs, run)
		sched, raw := rate(n, run.Scheduler), rate(n, run.RawLoop)
		target := fmt.Sprintf("(target >= %.2f)", RedeliverTarget)
		if workers > 1 {
			target = "(informational)"
		}
		fmt.Fprintf(cfg.Out, "  %d worker(s): scheduler %8.0f records/s, raw claim+update %8.0f records/s, ratio %.2f %s\n",
			workers, sched, raw, sched/raw, target)
	}
	if cfg.RiverPeer == "" {
		fmt.Fprintln(cfg.Out, "  River: not measured (no --river-peer; make bench builds and passes it)")
		return res, nil
	}
	quiesce(ctx, pool)
	if res.River, err = timeRiver(ctx, pool, cfg.RiverPeer, n); err != nil {
		return nil, err
	}
	river := rate(n, res.River)
	fmt.Fprintf(cfg.Out, "  River %s, %d workers, 2 ms fetch cooldown: %8.0f jobs/s; Redrive (defaults: %d workers) / River %.2f (target >= %.2f)\n",
		riverVersion, riverWorkers, river, defaultWorkers, rate(n, res.Runs[defaultWorkers-1].Scheduler)/river, RiverTarget)
	return res, nil
}

// River's benchmark configuration, which riverpeer runs.
const (
	riverVersion = "v0.51.1" // pinned in internal/bench/riverpeer/go.mod
	riverWorkers = 2000
	// defaultWorkers is the scheduler's default Workers (redeliver.Config),
	// the run compared with River.
	defaultWorkers = 2
)

// timeRiver runs River's burn-down of n jobs in a database of its own on
// the same server and returns how long it took, as riverpeer measured it
// (jobs inserted first, the clock running from the client's start until the
// last job completed).
func timeRiver(ctx context.Context, pool *rawbench.DB, peer string, n int) (time.Duration, error) {
	dsn, drop, err := pool.Sibling(ctx)
	if err != nil {
		return 0, err
	}
	defer drop()
	cmd := exec.CommandContext(ctx, peer, "--database-url", dsn, "--jobs", strconv.Itoa(n), "--workers", strconv.Itoa(riverWorkers))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("run river peer %s: %w", peer, err)
	}
	var jobs int
	var seconds, perSecond float64
	if _, err := fmt.Sscanf(string(out), "river %d jobs in %f s: %f jobs/s", &jobs, &seconds, &perSecond); err != nil || jobs != n {
		return 0, fmt.Errorf("river peer: unexpected output %q", out)
	}
	return time.Duration(seconds * float64(time.Second)), nil
}

// loadDue stores n retryable records that are due now.
func loadDue(ctx context.Context, pool *rawbench.DB, n, size int) error {
	st := pool.Store()
	past := time.Now().Add(-time.Minute)
	const chunk = 5000
	for done := 0; done < n; done += chunk {
		recs := make([]dlq.Record, min(chunk, n-done))
		for i := range recs {
			off := int64(done + i)
			recs[i] = dlq.Record{
				ID: uuid.Must(uuid.NewV7()).String(), Queue: redeliverQueue, Type: "order.created",
				State: dlq.StateRetryable, Attempt: 1, MaxAttempts: 5,
				Source: dlq.Source{Topic: redeliverQueue, Partition: int32(off % 3), Offset: off},
				DLQ:    dlq.Coord{Topic: benchTopic, Partition: 0, Offset: off},
				Format: dlq.FormatRedrive, Key: fmt.Appendf(nil, "order-%d", off), Value: distinctValue(int(off), size),
				Errors:    []dlq.ErrorEntry{{Attempt: 1, Type: "db.down", Code: dlq.CodeRetry, OccurredAt: past}},
				CreatedAt: past, UpdatedAt: past, NextRetryAt: &past,
			}
		}
		if _, err := st.InsertRecords(ctx, recs); err != nil {
			return err
		}
	}
	_, err := pool.Exec(ctx, "ANALYZE redrive_record_data, redrive_lifecycle")
	return err
}

// timeRawClaimLoop is the redelivery baseline (rawbench.DB.TimeRawClaimLoop).
func timeRawClaimLoop(ctx context.Context, pool *rawbench.DB, workers int) (time.Duration, error) {
	return pool.TimeRawClaimLoop(ctx, redeliverQueue, workers)
}

// makeDueAgain resets the records for the next run and vacuums away the dead
// tuples of the previous one, so both runs start from the same table.
func makeDueAgain(ctx context.Context, pool *rawbench.DB) error {
	if _, err := pool.Exec(ctx, `UPDATE redrive_lifecycle SET state = 'retryable', attempt = 1, redelivered_at = NULL,
		claim_token = NULL, next_retry_at = now() - interval '1 minute'`); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `DELETE FROM redrive_claim`); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE redrive_record_data, redrive_lifecycle"); err != nil {
		return err
	}
	quiesce(ctx, pool)
	return nil
}

// timeScheduler runs the scheduler until every record is redelivered.
func timeScheduler(ctx context.Context, pool *rawbench.DB, brokers []string, n, workers int) (time.Duration, error) {
	m := metrics.New()
	// Redeliveries of the previous run are still on the topic; it does not matter.
	s, err := redeliver.New(redeliver.Config{Brokers: brokers, Workers: workers, BatchSize: 500, Logger: quiet,
		Metrics: m, PollInterval: 10 * time.Millisecond}, pool.Store())
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := s.Start(ctx); err != nil {
		return 0, err
	}
	defer func() {
		if err := s.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: stopping:", err)
		}
	}()
	redelivered := m.Redelivery.Redelivered.WithLabelValues(redeliverQueue)
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		if int(counterValue(redelivered)) >= n {
			return time.Since(start), nil
		}
		select {
		case <-s.Done():
			return 0, fmt.Errorf("scheduler stopped: %w", s.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("scheduler did not finish within 10 minutes")
}
