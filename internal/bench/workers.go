package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/httpapi"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/queue"
	"github.com/redrive/redrive/internal/records"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/store/rawbench"
)

// workersQueue is the queue the workers suite publishes its jobs to and its
// worker loops fetch from.
const workersQueue = "work"

// workersPoolConns is the pool the API serves from: serve's (app's
// minPoolConns), not pgxpool's default of max(4, CPUs).
const workersPoolConns = 20

// WorkerSetup is how the suite's workers fetch: Loops worker processes at
// once, each fetching up to Count jobs (its concurrency: OJS worker protocol
// §8.1, default 10), working them at once (no-ops) and acking each, then
// fetching again.
type WorkerSetup struct{ Loops, Count int }

func (w WorkerSetup) String() string { return fmt.Sprintf("%d×%d", w.Loops, w.Count) }

// workerSetups are the setups the suite measures: two workers of the
// protocol's default concurrency, eight of them, and four fetching as many
// jobs as a fetch may (count <= 100), the one compared with River (run as
// River benchmarks itself, for throughput).
var workerSetups = []WorkerSetup{{Loops: 2, Count: 10}, {Loops: 8, Count: 10}, {Loops: 4, Count: 100}}

// WorkersRun is one setup's burn-down over HTTP and the raw loop of the
// same concurrency and batch.
type WorkersRun struct {
	Setup WorkerSetup
	// API is every job fetched and acked over HTTP; Raw the raw claim
	// loop's burn-down of as many due records, Setup.Loops at once,
	// Setup.Count at a time.
	API, Raw time.Duration
	// APICPU is what the API run cost the server and this process (the
	// API and the worker loops, which are the HTTP clients); RawCPU the
	// raw loop's.
	APICPU, RawCPU CPU
}

// WorkersResult holds the workers suite's figures of one run.
type WorkersResult struct {
	Jobs int
	Runs []WorkersRun
	// River is River's burn-down of as many no-op jobs on the same server
	// (timeRiver); 0 when not measured.
	River    time.Duration
	RiverCPU CPU
}

// compared is the run River is compared with: the last setup's.
func (r *WorkersResult) compared() WorkersRun { return r.Runs[len(r.Runs)-1] }

// Figures are each setup's rate over the raw loop's, and the compared
// setup's rate over River's and its CPU per job over River's: informational.
func (r *WorkersResult) Figures() []Figure {
	out := make([]Figure, 0, len(r.Runs)+2)
	for _, run := range r.Runs {
		out = append(out, Figure{Name: fmt.Sprintf("workers API %s / raw claim loop", run.Setup),
			Value: rate(r.Jobs, run.API) / rate(r.Jobs, run.Raw)})
	}
	if r.River > 0 {
		ours := r.compared()
		out = append(out, Figure{Name: fmt.Sprintf("workers API %s / River burn-down", ours.Setup),
			Value: rate(r.Jobs, ours.API) / rate(r.Jobs, r.River)})
		// Redrive's over River's, where the other way round would read
		// 0.03: two decimals would hide its changes.
		if c := cpuRatio(ours.APICPU, r.RiverCPU); c > 0 {
			out = append(out, Figure{Name: fmt.Sprintf("workers CPU/job, Redrive %s / River", ours.Setup), Value: c})
		}
	}
	return out
}

// Workers measures the OJS worker API (docs/api.md#workers): n jobs are
// published to a queue through the store (publishing is not measured), the
// HTTP API serves in process on a loopback socket (auth off, serve's pool),
// and for each setup, Loops worker loops over net/http fetch Count jobs
// (POST /ojs/v1/workers/fetch with a worker_id), ack each (POST
// /ojs/v1/workers/ack, a job's acks sent at once, as a worker of that
// concurrency does) and fetch again, until a fetch comes back empty. Each
// setup starts from the same table: every job due again, vacuumed.
//
// The raw baseline is the redelivery suite's claim-and-update loop
// (rawbench.DB.TimeRawClaimLoop) on as many due records of the same table,
// with the setup's concurrency and batch: what Postgres alone takes to
// claim and complete the same number of rows the same number at a time.
// River's burn-down of n no-op jobs on the same server is the peer
// (timeRiver), compared with the last setup.
func Workers(ctx context.Context, cfg Config) (*WorkersResult, error) {
	cfg = cfg.withDefaults()
	n := max(cfg.Records/20, 1) // every job is an ack request and a share of a fetch: keep the suite short
	pool, dsn, cleanup, err := scratchDB(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	st, err := store.Open(ctx, dsn, store.OpenOptions{MinMaxConns: workersPoolConns})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	rec, err := records.New(records.Config{Store: st, Queues: queue.New(func() *policy.Set { return nil }, st, quiet), Logger: quiet})
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Records: rec, AuthDisabled: true, Logger: quiet}))
	defer srv.Close()

	res := &WorkersResult{Jobs: n}
	fmt.Fprintf(cfg.Out, "workers: %d no-op jobs fetched and acked over HTTP (loopback, auth off); setups: worker loops × fetch count;\n"+
		"  the process's CPU is the API's and its worker loops' (the HTTP clients)\n", n)
	t0 := time.Now()
	if err := publishNoopJobs(ctx, st, n); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Out, "  published in %v (store.InsertJobs, batches of 1000; not measured)\n", time.Since(t0).Round(time.Millisecond))
	// The raw loop's rows: due records of the redelivery suite's queue,
	// with small values.
	if err := loadDue(ctx, pool, n, workersRawValueSize); err != nil {
		return nil, err
	}
	for _, setup := range workerSetups {
		run := WorkersRun{Setup: setup}
		if err := makeJobsDueAgain(ctx, pool); err != nil {
			return nil, err
		}
		used := cpuMeter(ctx, pool, 0)
		if run.API, err = timeWorkerLoops(ctx, srv.URL, setup, n); err != nil {
			return nil, fmt.Errorf("workers %s: %w", setup, err)
		}
		run.APICPU = used()
		if err := checkAllAcked(ctx, pool, n); err != nil {
			return nil, fmt.Errorf("workers %s: %w", setup, err)
		}
		if err := makeJobsDueAgain(ctx, pool); err != nil {
			return nil, err
		}
		used = cpuMeter(ctx, pool, 0)
		if run.Raw, err = pool.TimeRawClaimLoop(ctx, redeliverQueue, setup.Loops, setup.Count); err != nil {
			return nil, err
		}
		run.RawCPU = used()
		res.Runs = append(res.Runs, run)
		api, raw := rate(n, run.API), rate(n, run.Raw)
		fmt.Fprintf(cfg.Out, "  %-5s fetch+ack over HTTP %7.0f jobs/s; raw claim+update %7.0f rows/s; ratio %.2f (informational)\n",
			setup, api, raw, api/raw)
		fmt.Fprintf(cfg.Out, "        API %s; raw loop %s\n", run.APICPU.per(n, "job"), run.RawCPU.per(n, "row"))
	}
	if cfg.RiverPeer == "" {
		fmt.Fprintln(cfg.Out, "  River: not measured (no --river-peer; make bench builds and passes it)")
		return res, nil
	}
	quiesce(ctx, pool)
	if res.River, res.RiverCPU, err = timeRiver(ctx, pool, cfg.RiverPeer, n); err != nil {
		return nil, err
	}
	river, ours := rate(n, res.River), res.compared()
	fmt.Fprintf(cfg.Out, "  River %s, %d workers, 2 ms fetch cooldown: %7.0f jobs/s; Redrive's workers API (%s) / River %.2f (informational)\n",
		riverVersion, riverWorkers, river, ours.Setup, rate(n, ours.API)/river)
	fmt.Fprintf(cfg.Out, "    River %s; Redrive's CPU per job (%s) / River's %.1f\n", res.RiverCPU.per(n, "job"), ours.Setup, cpuRatio(ours.APICPU, res.RiverCPU))
	return res, nil
}

// noopArgs are the jobs' args: nothing to work on, as River's no-op jobs.
var noopArgs = []byte("[]")

// workersRawValueSize is the size of the raw loop's records' values: small,
// as the jobs are (the redelivery suite's are 1 KB).
const workersRawValueSize = 32

// publishNoopJobs stores n no-op jobs due for a fetch now, through the store
// as a batch publish does, two batches at a time.
func publishNoopJobs(ctx context.Context, st *store.Store, n int) error {
	retry := policy.Default()
	rawRetry, err := json.Marshal(retry)
	if err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	const batch = 1000
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(2)
	for done := 0; done < n; done += batch {
		jobs := make([]store.NewJob, min(batch, n-done))
		for i := range jobs {
			r := &dlq.Record{ID: dlq.NewID(now), Queue: workersQueue, Type: "noop", State: dlq.StateAvailable,
				MaxAttempts: retry.MaxAttempts, Format: dlq.FormatOJS,
				Source: dlq.Source{Topic: workersQueue, Partition: -1, Offset: -1},
				Value:  noopArgs, Errors: []dlq.ErrorEntry{}, Retry: rawRetry, Meta: json.RawMessage(`{}`),
				CreatedAt: now, EnqueuedAt: &now, UpdatedAt: now}
			jobs[i] = store.NewJob{Record: r, FetchAt: now}
		}
		g.Go(func() error {
			if _, err := st.InsertJobs(gctx, jobs, now); err != nil {
				return fmt.Errorf("publish jobs: %w", err)
			}
			return nil
		})
	}
	return g.Wait()
}

// makeJobsDueAgain makes every job due for a fetch as published (at its
// enqueued_at), and every record of the raw loop due, and vacuums away the
// previous run's dead tuples, so that each run starts from the same table.
func makeJobsDueAgain(ctx context.Context, pool *rawbench.DB) error {
	if _, err := pool.Exec(ctx, `UPDATE redrive_lifecycle SET state = 'available', attempt = 0, fetch_at = enqueued_at,
		lease_until = NULL, lease_ms = NULL, deadline_at = NULL, worker_id = NULL, result = NULL, completed_at = NULL,
		completed_by = NULL, redelivered_at = NULL WHERE format = 'ojs'`); err != nil {
		return fmt.Errorf("make jobs due again: %w", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE redrive_lifecycle SET state = 'retryable', attempt = 1, redelivered_at = NULL,
		completed_at = NULL, completed_by = NULL, claim_token = NULL, next_retry_at = now() - interval '1 minute'
		WHERE format <> 'ojs'`); err != nil {
		return fmt.Errorf("make records due again: %w", err)
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE redrive_record_data, redrive_lifecycle"); err != nil {
		return err
	}
	quiesce(ctx, pool)
	return nil
}

// checkAllAcked fails unless the n jobs are completed by an ack.
func checkAllAcked(ctx context.Context, pool *rawbench.DB, n int) error {
	var acked int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM redrive_lifecycle WHERE format = 'ojs' AND state = 'completed'
		AND completed_by = 'ack'`).Scan(&acked); err != nil {
		return fmt.Errorf("count acked jobs: %w", err)
	}
	if acked != n {
		return fmt.Errorf("%d of %d jobs completed by an ack", acked, n)
	}
	return nil
}

// timeWorkerLoops runs setup's worker loops against the API at base until
// a fetch comes back empty, and returns how long they took; n jobs must
// have been acked.
func timeWorkerLoops(ctx context.Context, base string, setup WorkerSetup, n int) (time.Duration, error) {
	// One connection kept for each request a loop can have in flight, as a
	// worker's client keeps them (net/http's default keeps 2 a host).
	conns := setup.Loops * setup.Count
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns}}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var acked atomic.Int64
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for i := range setup.Loops {
		w := &workerLoop{client: client, base: base, id: fmt.Sprintf("bench-worker-%d", i), count: setup.Count, acked: &acked}
		g.Go(func() error { return w.run(gctx) })
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	elapsed := time.Since(start)
	if got := int(acked.Load()); got != n {
		return 0, fmt.Errorf("%d jobs acked, want %d", got, n)
	}
	return elapsed, nil
}

// workerLoop is one worker: it fetches up to count jobs, acks them all at
// once (its no-op jobs done), and fetches again until nothing is left.
type workerLoop struct {
	client *http.Client
	base   string
	id     string
	count  int
	acked  *atomic.Int64
}

type fetchedJobs struct {
	Jobs []struct {
		ID string `json:"id"`
	} `json:"jobs"`
}

func (w *workerLoop) run(ctx context.Context) error {
	fetch, err := json.Marshal(map[string]any{"queues": []string{workersQueue}, "worker_id": w.id, "count": w.count})
	if err != nil {
		return err
	}
	for {
		var got fetchedJobs
		if err := w.post(ctx, "/ojs/v1/workers/fetch", fetch, &got); err != nil {
			return err
		}
		if len(got.Jobs) == 0 {
			return nil
		}
		var wg sync.WaitGroup
		errs := make([]error, len(got.Jobs))
		for i, j := range got.Jobs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body, err := json.Marshal(map[string]string{"job_id": j.ID, "worker_id": w.id})
				if err == nil {
					err = w.post(ctx, "/ojs/v1/workers/ack", body, nil)
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		w.acked.Add(int64(len(got.Jobs)))
	}
}

// post sends body to path and decodes a 200's answer into out (nil: read and
// dropped, so the connection is kept).
func (w *workerLoop) post(ctx context.Context, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", httpapi.MediaTypeOJS)
	resp, err := w.client.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("POST %s: read answer: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, got)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(got, out); err != nil {
		return fmt.Errorf("POST %s: decode answer: %w", path, err)
	}
	return nil
}
