package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/fingerprint"
	"github.com/redrive/redrive/internal/httpapi"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/queue"
	"github.com/redrive/redrive/internal/records"
	"github.com/redrive/redrive/internal/store"
)

// APIRecords is how many records the api suite stores before measuring,
// unless Config.APIRecords says otherwise.
const APIRecords = 1_000_000

// Targets of the api suite (p99, ms).
const (
	apiListTarget  = 50 * time.Millisecond
	apiStatsTarget = 20 * time.Millisecond
	apiPathTarget  = 200 * time.Millisecond
	// apiIncidentsTarget: listing incidents at a million records.
	apiIncidentsTarget = 50 * time.Millisecond
)

// apiSamples is how many timed requests each query gets (after a warm-up).
const apiSamples = 200

// apiStatSamples is how many the statistics reads (stats, incidents) get:
// they take about a millisecond, where the p99 of 200 requests is two
// scheduling hiccups; their growth ratio needs a p99 that says more.
const apiStatSamples = 1000

// APIResult holds the latencies of one run.
type APIResult struct {
	// Records is how many records were stored.
	Records                            int
	Load                               time.Duration
	List, Stats, PathSearch, Incidents map[string]Latency
	// IngestRate is the pipeline's rate into the loaded table (records/s),
	// EmptyIngestRate the same run's rate into an empty one.
	IngestRate, EmptyIngestRate float64
	// Pruned records older than apiPruneAge, in PruneTime.
	Pruned    int64
	PruneTime time.Duration
}

// Latency is a p50/p99 pair.
type Latency struct{ P50, P99 time.Duration }

// API stores each of Config.APIRecords' sizes of records in turn (COPY, then
// ANALYZE) and measures the HTTP API in process (no network, auth off):
// filtered lists, stats and payload JSON-path searches, printing p50/p99
// against the targets; then ingest through the real pipeline into that table
// against an empty one (measured first, in the same run), and one pruning
// pass over the records older than apiPruneAge. Given more than one size, it
// then prints each query's p99 at every size and its growth from the first
// size to the last.
func API(ctx context.Context, cfg Config) error {
	cfg = cfg.withDefaults()
	empty, err := emptyIngestRate(ctx, cfg)
	if err != nil {
		return fmt.Errorf("ingest into an empty table: %w", err)
	}
	fmt.Fprintf(cfg.Out, "api: ingest of %d records into an empty table: %.0f records/s\n", apiIngestRecords, empty)
	var runs []*APIResult
	for _, n := range cfg.APIRecords {
		c := cfg
		c.APIRecords = []int{n}
		res, err := RunAPI(ctx, c)
		if err != nil {
			return fmt.Errorf("%d records: %w", n, err)
		}
		res.EmptyIngestRate = empty
		printIngestAndPrune(cfg.Out, res)
		runs = append(runs, res)
	}
	if len(runs) > 1 {
		printAPIGrowth(cfg.Out, runs)
	}
	return nil
}

// apiGrowthTarget bounds p99(largest) / p99(smallest) for the queries that
// read statistics tables (stats, incidents): they must not grow with the
// number of records.
const apiGrowthTarget = 1.5

// printAPIGrowth prints each query's p50 and p99 at every size measured, and
// the ratio of the last size's p99 to the first's.
func printAPIGrowth(out io.Writer, runs []*APIResult) {
	first, last := runs[0], runs[len(runs)-1]
	fmt.Fprintf(out, "api growth, p50 / p99 at each size (ratio: p99 at %d records over p99 at %d)\n", last.Records, first.Records)
	fmt.Fprintf(out, "  %-35s", "query")
	for _, r := range runs {
		fmt.Fprintf(out, " %19s", countLabel(r.Records))
	}
	fmt.Fprintf(out, " %7s\n", "ratio")
	fmt.Fprintf(out, "  %-35s", "load (COPY, indexes, triggers)")
	for _, r := range runs {
		fmt.Fprintf(out, " %18.0fs", r.Load.Seconds())
	}
	fmt.Fprintf(out, " %7.2f\n", last.Load.Seconds()/first.Load.Seconds())
	fmt.Fprintf(out, "  %-35s", "ingest, records/s (÷ empty table)")
	for _, r := range runs {
		fmt.Fprintf(out, " %11.0f (%5.2f)", r.IngestRate, r.IngestRate/r.EmptyIngestRate)
	}
	fmt.Fprintf(out, " %7.2f\n", last.IngestRate/first.IngestRate)
	fmt.Fprintf(out, "  %-35s", "prune older than 72 days, s")
	for _, r := range runs {
		fmt.Fprintf(out, " %9.1fs (%6s)", r.PruneTime.Seconds(), countLabel(int(r.Pruned)))
	}
	fmt.Fprintf(out, " %7.2f\n", last.PruneTime.Seconds()/first.PruneTime.Seconds())
	groups := []struct {
		name   string
		of     func(*APIResult) map[string]Latency
		target float64 // 0: informational
	}{
		{"list", func(r *APIResult) map[string]Latency { return r.List }, 0},
		{"stats", func(r *APIResult) map[string]Latency { return r.Stats }, apiGrowthTarget},
		{"incid.", func(r *APIResult) map[string]Latency { return r.Incidents }, apiGrowthTarget},
		{"path", func(r *APIResult) map[string]Latency { return r.PathSearch }, 0},
	}
	for _, g := range groups {
		for _, name := range slices.Sorted(maps.Keys(g.of(first))) {
			fmt.Fprintf(out, "  %-6s %-28s", g.name, name)
			for _, r := range runs {
				l := g.of(r)[name]
				fmt.Fprintf(out, " %6.2f / %6.2f ms", ms(l.P50), ms(l.P99))
			}
			ratio := ms(g.of(last)[name].P99) / ms(g.of(first)[name].P99)
			verdict := ""
			if g.target > 0 {
				verdict = fmt.Sprintf("  (target <= %.1f: %s)", g.target, okOrMissed(ratio <= g.target))
			}
			fmt.Fprintf(out, " %7.2f%s\n", ratio, verdict)
		}
	}
}

func okOrMissed(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}

// countLabel is 1000000 as "1M", 2500000 as "2.5M", 200000 as "200k".
func countLabel(n int) string {
	switch {
	case n >= 1_000_000:
		return strconv.FormatFloat(float64(n)/1e6, 'f', -1, 64) + "M"
	case n >= 1_000:
		return strconv.FormatFloat(float64(n)/1e3, 'f', -1, 64) + "k"
	}
	return strconv.Itoa(n)
}

// RunAPI measures the api suite at Config.APIRecords' first size and returns
// the figures.
func RunAPI(ctx context.Context, cfg Config) (*APIResult, error) {
	cfg = cfg.withDefaults()
	n := cfg.APIRecords[0]
	pool, _, cleanup, err := scratchDB(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	st := pool.Store()
	fmt.Fprintf(cfg.Out, "api: %d stored records, %d requests per query (%d for stats and incident counts), in-process HTTP\n", n, apiSamples, apiStatSamples)
	res := &APIResult{Records: n}
	start := time.Now()
	if err := LoadAPIRecords(ctx, st, n); err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, "ANALYZE redrive_record_data, redrive_lifecycle"); err != nil {
		return nil, err
	}
	if err := st.CompactCounts(ctx); err != nil {
		return nil, err
	}
	res.Load = time.Since(start)
	fmt.Fprintf(cfg.Out, "  loaded in %v (COPY, indexes and statistics triggers included)\n", res.Load.Round(time.Second))

	rec, err := records.New(records.Config{Store: st, Queues: queue.New(func() *policy.Set { return nil }, st, quiet), Logger: quiet})
	if err != nil {
		return nil, err
	}
	srv := httpapi.New(httpapi.Config{Records: rec, AuthDisabled: true, Logger: quiet})
	rng := rand.New(rand.NewPCG(1, 2))
	since := time.Now().Add(-30 * 24 * time.Hour).UTC().Format(time.RFC3339)
	qs := func(kv ...string) func() string {
		return func() string {
			v := url.Values{}
			for i := 0; i < len(kv); i += 2 {
				val := kv[i+1]
				if val == "%q" {
					val = fmt.Sprintf("q%d", rng.IntN(apiQueues))
				}
				v.Set(kv[i], val)
			}
			return "/ojs/v1/dead-letter?" + v.Encode()
		}
	}
	lists := []struct {
		name string
		path func() string
	}{
		{"queue+state", qs("queue", "%q", "state", "discarded", "limit", "50")},
		{"queue+error_type", func() string {
			q := rng.IntN(apiQueues)
			return fmt.Sprintf("/ojs/v1/dead-letter?queue=q%d&error_type=%s&limit=50", q, errorTypeOf(q, rng.IntN(apiErrTypes)))
		}},
		{"type+exhaustion", func() string {
			return fmt.Sprintf("/ojs/v1/dead-letter?type=%s&exhaustion=dead_letter&limit=50", typeOf(rng.IntN(apiQueues), rng.IntN(2)))
		}},
		{"queue+since", qs("queue", "%q", "since", since, "limit", "50")},
		{"key", func() string { return fmt.Sprintf("/ojs/v1/dead-letter?key=order-%d", rng.IntN(n)) }},
	}
	measureN := func(samples int, path func() string) (Latency, error) {
		for range 20 { // warm-up
			if _, err := call(srv, path()); err != nil {
				return Latency{}, err
			}
		}
		ds := make([]time.Duration, samples)
		for i := range ds {
			t0 := time.Now()
			if _, err := call(srv, path()); err != nil {
				return Latency{}, err
			}
			ds[i] = time.Since(t0)
		}
		slices.Sort(ds)
		return Latency{P50: ds[len(ds)/2], P99: ds[len(ds)*99/100]}, nil
	}
	measure := func(path func() string) (Latency, error) { return measureN(apiSamples, path) }
	report := func(group, name string, l Latency, target time.Duration) {
		fmt.Fprintf(cfg.Out, "  %-6s %-28s p50 %7.2f ms  p99 %7.2f ms  (target p99 <= %v: %s)\n", group, name,
			ms(l.P50), ms(l.P99), target, okOrMissed(l.P99 <= target))
	}
	res.List, res.Stats, res.PathSearch, res.Incidents = map[string]Latency{}, map[string]Latency{}, map[string]Latency{}, map[string]Latency{}
	for _, l := range lists {
		lat, err := measure(l.path)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", l.name, err)
		}
		res.List[l.name] = lat
		report("list", l.name, lat, apiListTarget)
	}
	// Page 2 through the keyset cursor.
	first, err := call(srv, "/ojs/v1/dead-letter?queue=q1&limit=50")
	if err != nil {
		return nil, err
	}
	var page struct {
		Pagination struct {
			NextCursor string `json:"next_cursor"`
		} `json:"pagination"`
	}
	_ = json.Unmarshal(first, &page)
	lat, err := measure(func() string { return "/ojs/v1/dead-letter?queue=q1&limit=50&cursor=" + page.Pagination.NextCursor })
	if err != nil {
		return nil, err
	}
	res.List["cursor page 2"] = lat
	report("list", "cursor page 2", lat, apiListTarget)

	for name, path := range map[string]func() string{
		"all":       func() string { return "/ojs/v1/dead-letter/stats" },
		"one queue": func() string { return fmt.Sprintf("/ojs/v1/dead-letter/stats?queue=q%d", rng.IntN(apiQueues)) },
	} {
		lat, err := measureN(apiStatSamples, path)
		if err != nil {
			return nil, fmt.Errorf("stats: %w", err)
		}
		res.Stats[name] = lat
		report("stats", name, lat, apiStatsTarget)
	}
	var incidents struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	body, err := call(srv, "/ojs/v1/incidents?limit=1000")
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(body, &incidents); err != nil || len(incidents.Items) == 0 {
		return nil, fmt.Errorf("incidents: %d listed, %v", len(incidents.Items), err)
	}
	for name, path := range map[string]func() string{
		"all, by count": func() string { return "/ojs/v1/incidents" },
		"one queue, by last_seen": func() string {
			return fmt.Sprintf("/ojs/v1/incidents?queue=q%d&sort=last_seen", rng.IntN(apiQueues))
		},
		"state": func() string { return "/ojs/v1/incidents?state=retryable" },
		"records of one": func() string {
			return "/ojs/v1/dead-letter?limit=50&incident=" + incidents.Items[rng.IntN(len(incidents.Items))].ID
		},
	} {
		samples := apiStatSamples
		if name == "records of one" { // a list page: ~5 ms
			samples = apiSamples
		}
		lat, err := measureN(samples, path)
		if err != nil {
			return nil, fmt.Errorf("incidents: %w", err)
		}
		res.Incidents[name] = lat
		report("incid.", name, lat, apiIncidentsTarget)
	}
	for name, path := range map[string]func() string{
		"customer.id (number)": func() string {
			return fmt.Sprintf("/ojs/v1/dead-letter?path=customer.id&value=%d&limit=50", rng.IntN(apiCustomers))
		},
		"customer.tier+queue": func() string {
			return fmt.Sprintf("/ojs/v1/dead-letter?path=customer.tier&value=platinum&queue=q%d&limit=50", rng.IntN(apiQueues))
		},
	} {
		lat, err := measure(path)
		if err != nil {
			return nil, fmt.Errorf("path search: %w", err)
		}
		res.PathSearch[name] = lat
		report("path", name, lat, apiPathTarget)
	}
	// What the table's size costs writers: the next failures, then retention.
	if res.IngestRate, err = ingestInto(ctx, pool, cfg.ValueSize); err != nil {
		return nil, err
	}
	if res.Pruned, res.PruneTime, err = pruneOld(ctx, pool); err != nil {
		return nil, err
	}
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// call serves one GET in process and fails on a non-200 answer.
func call(h http.Handler, path string) ([]byte, error) {
	req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, path, nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	body, _ := io.ReadAll(w.Result().Body)
	if w.Code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", path, w.Code, body)
	}
	return body, nil
}

// The shape of the loaded data: topics with a couple of types and a handful of
// error types each, as real DLQs look (statistics tables stay small).
const (
	apiQueues    = 20
	apiErrTypes  = 5
	apiCustomers = 100_000
)

func typeOf(q, i int) string      { return fmt.Sprintf("t%d.%d", q, i) }
func errorTypeOf(q, i int) string { return fmt.Sprintf("err%d.%d", q, i) }

var tiers = []string{"bronze", "silver", "gold", "platinum"}

// LoadAPIRecords COPYs n records as the api suite reads them: 70% dead
// letters, 10% discards, 15% retryable (failed in the last three days, due
// in a day), 5% completed, spread over queues and error types and created
// over the last 90 days, each with an id of its creation time. The console's
// page-load benchmark reads the same database.
func LoadAPIRecords(ctx context.Context, st *store.Store, n int) error {
	rng := rand.New(rand.NewPCG(7, 8))
	now := time.Now().UTC()
	// The weekly partitions a Redrive running for those 90 days has made.
	if _, err := st.EnsureWeeks(ctx, now.Add(-91*24*time.Hour), 15); err != nil {
		return err
	}
	retry, _ := json.Marshal(policy.Default())
	const batch = 10_000
	recs := make([]dlq.Record, 0, batch)
	opened := map[string]store.IncidentSeen{}
	for i := range n {
		q := rng.IntN(apiQueues)
		created := now.Add(-time.Duration(rng.Int64N(int64(90 * 24 * time.Hour))))
		r := dlq.Record{Queue: fmt.Sprintf("q%d", q), Type: typeOf(q, rng.IntN(2)),
			Attempt: 3, MaxAttempts: 3, Format: dlq.FormatRedrive,
			Source:  dlq.Source{Topic: fmt.Sprintf("q%d", q), Partition: int32(rng.IntN(12)), Offset: int64(i)},
			DLQ:     dlq.Coord{Topic: "dead_letter_queue", Partition: int32(i % 12), Offset: int64(i)},
			Key:     fmt.Appendf(nil, "order-%d", i),
			Value:   fmt.Appendf(nil, `{"order_id":%d,"customer":{"id":%d,"tier":%q},"amount":%d,"currency":"EUR","note":"%x"}`, i, rng.IntN(apiCustomers), tiers[rng.IntN(len(tiers))], rng.IntN(100000), rng.Uint64()),
			Headers: []dlq.Header{{Key: "traceparent", Value: fmt.Appendf(nil, "00-%032x-%016x-01", rng.Uint64(), rng.Uint64())}},
			Retry:   retry, Meta: json.RawMessage(`{}`),
			CreatedAt: created, UpdatedAt: created,
		}
		// Messages with variable parts, one signature per error type: each
		// error type is an incident.
		errType := errorTypeOf(q, rng.IntN(apiErrTypes))
		msg := fmt.Sprintf("dial tcp 10.0.%d.%d:5432: connect: connection refused (order %d)", rng.IntN(256), rng.IntN(256), i)
		r.Errors = []dlq.ErrorEntry{{Attempt: 3, Type: errType, Message: msg, Code: dlq.CodeRetry, OccurredAt: created}}
		r.Fingerprint = fingerprint.Of(errType, msg, nil)
		switch p := rng.IntN(100); {
		case p < 70:
			r.State, r.Exhaustion, r.DiscardedAt = dlq.StateDiscarded, dlq.ExhaustionDeadLetter, &created
		case p < 80:
			r.State, r.Exhaustion, r.DiscardedAt = dlq.StateDiscarded, dlq.ExhaustionDiscard, &created
		case p < 95:
			// Still being retried: failed in the last three days.
			created = now.Add(-(now.Sub(created) % (3 * 24 * time.Hour)))
			r.CreatedAt, r.UpdatedAt, r.Errors[0].OccurredAt = created, created, created
			next := now.Add(24 * time.Hour)
			r.State, r.NextRetryAt = dlq.StateRetryable, &next
		default:
			r.State, r.CompletedAt = dlq.StateCompleted, &created
		}
		// Stored when it failed: its id (a UUIDv7) carries that time, and
		// with it the week partition it is stored in.
		r.ID = uuidAt(created).String()
		if _, ok := opened[r.Fingerprint]; !ok {
			opened[r.Fingerprint] = store.IncidentSeen{Fingerprint: r.Fingerprint, ErrorType: errType,
				Signature: fingerprint.Normalize(msg), Queue: r.Queue, SeenAt: created, SampleID: r.ID, SampleMessage: msg}
		}
		recs = append(recs, r)
		if len(recs) == batch || i == n-1 {
			if _, err := st.InsertRecords(ctx, recs); err != nil {
				return fmt.Errorf("load records: %w", err)
			}
			recs = recs[:0]
		}
	}
	_, err := st.RecordIncidents(ctx, slices.Collect(maps.Values(opened)))
	return err
}

// uuidAt is a UUIDv7 made at t: t's millisecond in its first 48 bits.
func uuidAt(t time.Time) uuid.UUID {
	id := uuid.Must(uuid.NewV7())
	ms := uint64(t.UnixMilli())
	for i := range 6 {
		id[i] = byte(ms >> (40 - 8*i))
	}
	return id
}
