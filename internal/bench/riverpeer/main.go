// Command riverpeer is the peer `redrive bench` compares redelivery with:
// River (riverqueue/river) burning down no-op jobs, configured as River's own
// benchmark (`river bench`) runs it — 2,000 workers on the default queue, a
// 2 ms fetch cooldown and a 20 ms fetch poll interval — on the Postgres it is
// given. It inserts the jobs first (InsertMany), then starts the client and
// times until every job has completed, and prints one line:
//
//	river <jobs> jobs in <seconds> s: <rate> jobs/s, cpu <seconds> s
//
// where cpu is the CPU time the process used while it timed. With --ready it
// prints "ready" once the jobs are inserted and starts the clock when a line
// arrives on its standard input, so that the caller can measure what the
// burn-down alone cost the server.
//
// It is its own Go module so that River stays a bench-only dependency of
// Redrive, pinned in this directory's go.mod.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs is the benchmark's job: it does nothing, so what is measured is
// River's own cost per job (fetch, run, complete).
type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct{ river.WorkerDefaults[noopArgs] }

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

func main() {
	url := flag.String("database-url", "", "Postgres database to use (River's tables are created in it)")
	jobs := flag.Int("jobs", 100_000, "jobs to insert and burn down")
	workers := flag.Int("workers", 2_000, "MaxWorkers of the default queue (River's benchmark: 2,000)")
	ready := flag.Bool("ready", false, `print "ready" once the jobs are inserted and wait for a line on stdin before starting`)
	flag.Parse()
	if err := run(context.Background(), *url, *jobs, *workers, *ready); err != nil {
		fmt.Fprintln(os.Stderr, "riverpeer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, url string, jobs, workers int, ready bool) error {
	if url == "" {
		return errors.New("--database-url is required")
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate river: %w", err)
	}

	ws := river.NewWorkers()
	river.AddWorker(ws, noopWorker{})
	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:           ws,
	})
	if err != nil {
		return err
	}
	if err := insert(ctx, client, jobs); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE river_job"); err != nil {
		return err
	}

	// A buffer for every job: a full subscription channel drops events.
	completed, cancel := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: jobs, Kinds: []river.EventKind{river.EventKindJobCompleted}})
	defer cancel()
	if ready {
		fmt.Println("ready")
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return fmt.Errorf("wait for the start: %w", err)
		}
	}
	start, cpu0 := time.Now(), processCPU()
	if err := client.Start(ctx); err != nil {
		return err
	}
	deadline := time.After(10 * time.Minute)
	for done := 0; done < jobs; {
		select {
		case <-completed:
			done++
		case <-deadline:
			return fmt.Errorf("only %d of %d jobs completed in 10 minutes", done, jobs)
		}
	}
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	stopCtx, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	if err := client.Stop(stopCtx); err != nil {
		return err
	}
	fmt.Printf("river %d jobs in %.3f s: %.0f jobs/s, cpu %.3f s\n", jobs, elapsed.Seconds(), float64(jobs)/elapsed.Seconds(), cpu.Seconds())
	return nil
}

// insert inserts the jobs before the clock starts, in batches as River's
// benchmark does.
func insert(ctx context.Context, client *river.Client[pgx.Tx], jobs int) error {
	const batch = 2_000
	params := make([]river.InsertManyParams, 0, batch)
	for done := 0; done < jobs; done += len(params) {
		params = params[:0]
		for range min(batch, jobs-done) {
			params = append(params, river.InsertManyParams{Args: noopArgs{}})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return fmt.Errorf("insert jobs: %w", err)
		}
	}
	return nil
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
