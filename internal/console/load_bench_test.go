package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/bench"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// Each page is loaded loadsPerRound times (after warmUp untimed loads) in
// each of rounds rounds; the pages take turns, so a slow spell of the machine
// lands on all of them.
const (
	rounds        = 5
	loadsPerRound = 40
	warmUp        = 3
)

// BenchmarkPageLoad loads the console's main pages in headless Chromium over
// a database of bench.APIRecords records (the api suite's) and reports the
// time from navigation to the page's first render: the HTML, the modules,
// the page's API calls and the DOM. It prints each page's p50 and p95, as
// the median and range over the rounds, then the same for first visits (the
// browser cache off). `make bench` runs it; the target is p95 < 300 ms.
func BenchmarkPageLoad(b *testing.B) {
	// A settled database: the records span 90 days, so the pruner would
	// delete most of them in the middle of the measurement, and the archiver
	// would be copying the 700,000 exhausted ones to Kafka.
	s := startServer(b, "REDRIVE_PRUNE_INTERVAL", "24h", "REDRIVE_ARCHIVE_TOPIC", "off")
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, s.dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	st := store.New(pool)
	// The pruner's first pass runs as serve starts: the load's weeks are
	// made after it, or it would drop them as empty past weeks while they
	// are being filled.
	waitForPrunerPass(b, s)
	start := testdate.Now()
	if err := bench.LoadAPIRecords(ctx, st, bench.APIRecords); err != nil {
		b.Fatal(err)
	}
	if err := st.CompactCounts(ctx); err != nil {
		b.Fatal(err)
	}
	// Settle the database as a long-lived one is: vacuumed (autovacuum would
	// otherwise sweep the fresh million rows during the rounds) and its dirty
	// pages written back.
	for _, stmt := range []string{"VACUUM ANALYZE", "CHECKPOINT"} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			b.Fatalf("%s: %v", stmt, err)
		}
	}
	b.Logf("loaded %d records in %v", bench.APIRecords, testdate.Since(start).Round(time.Second))
	var id string
	if err := pool.QueryRow(ctx, "SELECT id::text FROM redrive_record ORDER BY id DESC OFFSET 1000 LIMIT 1").Scan(&id); err != nil {
		b.Fatal(err)
	}
	br := newBrowser(b)
	pages := []struct{ name, path string }{
		{"overview", "/ui/"},
		{"records", "/ui/records"},
		{"records_filtered", "/ui/records?queue=q3&error_type=err3.1"},
		{"record", "/ui/records/" + id},
	}
	b.ResetTimer()
	for range b.N {
		p50s := make([][]time.Duration, len(pages))
		p95s := make([][]time.Duration, len(pages))
		for range rounds {
			for i, p := range pages {
				for range warmUp {
					br.load(b, s.base+p.path)
				}
				p50, p95 := br.timeLoads(b, s.base+p.path, loadsPerRound)
				p50s[i] = append(p50s[i], p50)
				p95s[i] = append(p95s[i], p95)
			}
		}
		fmt.Printf("console page loads over %d records: %d rounds of %d loads per page; median (range) over rounds; target p95 < 300 ms\n",
			bench.APIRecords, rounds, loadsPerRound)
		for i, p := range pages {
			m50, lo50, hi50 := spread(p50s[i])
			m95, lo95, hi95 := spread(p95s[i])
			b.ReportMetric(ms(m95), p.name+"_p95_ms")
			fmt.Printf("console %-23s p50 %6.1f ms (%.1f–%.1f)  p95 %6.1f ms (%.1f–%.1f)\n", p.name, ms(m50), ms(lo50), ms(hi50), ms(m95), ms(lo95), ms(hi95))
		}

		// A first visit: nothing cached, so every asset comes from the server.
		if _, err := chromedp.Call(br.ctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true}); err != nil {
			b.Fatal(err)
		}
		fmt.Printf("first visits (browser cache off), %d loads per page:\n", loadsPerRound)
		for _, p := range pages {
			p50, p95 := br.timeLoads(b, s.base+p.path, loadsPerRound)
			fmt.Printf("console %-23s p50 %6.1f ms  p95 %6.1f ms\n", p.name+"_first", ms(p50), ms(p95))
		}
		if _, err := chromedp.Call(br.ctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: false}); err != nil {
			b.Fatal(err)
		}
	}
}

// timeLoads loads url n times and returns the p50 and p95 of the load times.
func (b *browser) timeLoads(t testing.TB, url string, n int) (p50, p95 time.Duration) {
	t.Helper()
	times := make([]time.Duration, n)
	for i := range times {
		times[i] = b.load(t, url)
	}
	slices.Sort(times)
	return times[n/2], times[n*95/100]
}

// spread returns the median, minimum and maximum of ds.
func spread(ds []time.Duration) (median, lo, hi time.Duration) {
	s := slices.Sorted(slices.Values(ds))
	return s[len(s)/2], s[0], s[len(s)-1]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// load navigates to url and returns the time from navigation start to the
// console's "rendered" mark.
func (b *browser) load(t testing.TB, url string) time.Duration {
	t.Helper()
	b.run(t, "load "+url, chromedp.Navigate(url), until("the page rendered", `performance.getEntriesByName("redrive:rendered").length > 0`))
	ms := eval[float64](t, b, `performance.getEntriesByName("redrive:rendered")[0].startTime`)
	return time.Duration(ms * float64(time.Millisecond))
}

// waitForPrunerPass waits until the server's pruner has finished a pass.
func waitForPrunerPass(tb testing.TB, s *server) {
	tb.Helper()
	eventually.True(tb, "the pruner's first pass", func() bool {
		resp, err := http.Get(s.base + "/metrics")
		if err != nil {
			return false
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, "redrive_pruner_last_success_timestamp_seconds "); ok && v != "0" {
				return true
			}
		}
		return false
	}, eventually.Within(time.Minute))
}
