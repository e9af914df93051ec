package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/google/uuid"

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
	// SchedulerCPU and RawCPU are what each cost the server and the process.
	SchedulerCPU, RawCPU CPU
}

// RedeliverResult holds the redelivery figures of one run.
type RedeliverResult struct {
	Records int
	Runs    []RedeliverRun
	// River is River's burn-down of as many no-op jobs on the same server,
	// configured as River's own benchmark runs it; 0 when not measured.
	River time.Duration
	// RiverCPU is what the burn-down cost the server and River's process.
	RiverCPU CPU
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
	// The broker runs in a process of its own, as it does in a deployment,
	// so that its work and its garbage are not counted as the scheduler's,
	// and acknowledges produced records without storing them: on a real
	// deployment the broker's storage runs on its own machines, while here
	// it would take the CPU Postgres and the scheduler share. Produce
	// requests are still sent, decoded, sequenced and acknowledged.
	broker, brokerAddr, err := startBroker(ctx, []string{redeliverQueue}, "--discard-produced")
	if err != nil {
		return nil, err
	}
	defer broker.stop()
	brokerPID := broker.cmd.Process.Pid

	n := cfg.Records / 2 // each run updates every record; keep the whole suite short
	res := &RedeliverResult{Records: n}
	fmt.Fprintf(cfg.Out, "redelivery: %d due records, %d-byte values, batches of %d (the default)\n", n, cfg.ValueSize, redeliver.DefaultBatchSize)
	if err := loadDue(ctx, pool, n, cfg.ValueSize); err != nil {
		return nil, err
	}
	for _, workers := range []int{1, 2} {
		run := RedeliverRun{Workers: workers}
		if err := makeDueAgain(ctx, pool); err != nil {
			return nil, err
		}
		used := cpuMeter(ctx, pool, 0)
		if run.RawLoop, err = timeRawClaimLoop(ctx, pool, workers); err != nil {
			return nil, err
		}
		run.RawCPU = used()
		if err := makeDueAgain(ctx, pool); err != nil {
			return nil, err
		}
		used = cpuMeter(ctx, pool, brokerPID)
		if run.Scheduler, err = timeScheduler(ctx, pool, []string{brokerAddr}, n, workers); err != nil {
			return nil, err
		}
		run.SchedulerCPU = used()
		res.Runs = append(res.Runs, run)
		sched, raw := rate(n, run.Scheduler), rate(n, run.RawLoop)
		target := fmt.Sprintf("(target >= %.2f)", RedeliverTarget)
		if workers > 1 {
			target = "(informational)"
		}
		fmt.Fprintf(cfg.Out, "  %d worker(s): scheduler %8.0f records/s, raw claim+update %8.0f records/s, ratio %.2f %s\n",
			workers, sched, raw, sched/raw, target)
		fmt.Fprintf(cfg.Out, "    scheduler %s; raw loop %s\n", run.SchedulerCPU.per(n, "record"), run.RawCPU.per(n, "record"))
	}
	if cfg.RiverPeer == "" {
		fmt.Fprintln(cfg.Out, "  River: not measured (no --river-peer; make bench builds and passes it)")
		return res, nil
	}
	quiesce(ctx, pool)
	if res.River, res.RiverCPU, err = timeRiver(ctx, pool, cfg.RiverPeer, n); err != nil {
		return nil, err
	}
	river := rate(n, res.River)
	ours := res.Runs[defaultWorkers-1]
	fmt.Fprintf(cfg.Out, "  River %s, %d workers, 2 ms fetch cooldown: %8.0f jobs/s; Redrive (defaults: %d workers) / River %.2f (target >= %.2f)\n",
		riverVersion, riverWorkers, river, defaultWorkers, rate(n, ours.Scheduler)/river, RiverTarget)
	fmt.Fprintf(cfg.Out, "    River %s; River's CPU per job / Redrive's per record %.2f\n",
		res.RiverCPU.per(n, "job"), cpuRatio(res.RiverCPU, ours.SchedulerCPU))
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
// last job completed), and what the burn-down cost the server and River.
func timeRiver(ctx context.Context, pool *rawbench.DB, peer string, n int) (time.Duration, CPU, error) {
	dsn, drop, err := pool.Sibling(ctx)
	if err != nil {
		return 0, CPU{}, err
	}
	defer drop()
	cmd := exec.CommandContext(ctx, peer, "--database-url", dsn, "--jobs", strconv.Itoa(n), "--workers", strconv.Itoa(riverWorkers), "--ready")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, CPU{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, CPU{}, err
	}
	if err := cmd.Start(); err != nil {
		return 0, CPU{}, fmt.Errorf("run river peer %s: %w", peer, err)
	}
	defer func() { _ = cmd.Wait() }()
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
		return 0, CPU{}, fmt.Errorf("river peer: expected ready, got %q: %w", line, errors.Join(err, cmd.Wait()))
	}
	quiesce(ctx, pool) // the jobs' insert leaves dirty pages: flush them before the clock starts
	used := cpuMeter(ctx, pool, 0)
	if _, err := io.WriteString(stdin, "start\n"); err != nil {
		return 0, CPU{}, fmt.Errorf("river peer: start: %w", err)
	}
	line, err := out.ReadString('\n')
	cpu := used()
	var jobs int
	var seconds, perSecond, peerCPU float64
	if _, scanErr := fmt.Sscanf(line, "river %d jobs in %f s: %f jobs/s, cpu %f s", &jobs, &seconds, &perSecond, &peerCPU); err != nil || scanErr != nil || jobs != n {
		return 0, CPU{}, fmt.Errorf("river peer: unexpected output %q: %w", line, errors.Join(err, scanErr, cmd.Wait()))
	}
	// The server's share is what it used meanwhile; River's is its own
	// reading (this process's would count the bench, not River).
	cpu.Process = time.Duration(peerCPU * float64(time.Second))
	return time.Duration(seconds * float64(time.Second)), cpu, nil
}

// cpuRatio is a's CPU time over b's, 0 when either was not measured whole.
func cpuRatio(a, b CPU) float64 {
	if !a.ServerKnown || !b.ServerKnown || b.Total() == 0 {
		return 0
	}
	return float64(a.Total()) / float64(b.Total())
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

// rawClaimBatch is the raw claim loop's batch: the scheduler's default.
const rawClaimBatch = redeliver.DefaultBatchSize

// timeRawClaimLoop is the redelivery baseline (rawbench.DB.TimeRawClaimLoop).
func timeRawClaimLoop(ctx context.Context, pool *rawbench.DB, workers int) (time.Duration, error) {
	return pool.TimeRawClaimLoop(ctx, redeliverQueue, workers, rawClaimBatch)
}

// makeDueAgain resets the records for the next run and vacuums away the dead
// tuples of the previous one, so both runs start from the same table.
func makeDueAgain(ctx context.Context, pool *rawbench.DB) error {
	if _, err := pool.Exec(ctx, `UPDATE redrive_lifecycle SET state = 'retryable', attempt = 1, redelivered_at = NULL,
		completed_at = NULL, completed_by = NULL, claim_token = NULL, next_retry_at = now() - interval '1 minute'`); err != nil {
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
	s, err := redeliver.New(redeliver.Config{Brokers: brokers, Workers: workers, Logger: quiet,
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
