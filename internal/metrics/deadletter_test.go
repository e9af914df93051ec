package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/redrive/redrive/internal/metrics"
)

func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/metrics", nil)
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, req)
	return rec.Body.String()
}

// The DLQ size is unknown until read from Postgres (never a fake 0 after a
// restart); a queue that empties reports 0 instead of vanishing.
func TestDepthGauge(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	d := metrics.NewDeadLetter(reg, func() time.Time { return now })
	if out := scrape(t, reg); strings.Contains(out, "ojs_dead_letter_total{") {
		t.Fatalf("size reported before the first read:\n%s", out)
	}
	d.SetDepth(map[string]metrics.QueueDepth{"orders": {Count: 3, Oldest: now.Add(-time.Hour)}, "billing": {Count: 1, Oldest: now}})
	out := scrape(t, reg)
	for _, want := range []string{`ojs_dead_letter_total{queue="orders"} 3`, `ojs_dead_letter_total{queue="billing"} 1`,
		`redrive_dead_letter_oldest_age_seconds{queue="orders"} 3600`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in\n%s", want, out)
		}
	}
	d.SetDepth(map[string]metrics.QueueDepth{"billing": {Count: 2, Oldest: now}})
	out = scrape(t, reg)
	for _, want := range []string{`ojs_dead_letter_total{queue="orders"} 0`, `ojs_dead_letter_total{queue="billing"} 2`,
		`redrive_dead_letter_oldest_age_seconds{queue="orders"} 0`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in\n%s", want, out)
		}
	}
	// Error types: the 20 largest per queue, the rest summed as "other".
	var rows []metrics.RecordCount
	for i := range 25 {
		rows = append(rows, metrics.RecordCount{Queue: "q", State: "discarded", Exhaustion: "dead_letter", ErrorType: string(rune('a' + i)), N: int64(100 - i)})
	}
	d.SetRecordCounts(rows)
	out = scrape(t, reg)
	for _, want := range []string{`redrive_dead_letter_error_types{error_type="a",queue="q"} 100`,
		`redrive_dead_letter_error_types{error_type="other",queue="q"} 390`, // u..y: 80+79+78+77+76
		`redrive_records{exhaustion="dead_letter",queue="q",state="discarded"} 2200`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in\n%s", want, out)
		}
	}
	if strings.Contains(out, `error_type="v"`) {
		t.Error("error type beyond the 20 largest has its own series")
	}
}
