package console_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/bench"
	"github.com/redrive/redrive/internal/store"
)

// pageLoads is how many timed loads each page gets, after warmUp untimed ones.
const (
	pageLoads = 40
	warmUp    = 3
)

// BenchmarkPageLoad loads the console's main pages in headless Chromium over
// a database of bench.APIRecords records (the api suite's) and reports the
// time from navigation to the page's first render: the HTML, the module, its
// API calls and the DOM. `make bench` runs it; the target is p95 < 300 ms.
func BenchmarkPageLoad(b *testing.B) {
	s := startServer(b)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, s.dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	st := store.New(pool)
	start := time.Now()
	if err := bench.LoadAPIRecords(ctx, st, bench.APIRecords); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE redrive_record"); err != nil {
		b.Fatal(err)
	}
	if err := st.CompactCounts(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("loaded %d records in %v", bench.APIRecords, time.Since(start).Round(time.Second))
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
		for _, p := range pages {
			var times []time.Duration
			for i := range warmUp + pageLoads {
				ms := br.load(b, s.base+p.path)
				if i >= warmUp {
					times = append(times, time.Duration(ms*float64(time.Millisecond)))
				}
			}
			slices.Sort(times)
			p50, p95 := times[len(times)/2], times[len(times)*95/100]
			b.ReportMetric(float64(p95.Microseconds())/1000, p.name+"_p95_ms")
			fmt.Printf("console %-17s p50 %6.1f ms  p95 %6.1f ms  (target p95 < 300 ms)\n", p.name, ms(p50), ms(p95))
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// load navigates to url and returns the milliseconds from navigation start
// to the console's "rendered" mark.
func (b *browser) load(t testing.TB, url string) float64 {
	t.Helper()
	b.run(t, "load "+url, chromedp.Navigate(url), until("the page rendered", `performance.getEntriesByName("redrive:rendered").length > 0`))
	return eval[float64](t, b, `performance.getEntriesByName("redrive:rendered")[0].startTime`)
}
