package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
)

// setValue sets a form control's value as typing would, firing input and
// change events.
func setValue(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](fmt.Sprintf(`(() => {
			const e = document.querySelector(%q);
			if (!e) throw new Error("no element " + %q);
			e.value = %q;
			e.dispatchEvent(new Event("input", {bubbles: true}));
			e.dispatchEvent(new Event("change", {bubbles: true}));
			return true;
		})()`, sel, sel, value))(ctx, tg)
		return err
	})
}

// waitURL waits until the page's path and query contain want.
func waitURL(want string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for {
			loc, err := chromedp.Location()(ctx, tg)
			if err != nil {
				return err
			}
			if strings.Contains(loc, want) {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("the URL never contained %q; last %s", want, loc)
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
}

type page struct {
	Items      []map[string]any `json:"items"`
	Pagination struct {
		Total int `json:"total"`
	} `json:"pagination"`
}

// waitTotal waits until the API lists want records for query.
func (s *server) waitTotal(t *testing.T, query string, want int) {
	t.Helper()
	var p page
	eventually.True(t, fmt.Sprintf("GET ?%s lists %d records", query, want), func() bool {
		s.api(t, "GET", "/ojs/v1/dead-letter?"+query, &p)
		return p.Pagination.Total == want
	}, eventually.Within(30*time.Second))
}

// The everyday path of an operator, in one browser: a failure dead-lettered
// with kcat shows up live, is found by its error type, opened, and retried
// with an edited value that arrives on its topic; a bulk retry by filter runs
// as a task to the end; a queue is paused and resumed, its config edited and a
// replay rule created; the events and audit pages follow.
func TestOperatorFlows(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	b := newBrowser(t)

	b.run(t, "the overview of an empty DLQ",
		chromedp.Navigate(s.base+"/ui/"), waitText("main", "The DLQ is empty"), waitText(".live", "live"))
	if got := b.text(t, "#banner"); !strings.Contains(got, "AUTH DISABLED") {
		t.Errorf("banner = %q, want the AUTH DISABLED warning", got)
	}
	// The empty overview's kcat command produces to this server's broker
	// (kfake, on a port of its own), not to the README's 127.0.0.1:9092.
	if got, want := b.text(t, "#empty-hint"), "kcat -P -b "+strings.Join(s.brokers, ",")+" -t dead_letter_queue -k order-17"; !strings.Contains(got, want) {
		t.Errorf("empty overview's hint = %q, want it to say %q", got, want)
	}

	// A failure produced with kcat appears, live, on the overview.
	s.kcat(t, "order-17", `{"order_id":17,"amount":42.5,"items":[{"sku":"A-1","qty":2}]}`,
		"redrive.source.topic=orders", "redrive.error.type=db.connection_refused",
		"redrive.error.message=dial tcp 10.0.0.5:5432: connection refused")
	b.run(t, "the overview shows the new failure without a reload", waitText("main", "order-17"), waitText("table.queues", "orders"))
	s.kcat(t, "pay-3", `card 4111 declined`,
		"redrive.source.topic=payments", "redrive.error.type=card.declined",
		"redrive.error.message=card declined: insufficient funds")
	b.run(t, "the second failure arrives too", waitText("main", "pay-3"))
	b.screenshot(t, "overview")

	// Both are in the list; filtering by error type keeps one, in the URL.
	b.run(t, "the records list",
		chromedp.Navigate(s.base+"/ui/records"), waitText("table.records", "order-17"), waitText("table.records", "pay-3"))
	b.run(t, "filter by error type",
		setValue(`input[name="error_type"]`, "card.declined"), chromedp.Submit(chromedp.CSS(`form.filters`)),
		waitURL("error_type=card.declined"), waitText("#total", "1 matching"))
	if n := b.count(t, "table.records tbody tr"); n != 1 || !strings.Contains(b.text(t, "table.records"), "pay-3") {
		t.Errorf("filtered list: %d rows (%q), want only pay-3", n, b.text(t, "table.records"))
	}
	b.screenshot(t, "records")

	// Open the record.
	b.run(t, "open order-17",
		chromedp.Navigate(s.base+"/ui/records?queue=orders"), waitText("table.records", "order-17"),
		click(`table.records td.key a`),
		waitText("h1", "Record order-17"), waitText("#value-tree", `"sku"`), waitText("#errors", "connection refused"),
		waitText(".schedule-table", "PT10M"))
	b.screenshot(t, "record")

	// Retry with an edited value: bad JSON is refused, the review shows the
	// diff and the header, and the edit arrives on the source topic.
	consumer := kafkatest.Client(t, s.brokers, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	b.run(t, "edit the value",
		click("#retry-edit"), chromedp.WaitVisible(chromedp.CSS("#edit-value")),
		setValue("#edit-value", `{"order_id": 17, "amount": 42.5,`), waitText("#edit-value-check", "Not valid JSON"),
		click("#edit-review-button"), waitText("#retry-editor", "value: not valid JSON"),
		setValue("#edit-value", `{"order_id":17,"amount":42.5,"items":[{"sku":"A-1","qty":2}],"fixed":true}`),
		waitText("#edit-value-check", "Valid JSON."),
		click("#edit-add-header"), setValue(".hkey", "x-fixed-by"), setValue(".hval", "ops"),
		click("#edit-review-button"),
		waitText("#edit-review .add mark", `,"fixed":true`), waitText("#edit-review", "x-fixed-by: ops (added)"))
	b.screenshot(t, "retry-edit")
	b.run(t, "confirm the edited retry",
		click("#edit-confirm"), waitText("main", "Retried with your changes"))
	got := consumeKey(t, consumer, "order-17")
	if string(got.Value) != `{"order_id":17,"amount":42.5,"items":[{"sku":"A-1","qty":2}],"fixed":true}` || header(got, "x-fixed-by") != "ops" {
		t.Errorf("redelivered record: value %s, x-fixed-by %q; want the edit", got.Value, header(got, "x-fixed-by"))
	}

	bulkRetry(t, s, b)
	queueFlows(t, s, b)

	// The live events tail and the audit log.
	b.run(t, "the events page", chromedp.Navigate(s.base+"/ui/events"), waitText(".live", "live"))
	s.kcat(t, "order-18", `{"order_id":18}`, "redrive.source.topic=orders", "redrive.error.type=db.connection_refused",
		"redrive.error.message=dial tcp 10.0.0.5:5432: connection refused")
	b.run(t, "a new failure in the events tail", waitText("#events", "dead_letter.added"), waitText("#events", "order"))
	b.run(t, "the audit page", chromedp.Navigate(s.base+"/ui/audit"), waitText("#audit", "queue.pause"), waitText("#audit", "dead_letter.retry"))
	b.run(t, "the incidents page", chromedp.Navigate(s.base+"/ui/incidents"), waitText("main", "dial tcp <ip>:<port>: connection refused"))
}

// bulkRetry retries every record of a filtered view: the dry-run count, the
// confirmation, and the task's progress to done.
func bulkRetry(t *testing.T, s *server, b *browser) {
	t.Helper()
	const n = 300
	producer := kafkatest.Client(t, s.brokers)
	for i := range n {
		producer.Produce(context.Background(), &kgo.Record{Topic: dlqTopic, Key: fmt.Appendf(nil, "sku-%d", i), Value: fmt.Appendf(nil, `{"sku":%d}`, i),
			Headers: []kgo.RecordHeader{{Key: "redrive.source.topic", Value: []byte("orders")},
				{Key: "redrive.error.type", Value: []byte("inventory.timeout")}, {Key: "redrive.error.message", Value: []byte("inventory service timed out after 5s")}}}, nil)
	}
	if err := producer.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.waitTotal(t, "error_type=inventory.timeout", n)
	b.run(t, "dry-run a bulk retry",
		chromedp.Navigate(s.base+"/ui/records?error_type=inventory.timeout"), waitText("#total", "300 matching"),
		click("#bulk-retry"), waitText("#bulk-count", "300 records would be retried"),
		setValue("#bulk-rate", "200"))
	b.screenshot(t, "bulk")
	b.run(t, "confirm: a task runs to the end",
		click("#bulk-confirm"), waitURL("/ui/tasks/"),
		waitText("#task-state", "completed"), waitText("#task-progress", "300 of 300 records (100%)"), waitText("#task-rate", "records/s"))
	b.screenshot(t, "task")
	// The scheduler sends every retried record back to its topic.
	orders := kafkatest.Client(t, s.brokers, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(seen) < n && ctx.Err() == nil {
		orders.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if strings.HasPrefix(string(r.Key), "sku-") {
				seen[string(r.Key)] = true
			}
		})
	}
	if len(seen) != n {
		t.Fatalf("%d of the %d retried records arrived on orders", len(seen), n)
	}
	b.run(t, "the task list", chromedp.Navigate(s.base+"/ui/tasks"), waitText("main", "300/300"))
}

// queueFlows pauses and resumes a queue, edits its config and creates a
// replay rule on its page.
func queueFlows(t *testing.T, s *server, b *browser) {
	t.Helper()
	state := func() string {
		var q struct{ State string }
		s.api(t, "GET", "/ojs/v1/queues/orders", &q)
		return q.State
	}
	b.run(t, "pause the queue",
		chromedp.Navigate(s.base+"/ui/queues/orders"), waitText("#queue-state", "active"),
		click("#queue-pause"), waitText("#queue-state", "paused"))
	if got := state(); got != "paused" {
		t.Errorf("after Pause the API says %q", got)
	}
	b.run(t, "resume it", click("#queue-resume"), waitText("#queue-state", "active"))
	if got := state(); got != "active" {
		t.Errorf("after Resume the API says %q", got)
	}

	b.run(t, "a config the API refuses shows its field errors",
		setValue("#config", `{"retry": {"max_attempts": 3, "backoff_strategy": "sometimes"}}`),
		click("#config-save"), waitText("#config-errors", "retry.backoff_strategy"))
	b.run(t, "a good config is saved",
		setValue("#config", `{"retry": {"max_attempts": 3}}`), click("#config-save"),
		waitText("#policy", "retry.max_attempts3"))

	b.run(t, "a replay rule with a bad delay names the field",
		setValue("#rule-name", "nightly"), setValue("#rule-error_type", "db.connection_refused"), setValue("#rule-delay", "an hour"),
		click("#rule-submit"), waitText("#rule-form", "delay"),
		chromedp.WaitVisible(chromedp.CSS(`#rule-delay[aria-invalid="true"]`)))
	b.run(t, "create the rule",
		setValue("#rule-delay", "PT1H"), click("#rule-submit"),
		waitText(`[data-rule="nightly"]`, "enabled"))
	var rule struct {
		Filter  map[string]string `json:"filter"`
		Delay   string            `json:"delay"`
		Enabled bool              `json:"enabled"`
	}
	if code := s.api(t, "GET", "/ojs/v1/dead-letter/replay-rules/nightly", &rule); code != 200 ||
		rule.Filter["queue"] != "orders" || rule.Filter["error_type"] != "db.connection_refused" || rule.Delay != "PT1H" || !rule.Enabled {
		t.Errorf("GET the rule: %d %+v", code, rule)
	}
	b.screenshot(t, "queue")

	// The rule's row disables it, edits it and deletes it (after a yes).
	row := `[data-rule="nightly"]`
	b.run(t, "disable the rule", click(row+` button:nth-of-type(1)`), waitText(row, "disabled"), waitText(row+` button:nth-of-type(1)`, "Enable"))
	if s.api(t, "GET", "/ojs/v1/dead-letter/replay-rules/nightly", &rule); rule.Enabled {
		t.Error("Disable: the API still has the rule enabled")
	}
	b.run(t, "edit the rule",
		click(row+` button:nth-of-type(2)`), waitText("#rule-submit", "Save rule"),
		setValue("#rule-delay", "PT2H"), click("#rule-submit"), waitText(row, "PT2H"))
	if s.api(t, "GET", "/ojs/v1/dead-letter/replay-rules/nightly", &rule); rule.Delay != "PT2H" || rule.Enabled {
		t.Errorf("after the edit the API has delay %s, enabled %t; want PT2H, still disabled", rule.Delay, rule.Enabled)
	}
	b.run(t, "delete the rule", click(row+` button:nth-of-type(3)`), until("the row is gone", `!document.querySelector('`+row+`')`))
	if code := s.api(t, "GET", "/ojs/v1/dead-letter/replay-rules/nightly", nil); code != http.StatusNotFound {
		t.Errorf("after Delete, GET the rule: %d, want 404", code)
	}

	// Delete a record: after a yes, it is gone and the list of its queue shows.
	b.run(t, "delete pay-3",
		chromedp.Navigate(s.base+"/ui/records?queue=payments"), click(`table.records td.key a`), waitText("h1", "Record pay-3"),
		click("#delete"), waitURL("/ui/records?queue=payments"), until("pay-3 is gone", `!document.querySelector("table.records")?.textContent.includes("pay-3")`))
	s.waitTotal(t, "queue=payments", 0)

	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.dialogs) != 2 || b.dialogs[0] != "Delete replay rule nightly?" || !strings.HasPrefix(b.dialogs[1], "Delete record ") {
		t.Errorf("confirmation dialogs %q, want one for the rule and one for the record", b.dialogs)
	}
}

func consumeKey(t *testing.T, cl *kgo.Client, key string) *kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("no record with key %s on the topic", key)
		}
		for _, r := range fs.Records() {
			if string(r.Key) == key {
				return r
			}
		}
	}
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
