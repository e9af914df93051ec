package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/redrive/redrive/internal/dlq"
)

// The queue page says where a topic's policy comes from as it changes: no
// layer of its own, the API once a config is saved, its files and defaults
// again once the config is removed or saved empty; a refused config shows
// each field's error once. The audit log shows what each change changed,
// and the events tail names records by key.
func TestQueuePolicySourceAuditAndEventKeys(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	s.storeRecords(t, []dlq.Record{failure("orders", "order-1", []byte(`{"n":1}`), true)})
	b := newBrowser(t)
	source := func() string {
		var q struct{ Source string }
		s.api(t, "GET", "/ojs/v1/queues/orders", &q)
		return q.Source
	}

	b.run(t, "the queue page", chromedp.Navigate(s.base+"/ui/queues/orders"), waitText("#declared-in", "no policy file or API config of its own"))
	b.run(t, "a refused config", setValue("#config", `{"retry": {"max_attempts": 3, "backoff_strategy": "sometimes", "initial_interval": "soon"}}`),
		click("#config-save"), waitText("#config-errors", "retry.backoff_strategy"))
	errs := b.text(t, "#config-errors")
	for _, field := range []string{"retry.backoff_strategy", "retry.initial_interval"} {
		if n := strings.Count(errs, field); n != 1 {
			t.Errorf("the config errors name %s %d times, want once: %q", field, n, errs)
		}
	}
	b.screenshots(t, "queue-config-errors")
	b.run(t, "save a config", setValue("#config", `{"retry": {"max_attempts": 2}}`), click("#config-save"),
		waitText("#declared-in", "the API (below)"))
	b.run(t, "change it", setValue("#config", `{"retry": {"max_attempts": 5}}`), click("#config-save"),
		waitText("#policy", "retry.max_attempts5"))
	b.run(t, "remove it", click("#config-remove"), waitText("#declared-in", "no policy file or API config of its own"))
	if got := source(); got != "implicit" {
		t.Errorf("after Remove API config the API says source %s", got)
	}
	if b.count(t, "#config-remove") != 0 {
		t.Error("Remove API config is offered with no API config")
	}
	b.run(t, "save one again, then an empty one", setValue("#config", `{"retry": {"max_attempts": 4}}`), click("#config-save"),
		waitText("#declared-in", "the API (below)"), setValue("#config", `{}`), click("#config-save"),
		waitText("#declared-in", "no policy file or API config of its own"))
	if got := source(); got != "implicit" {
		t.Errorf("after saving {} the API says source %s", got)
	}

	// The audit log: each change with its before and after.
	b.run(t, "the audit log", chromedp.Navigate(s.base+"/ui/audit?action=queue.config"),
		waitText("#audit", "queue.config"), until("five config calls", `document.querySelectorAll("#audit tbody tr").length === 5`))
	// Newest first: {} saved (removed), 4 saved (created), 5 (changed from
	// 2), 2 (created), and the refused one, which changed nothing.
	summaries := eval[[]string](t, b, `[...document.querySelectorAll("#audit tbody tr td.change summary")].map((s) => s.textContent)`)
	want := []string{"removed", "created: retry.max_attempts", "retry.max_attempts", "created: retry.max_attempts"}
	if strings.Join(summaries, "|") != strings.Join(want, "|") {
		t.Errorf("the changes say %q, want %q", summaries, want)
	}
	b.run(t, "open the change from 2 to 5", click("#audit tbody tr:nth-child(3) td.change summary"),
		waitText("#audit tbody tr:nth-child(3) td.change ul.fields", "retry.max_attempts: 2 → 5"))
	b.screenshots(t, "audit-change")
	b.run(t, "the removal", chromedp.Navigate(s.base+"/ui/audit?action=queue.delete"), waitText("#audit", "queue.delete"),
		click("#audit td.change summary"), waitText("#audit td.change ul.fields", "retry.max_attempts: 5 → (none)"))

	// The events tail names records by their key.
	b.run(t, "the events page", chromedp.Navigate(s.base+"/ui/events"), waitText(".live", "live"))
	s.kcat(t, "order-4711", `{"n":4711}`, "redrive.source.topic=orders", "redrive.error.type=db.timeout", "redrive.error.message=timed out")
	b.run(t, "the added record, by key", waitText("#events", "dead_letter.added"), waitText("#events", "key order-4711"))
	if href := eval[string](t, b, `document.querySelector("#events a[href^='/ui/records/']").getAttribute("href")`); !strings.HasPrefix(href, "/ui/records/") {
		t.Errorf("the event links to %q, want the record", href)
	}
	b.screenshots(t, "events-keys")
}
