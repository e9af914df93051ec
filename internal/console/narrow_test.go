package console_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/eventually"
)

// Realistic names and messages that leave a layout nowhere to break a line:
// long topic names, error types of Java clients, URLs and stack-trace-like
// messages, keys of JSON.
const (
	longQueue   = "payments.settlement-reconciliation.eu-west-1.production.v2.retry-after-partner-timeout"
	longQueue2  = "com_example_fulfilment.warehouse_inventory_reservations.compacted_v3_eu_west_1_production"
	longErrType = "org.apache.kafka.connect.errors.RetriableException.PartnerGatewayTimeoutException"
	longMessage = "POST https://partner-gateway.internal.example.com/api/v1/settlements/9f1c7a2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b/reconcile?attempt=3&region=eu-west-1&trace_id=4bf92f3577b34da6a3ce929d0e0e4736: " +
		"context deadline exceeded (Client.Timeout exceeded while awaiting headers); upstream said: {\"error\":\"gateway_timeout\",\"retry_after_ms\":30000,\"request_id\":\"req_01HV7Q9X4ZK2M8R5T3W6Y1B0NC\"}"
	longKey = `{"tenant":"acme-corporation-international","settlement_id":"9f1c7a2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b","partition_hint":17}`
)

// narrowData stores failures with long names in several queues, with error
// histories, scheduled and exhausted ones, and runs a bulk task, a config
// change and a pause, so that every page has a realistic amount of text.
func narrowData(t *testing.T, s *server) (recordID, taskID string) {
	t.Helper()
	var recs []dlq.Record
	for i := range 40 {
		q := []string{longQueue, longQueue2, "orders"}[i%3]
		r := failure(q, fmt.Sprintf("%s-%d", longKey, i), fmt.Appendf(nil, `{"settlement_id":"9f1c7a2e-%04d","amount":"1024.50","lines":[{"sku":"SKU-%d-XL-BLUE","qty":%d}]}`, i, i, i), i%2 == 0)
		now := r.CreatedAt
		r.Errors = []dlq.ErrorEntry{
			{Attempt: 1, Type: longErrType, Message: longMessage, Code: dlq.CodeRetry, OccurredAt: now.Add(-2 * time.Minute),
				Backtrace: []string{"com.example.partner.GatewayClient.post(GatewayClient.java:214)", "com.example.settlement.Reconciler.reconcile(Reconciler.java:88)"}},
			{Attempt: 2, Type: longErrType, Message: longMessage, Code: dlq.CodeRetry, OccurredAt: now.Add(-time.Minute)},
		}
		r.Attempt = 2
		recs = append(recs, r)
	}
	s.storeRecords(t, recs)
	// One through ingest, for an incident.
	s.kcat(t, longKey, `{"n":0}`, "redrive.source.topic="+longQueue2, "redrive.error.type="+longErrType,
		"redrive.error.message="+longMessage)
	var a struct {
		Task struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	s.send(t, "POST", "/ojs/v1/dead-letter/retry", map[string]any{"filter": map[string]any{"queue": "orders"}, "confirm": true}, &a)
	s.send(t, "PUT", "/ojs/v1/queues/"+url.PathEscape(longQueue2)+"/config", map[string]any{"retry": map[string]any{"max_attempts": 7, "initial_interval": "PT45S"}}, nil)
	s.send(t, "POST", "/ojs/v1/queues/"+url.PathEscape(longQueue)+"/pause", nil, nil)
	return recs[1].ID, a.Task.ID
}

// Every page of the console fits the window, at 1400 px and at 800 px, with
// long topic names, long messages, long keys and the list's many columns:
// nothing makes the page scroll sideways (a wide table may scroll in its own
// box), and the records list leaves the message room to read.
func TestEveryPageFitsTheWindow(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	recordID, taskID := narrowData(t, s)
	var incidents struct {
		Items []struct{ ID string } `json:"items"`
	}
	eventually.True(t, "an incident", func() bool {
		s.api(t, "GET", "/ojs/v1/incidents", &incidents)
		return len(incidents.Items) > 0
	}, eventually.Within(30*time.Second))
	incidentID := incidents.Items[0].ID
	b := newBrowser(t)
	pages := []struct{ name, path string }{
		{"overview", "/ui/"},
		{"queues", "/ui/queues"},
		{"queue", "/ui/queues/" + url.PathEscape(longQueue)},
		{"queue-config", "/ui/queues/" + url.PathEscape(longQueue2)},
		{"default-layer", "/ui/queues/_default"},
		{"records", "/ui/records"},
		{"records-filtered", "/ui/records?queue=" + url.QueryEscape(longQueue) + "&error_type=" + url.QueryEscape(longErrType)},
		{"record", "/ui/records/" + recordID},
		{"incidents", "/ui/incidents"},
		{"incident", "/ui/incidents/" + incidentID},
		{"tasks", "/ui/tasks"},
		{"task", "/ui/tasks/" + taskID},
		{"audit", "/ui/audit"},
		{"events", "/ui/events"},
	}
	for _, w := range []int64{1400, 800} {
		b.run(t, fmt.Sprintf("a %d px wide window", w), chromedp.EmulateViewport(w, 900))
		for _, p := range pages {
			b.load(t, s.base+p.path)
			if p.name == "events" {
				// A live event with a long subject and queue.
				s.kcat(t, longKey, `{"n":1}`, "redrive.source.topic="+longQueue, "redrive.error.type="+longErrType,
					"redrive.error.message="+longMessage)
				b.run(t, "an event arrives", waitText("#events", "dead_letter.added"))
			}
			var fit struct {
				Page, Window int
				Wide         []string
				Scrolling    []string
			}
			raw := eval[string](t, b, `JSON.stringify((() => {
				const doc = document.documentElement;
				const name = (e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className ? "." + String(e.className).split(" ").join(".") : "");
				// What sticks out past the window, and the tables that would
				// have to be scrolled sideways in their box.
				const wide = [...document.querySelectorAll("body *")].filter((e) => e.getBoundingClientRect().right > innerWidth + 1);
				const scrolling = [...document.querySelectorAll(".tablewrap")].filter((e) => e.scrollWidth > e.clientWidth + 1);
				return {Page: doc.scrollWidth, Window: innerWidth, Wide: wide.slice(0, 5).map(name),
					Scrolling: scrolling.map((e) => name(e.querySelector("table")) + " " + e.scrollWidth + " px in " + e.clientWidth)};
			})())`)
			if err := json.Unmarshal([]byte(raw), &fit); err != nil {
				t.Fatal(err)
			}
			if fit.Page > fit.Window {
				t.Errorf("%s at %d px: the page is %d px wide (sticking out: %s)", p.name, w, fit.Page, strings.Join(fit.Wide, ", "))
			}
			if len(fit.Scrolling) > 0 {
				t.Errorf("%s at %d px: tables to scroll sideways: %s", p.name, w, strings.Join(fit.Scrolling, "; "))
			}
			if strings.HasPrefix(p.name, "records") {
				// The message keeps room to be read: at least 12 characters a line.
				msg := eval[float64](t, b, `(() => { const m = document.querySelector("table.records td.msg"); return m ? m.getBoundingClientRect().width : 0; })()`)
				if msg < 150 {
					t.Errorf("%s at %d px: the message column is %.0f px wide", p.name, w, msg)
				}
			}
			b.screenshot(t, fmt.Sprintf("fit-%s-%d", p.name, w))
		}
	}
}

// send makes a write to the API with a JSON body, and decodes the answer.
func (s *server) send(t testing.TB, method, path string, body, out any) int {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	if body == nil {
		b = nil
	}
	status, raw := s.call(t, method, path, "application/json", b)
	if status >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, status, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %s: %v", method, path, raw, err)
		}
	}
	return status
}
