package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/app"
	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/testdate"
)

// behindClock is the server's clock: the real time, less a lag the test
// sets, so that failures can be stored minutes in the past without waiting.
// Its timers are the wall clock's.
type behindClock struct{ lag atomic.Int64 }

func (c *behindClock) Now() time.Time                       { return testdate.Now().Add(-time.Duration(c.lag.Load())) }
func (c *behindClock) NewTimer(d time.Duration) clock.Timer { return clock.Wall.NewTimer(d) }
func (c *behindClock) set(lag time.Duration)                { c.lag.Store(int64(lag)) }
func (s *server) produce(t *testing.T, recs ...*kgo.Record) {
	kafkatest.Produce(t, kafkatest.Client(t, s.brokers), recs...)
}

// startServerAt is startServer with the server's clock.
func startServerAt(t *testing.T, clk *behindClock) *server {
	t.Helper()
	return startServerWith(t, app.Options{Clock: clk})
}

// failed is a record of queue that failed with errType and message.
func failed(queue, errType, message string, backtrace []string) *kgo.Record {
	src := &kgo.Record{Topic: queue, Key: []byte("k-" + uuid.NewString()[:8]), Value: []byte(`{"order":1}`)}
	return envelope.Encode(src, envelope.FailureInfo{DLQTopic: dlqTopic, ErrorType: errType, Message: message, Backtrace: backtrace})
}

func chargeTimeout(queue string) *kgo.Record {
	return failed(queue, "http.timeout", "POST https://api/v1/charges/"+uuid.NewString()+": context deadline exceeded", nil)
}

// storedRecords lists the stored records' queue, created_at and incident.
func (s *server) storedRecords(t *testing.T) []struct{ Queue, CreatedAt, Incident, ErrorType string } {
	t.Helper()
	var page struct {
		Items []struct {
			Queue     string `json:"queue"`
			CreatedAt string `json:"created_at"`
			Incident  string `json:"incident"`
			ErrorType string `json:"error_type"`
		} `json:"items"`
	}
	if st := s.api(t, http.MethodGet, "/ojs/v1/dead-letter?limit=200", &page); st != http.StatusOK {
		t.Fatalf("list: %d", st)
	}
	var out []struct{ Queue, CreatedAt, Incident, ErrorType string }
	for _, r := range page.Items {
		out = append(out, struct{ Queue, CreatedAt, Incident, ErrorType string }{r.Queue, r.CreatedAt, r.Incident, r.ErrorType})
	}
	return out
}

// bar is a bar of a chart as the page draws it.
type bar struct {
	At    string   `json:"at"`
	Added int      `json:"added"`
	Parts []string `json:"parts"`
}

func chartBars(t *testing.T, b *browser, sel string) map[string]bar {
	t.Helper()
	raw := eval[string](t, b, fmt.Sprintf(`JSON.stringify([...document.querySelectorAll(%q)].map((g) => ({
		at: g.dataset.at, added: Number(g.dataset.added),
		parts: [...g.querySelectorAll("rect")].map((r) => r.dataset.queue + " " + r.dataset.value + " " + r.getAttribute("height")),
	})))`, sel+" .chart-bar"))
	var bars []bar
	if err := json.Unmarshal([]byte(raw), &bars); err != nil {
		t.Fatal(err)
	}
	out := map[string]bar{}
	for _, br := range bars {
		out[br.At] = br
	}
	return out
}

// wantBars compares a chart's bars with the failures stored per minute and
// queue (a rect's height is its count: the bars are to scale).
func wantBars(t *testing.T, what string, got map[string]bar, want map[string]map[string]int) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d bars %v, want %d at %v", what, len(got), got, len(want), want)
	}
	for at, byQueue := range want {
		var parts []string
		total := 0
		for q, n := range byQueue {
			parts = append(parts, fmt.Sprintf("%s %d %d", q, n, n))
			total += n
		}
		sort.Strings(parts)
		g := got[at]
		sort.Strings(g.Parts)
		if g.Added != total || strings.Join(g.Parts, ", ") != strings.Join(parts, ", ") {
			t.Errorf("%s: the bar of %s is %+v, want %d: %s", what, at, g, total, strings.Join(parts, ", "))
		}
	}
}

// TestFailuresOverTimeAndIncidents: failures dead-lettered over five
// minutes (the server's clock set back, not waited for) show as bars at
// their minutes, stacked by queue, on the overview and on their incident's
// page; timeouts that each carry their own UUID are one incident; the
// incidents list clips a long signature (whole on demand) and shows the
// frame that tells apart two incidents of one message.
func TestFailuresOverTimeAndIncidents(t *testing.T) {
	t.Parallel()
	clk := &behindClock{}
	s := startServerAt(t, clk)
	long := "validation failed: " + strings.Repeat("the order references a customer that the billing system does not know; ", 8) + "giving up"
	stack := func(site string) []string {
		return []string{"goroutine 7 [running]:", "main." + site + "(0xc000012345, 0x1)", "\t/app/" + site + ".go:42 +0x1d", "main.handle()", "\t/app/main.go:10 +0x2a"}
	}
	stored := 0
	for _, step := range []struct {
		lag  time.Duration
		recs []*kgo.Record
	}{
		{5 * time.Minute, []*kgo.Record{chargeTimeout("orders"), chargeTimeout("orders"), chargeTimeout("orders")}},
		{3 * time.Minute, []*kgo.Record{chargeTimeout("payments"), chargeTimeout("payments"),
			failed("orders", "db.down", "dial tcp 10.0.0.5:5432: connect: connection refused", nil)}},
		{0, []*kgo.Record{chargeTimeout("orders"), chargeTimeout("orders"), chargeTimeout("orders"), chargeTimeout("orders"),
			failed("orders", "validation.customer", long, nil),
			failed("payments", "panic", "runtime error: invalid memory address or nil pointer dereference", stack("charge")),
			failed("payments", "panic", "runtime error: invalid memory address or nil pointer dereference", stack("refund"))}},
	} {
		clk.set(step.lag)
		s.produce(t, step.recs...)
		stored += len(step.recs)
		eventually.True(t, fmt.Sprintf("%d records stored", stored), func() bool { return len(s.storedRecords(t)) == stored }, eventually.Within(30*time.Second))
	}
	clk.set(0)
	// What the charts must show: the failures per minute and queue, all of
	// them and the timeouts' incident's, by the records' creation (ingest's
	// batch time, the activity's minute).
	all, timeouts := map[string]map[string]int{}, map[string]map[string]int{}
	timeoutIncident := ""
	for _, r := range s.storedRecords(t) {
		at, err := time.Parse(time.RFC3339Nano, r.CreatedAt)
		if err != nil {
			t.Fatal(err)
		}
		minute := at.UTC().Truncate(time.Minute).Format("2006-01-02T15:04:05.000Z")
		add := func(m map[string]map[string]int) {
			if m[minute] == nil {
				m[minute] = map[string]int{}
			}
			m[minute][r.Queue]++
		}
		add(all)
		if r.ErrorType == "http.timeout" {
			add(timeouts)
			if timeoutIncident != "" && r.Incident != timeoutIncident {
				t.Fatalf("the timeouts are incidents %s and %s: each UUID made its own", timeoutIncident, r.Incident)
			}
			timeoutIncident = r.Incident
		}
	}
	if len(all) < 3 {
		t.Fatalf("failures stored in %d minutes %v, want three (5 and 3 minutes ago, now)", len(all), all)
	}

	b := newBrowser(t)
	b.run(t, "the overview's chart", chromedp.Navigate(s.base+"/ui/"), until("the bars", `document.querySelectorAll(".activity .chart-bar").length >= 3`))
	wantBars(t, "overview, last hour", chartBars(t, b, ".activity"), all)
	if got := b.text(t, ".activity .chart-summary"); !strings.HasPrefix(got, "13 failures in the last 1 h") {
		t.Errorf("the chart's summary says %q, want 13 failures in the last 1 h", got)
	}
	if legend := b.text(t, ".activity .chart-legend"); !strings.Contains(legend, "orders 9") || !strings.Contains(legend, "payments 4") {
		t.Errorf("the legend says %q, want orders 9 and payments 4", legend)
	}
	eval[bool](t, b, `document.querySelector(".activity").scrollIntoView(), true`)
	b.screenshots(t, "overview-activity")
	b.run(t, "the last 24 hours", click(`.activity button[data-range="24h"]`), until("by the hour",
		`document.querySelector(".activity").dataset.range === "24h"`))
	hours := chartBars(t, b, ".activity")
	total := 0
	for _, br := range hours {
		total += br.Added
	}
	if total != 13 || len(hours) > 2 || !strings.Contains(eval[string](t, b, `location.search`), "range=24h") {
		t.Errorf("24 h: %d failures in %d bars (url %s), want 13 in one or two hours, the range in the URL", total, len(hours), eval[string](t, b, `location.search`))
	}

	// The incidents list.
	b.run(t, "the incidents", chromedp.Navigate(s.base+"/ui/incidents"), waitText("table.incidents", "charges/<uuid>"))
	timeoutRow := fmt.Sprintf(`table.incidents tr[data-incident=%q]`, timeoutIncident)
	if row := b.text(t, timeoutRow); !strings.HasPrefix(row, "9") || !strings.Contains(row, "POST https://<host>/v<n>/charges/<uuid>: context deadline exceeded") {
		t.Errorf("the timeouts' row says %q, want 9 records of one signature", row)
	}
	if n := b.count(t, "table.incidents tbody tr"); n != 5 {
		t.Errorf("%d incidents, want 5: the timeouts, db.down, the long one and the two panics", n)
	}
	clippedSig := `table.incidents .sig[data-clipped]`
	if shown := b.text(t, clippedSig); len([]rune(shown)) != 201 || !strings.HasSuffix(shown, "…") {
		t.Errorf("the long signature shows %d characters %q, want 200 and …", len([]rune(shown)), shown)
	}
	b.run(t, "the whole signature", click(`table.incidents button.more`), waitText(clippedSig, "giving up"))
	if got := b.text(t, `table.incidents button.more`); got != "Show less" {
		t.Errorf("the button says %q once open, want Show less", got)
	}
	frames := eval[string](t, b, `[...document.querySelectorAll("table.incidents td.incident")].filter((td) => td.textContent.includes("nil pointer")).map((td) => td.querySelector(".frame").textContent).sort().join(" | ")`)
	if frames != "at main.charge(...) | at main.refund(...)" {
		t.Errorf("the panics' rows show the frames %q, want main.charge(...) and main.refund(...)", frames)
	}
	b.run(t, "the signature clipped again", click(`table.incidents button.more`), until("clipped", `document.querySelector("table.incidents .sig[data-clipped]").dataset.clipped === "true"`))
	pageFits(t, b, "the incidents list")
	b.screenshots(t, "incidents")

	// The timeouts' incident: its failures only, per queue.
	b.run(t, "the timeouts' incident", click(timeoutRow+" a.etype"), waitText("main h1", "http.timeout"),
		until("its bars", `document.querySelectorAll(".activity .chart-bar").length >= 3`))
	wantBars(t, "the incident, last hour", chartBars(t, b, ".activity"), timeouts)
	if got := b.text(t, "main"); !strings.Contains(got, "9 records") || !strings.Contains(got, "orders, payments") {
		t.Errorf("the incident page says %q, want 9 records in orders and payments", got)
	}
	pageFits(t, b, "the incident page")
	b.screenshots(t, "incident")
}

// pageFits checks that the page is no wider than a window 1400 and 800 px
// wide.
func pageFits(t *testing.T, b *browser, what string) {
	t.Helper()
	for _, w := range []int64{1400, 800} {
		b.run(t, fmt.Sprintf("a %d px wide window", w), chromedp.EmulateViewport(w, 900))
		if wide := eval[int](t, b, `document.documentElement.scrollWidth`); wide > int(w) {
			t.Errorf("%s at %d px is %d px wide", what, w, wide)
		}
	}
	b.run(t, "the window's size back", chromedp.EmulateViewport(1280, 860))
}
