package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redrive/redrive/internal/store/rawbench"
)

// MemoryResult is the resident memory of `redrive serve` in each phase.
type MemoryResult struct {
	Records    int
	IngestPeak int64 // bytes, while it ingests Records records
	RetryPeak  int64 // bytes, while one bulk task retries them all and the scheduler redelivers them
	Ingest     time.Duration
	Retry      time.Duration
	// IngestGC and RetryGC are what serve's garbage collector reported in
	// each phase (GODEBUG=gctrace=1): how much of the peak is live heap,
	// and how much the headroom GOGC allows above it.
	IngestGC, RetryGC GCStats
}

// GCStats sums up the gctrace lines of a phase.
type GCStats struct {
	Cycles int
	Live   int64 // the most heap marked live at the end of a cycle, bytes
	Goal   int64 // the highest heap goal, bytes: where the next cycle starts
}

// gcLine matches a gctrace line's heap sizes: "… 82->89->42 MB, 96 MB goal, …"
// (heap at the cycle's start, at its end, marked live; the runtime's MB are MiB).
var gcLine = regexp.MustCompile(`(?m)^gc \d+ @.* (\d+)->(\d+)->(\d+) MB, (\d+) MB goal`)

// gcStats sums up the gctrace lines in out.
func gcStats(out string) GCStats {
	var st GCStats
	for _, m := range gcLine.FindAllStringSubmatch(out, -1) {
		live, _ := strconv.ParseInt(m[3], 10, 64)
		goal, _ := strconv.ParseInt(m[4], 10, 64)
		st.Cycles++
		st.Live, st.Goal = max(st.Live, live<<20), max(st.Goal, goal<<20)
	}
	return st
}

// MemoryGoal is the resident memory serve should stay under in both phases.
const MemoryGoal = 150 << 20

// memoryPolicy keeps the ingested records waiting for an hour, so that the
// first phase is ingest alone and the second is the bulk retry's.
const memoryPolicy = `topics:
  orders:
    retry: {max_attempts: 5, initial_interval: PT1H, max_interval: PT1H, jitter: false}
`

// Memory runs `redrive serve` as a process of its own, with the broker in
// another, and samples its resident memory (VmRSS) while it ingests
// cfg.MemoryRecords records and while it retries all of them in one bulk
// task and redelivers them. The bench process only produces and waits, so
// what is measured is serve's alone.
func Memory(ctx context.Context, cfg Config) (*MemoryResult, error) {
	cfg = cfg.withDefaults()
	n := cfg.MemoryRecords
	pool, url, cleanup, err := scratchDB(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	broker, addr, err := startBroker(ctx, []string{benchTopic, "orders"})
	if err != nil {
		return nil, err
	}
	defer broker.stop()
	fmt.Fprintf(cfg.Out, "memory: redrive serve in its own process, broker in another, %d records of %d bytes\n", n, cfg.ValueSize)
	if err := produceFailures(ctx, []string{addr}, n, cfg.ValueSize); err != nil {
		return nil, fmt.Errorf("produce: %w", err)
	}
	// The runtime prints a line per garbage collection: the live heap and
	// the goal of each phase come from them.
	serve, api, err := startServe(ctx, addr, url, memoryPolicy, "GODEBUG="+strings.TrimPrefix(os.Getenv("GODEBUG")+",gctrace=1", ","))
	if err != nil {
		return nil, err
	}
	var logged int // serve's output before the phase
	gcOf := func() GCStats {
		out := serve.logs.String()
		defer func() { logged = len(out) }()
		return gcStats(out[logged:])
	}
	defer serve.stop()
	peak := &peakRSS{pid: serve.cmd.Process.Pid}
	stopSampling := peak.sample()
	defer stopSampling()

	res := &MemoryResult{Records: n}
	start := time.Now()
	if err := waitRows(ctx, pool, "SELECT count(*) = $1 FROM redrive_lifecycle", n); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	res.Ingest, res.IngestPeak, res.IngestGC = time.Since(start), peak.take(), gcOf()

	start = time.Now()
	body := `{"filter": {"queue": "orders"}, "confirm": true}`
	resp, err := http.Post(api+"/ojs/v1/dead-letter/retry", "application/json", strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("bulk retry: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return nil, fmt.Errorf("bulk retry: %s", resp.Status)
	}
	// Done when the task has made every record due and the scheduler has
	// redelivered them all: none is waiting any more.
	if err := waitRows(ctx, pool, `SELECT count(*) FILTER (WHERE redelivered_at IS NOT NULL AND next_retry_at IS NULL) = $1
		FROM redrive_lifecycle`, n); err != nil {
		return nil, fmt.Errorf("bulk retry: %w", err)
	}
	res.Retry, res.RetryPeak, res.RetryGC = time.Since(start), peak.take(), gcOf()

	verdict := func(b int64) string {
		if b < MemoryGoal {
			return "under"
		}
		return "OVER"
	}
	gc := func(st GCStats) string {
		return fmt.Sprintf("Go heap: live ≤ %d MiB, goal ≤ %d MiB, %d collections", st.Live>>20, st.Goal>>20, st.Cycles)
	}
	fmt.Fprintf(cfg.Out, "  ingest of %d records      peak RSS %4d MiB in %v (%s the %d MiB goal); %s\n",
		n, res.IngestPeak>>20, res.Ingest.Round(time.Second), verdict(res.IngestPeak), MemoryGoal>>20, gc(res.IngestGC))
	fmt.Fprintf(cfg.Out, "  bulk retry + redelivery   peak RSS %4d MiB in %v (%s the %d MiB goal); %s\n",
		res.RetryPeak>>20, res.Retry.Round(time.Second), verdict(res.RetryPeak), MemoryGoal>>20, gc(res.RetryGC))
	return res, nil
}

// startServe runs `redrive serve` on the broker and database, with auth off
// and the given policy file, and returns it with its API's base URL once ready.
func startServe(ctx context.Context, broker, dbURL, policy string, env ...string) (*process, string, error) {
	exe, err := self()
	if err != nil {
		return nil, "", err
	}
	dir, err := os.MkdirTemp("", "redrive-bench-policies")
	if err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "bench.yaml"), []byte(policy), 0o600); err != nil {
		return nil, "", err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	httpAddr := l.Addr().String()
	_ = l.Close()
	cmd := exec.CommandContext(ctx, exe, "serve")
	cmd.Env = append(os.Environ(),
		"REDRIVE_KAFKA_BROKERS="+broker, "REDRIVE_DLQ_TOPICS="+benchTopic, "REDRIVE_GROUP=redrive-bench",
		"REDRIVE_DATABASE_URL="+dbURL, "REDRIVE_HTTP_ADDR="+httpAddr, "REDRIVE_POLICIES_DIR="+dir,
		"REDRIVE_AUTH_DISABLED=true", "REDRIVE_LOG_LEVEL=warn")
	cmd.Env = append(cmd.Env, env...)
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start redrive serve: %w", err)
	}
	p := &process{cmd: cmd, done: make(chan struct{}), logs: logs}
	go func() { _ = cmd.Wait(); close(p.done); _ = os.RemoveAll(dir) }()
	api := "http://" + httpAddr
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return nil, "", fmt.Errorf("redrive serve exited: %s", logs.String())
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := http.Get(api + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, api, nil
			}
		}
	}
	p.stop()
	return nil, "", fmt.Errorf("redrive serve not ready within a minute")
}

// waitRows polls a query answering whether n rows are in the wanted state.
func waitRows(ctx context.Context, pool *rawbench.DB, query string, n int) error {
	deadline := time.Now().Add(30 * time.Minute)
	for time.Now().Before(deadline) {
		var done bool
		if err := pool.QueryRow(ctx, query, n).Scan(&done); err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("not done within 30 minutes")
}

// peakRSS samples a process's resident memory every 100 ms and keeps the peak.
type peakRSS struct {
	pid  int
	peak atomic.Int64
}

func (p *peakRSS) sample() (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if b, err := rss(p.pid); err == nil && b > p.peak.Load() {
				p.peak.Store(b)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done) }
}

// take returns the peak since the last take and starts a new one.
func (p *peakRSS) take() int64 { return p.peak.Swap(0) }
