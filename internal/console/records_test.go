package console_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/testdate"
)

// workdayRecords stores 70 failures of orders (attempts 1 to 7, next
// retries an hour apart for the retryable ones, failures a minute apart),
// 10 of payments, and 5 of orders stored two hours ago.
func workdayRecords(t *testing.T, s *server) {
	t.Helper()
	now := testdate.Now().UTC().Truncate(time.Millisecond)
	var recs []dlq.Record
	for i := range 70 {
		r := failure("orders", fmt.Sprintf("order-%03d", i), fmt.Appendf(nil, `{"order_id":%d}`, i), i%2 == 0)
		r.Attempt, r.MaxAttempts = 1+i%7, 7
		r.Errors[0].Type = []string{"db.timeout", "http.503", "validation.missing_field"}[i%3]
		r.Errors[0].Message = fmt.Sprintf("failure %d of order %d", r.Attempt, i)
		r.Errors[0].OccurredAt = now.Add(-time.Duration(i) * time.Minute)
		if i%2 == 1 {
			at := now.Add(time.Duration(70-i) * time.Hour)
			r.NextRetryAt = &at
		}
		recs = append(recs, r)
	}
	for i := range 10 {
		r := failure("payments", fmt.Sprintf("pay-%d", i), []byte(`{"amount":1}`), true)
		r.Errors[0].Type = "card.declined"
		recs = append(recs, r)
	}
	for i := range 5 {
		r := failure("orders", fmt.Sprintf("old-%d", i), []byte(`{"old":true}`), true)
		r.CreatedAt = now.Add(-2 * time.Hour)
		r.Errors[0].OccurredAt = r.CreatedAt
		recs = append(recs, r)
	}
	s.storeRecords(t, recs)
}

// sortedBy waits until the list says it is sorted by the column label, in
// direction (its aria-sort).
func sortedBy(label, direction string) chromedp.Action[chromedp.Void] {
	return until("sorted by "+label+", "+direction, fmt.Sprintf(
		`(() => { const th = document.querySelector("table.records th[aria-sort]"); return !!th && th.textContent.startsWith(%q) && th.getAttribute("aria-sort") === %q; })()`,
		label, direction))
}

// cells is the text of column col (1-based, as :nth-child counts) of the
// list's rows.
func cells(t *testing.T, b *browser, col int) []string {
	t.Helper()
	return eval[[]string](t, b, fmt.Sprintf(`[...document.querySelectorAll("table.records tbody tr td:nth-child(%d)")].map((td) => td.textContent.trim())`, col))
}

// An operator's day on the records list: queue and error type picked from
// what the API lists, a time preset, sorting by attempt, next retry and last
// failure, paging forward and back, a header filter written key=value, a
// row retried and one deleted in place, picked rows retried and purged, and
// a purge of everything that waits for the count to be typed.
func TestTheRecordsListForADaysWork(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	workdayRecords(t, s)
	s.kcat(t, "tenant-rec", `{"t":1}`, "redrive.source.topic=payments", "redrive.error.type=card.declined",
		"redrive.error.message=declined", "tenant=acme:eu")
	s.waitTotal(t, "", 86)
	b := newBrowser(t)

	// Pick-lists: the queues and error types the API knows.
	b.run(t, "the records list", chromedp.Navigate(s.base+"/ui/records"), waitText("#total", "86 matching"))
	b.run(t, "queues offered", click(`input[name="queue"]`),
		until("orders and payments offered", `[...document.querySelectorAll("#queue-options option")].map((o) => o.value).join() === "orders,payments"`))
	b.run(t, "queues offered by part of the name", setValue(`input[name="queue"]`, "PAY"),
		until("payments alone", `[...document.querySelectorAll("#queue-options option")].map((o) => o.value).join() === "payments"`))
	b.run(t, "pick orders", setValue(`input[name="queue"]`, "orders"), click(`input[name="error_type"]`),
		until("the error types of orders, most first", `[...document.querySelectorAll("#error-type-options option")].map((o) => o.value).join() === "db.timeout,http.503,validation.missing_field"`))
	if got := eval[string](t, b, `document.querySelector("#error-type-options option").label`); got != "29 records" {
		t.Errorf("db.timeout is offered as %q, want its count (29 records)", got)
	}
	b.run(t, "filter by queue", chromedp.Submit(chromedp.CSS(`form.filters`)), waitURL("queue=orders"), waitText("#total", "75 matching"))

	// A time preset: the last 15 minutes leave out the five stored two hours ago.
	b.run(t, "the last 15 minutes", setValue("#filter-within", "15m"), chromedp.Submit(chromedp.CSS(`form.filters`)),
		waitURL("within=15m"), waitText("#total", "70 matching"))
	b.screenshots(t, "records-day-filtered")

	// Sort by attempt, most first, then fewest; by next retry, soonest first
	// (records without one after); by last failure, latest first.
	b.run(t, "sort by attempt", click(`table.records th a.sort[href*="sort=-attempt"]`), waitURL("sort=-attempt"), sortedBy("Attempt", "descending"),
		until("the most attempts first", `document.querySelector("table.records tbody tr td.num").textContent === "7/7"`))
	b.run(t, "fewest attempts first", click(`table.records th a.sort[href*="sort=attempt"]`), waitURL("sort=attempt"), sortedBy("Attempt", "ascending"),
		until("one attempt first", `document.querySelector("table.records tbody tr td.num").textContent === "1/7"`))
	b.run(t, "sort by next retry", click(`table.records th a.sort[href*="sort=next_retry_at"]`), waitURL("sort=next_retry_at"),
		sortedBy("Next retry", "ascending"), waitText("table.records tbody tr:first-child td.key", "order-069"))
	if keys := cells(t, b, 2); len(keys) != 50 || keys[1] != "order-067" || keys[34] != "order-001" || keys[35] != "order-000" {
		t.Errorf("by next retry, the 35 waiting records (latest number first) then the others: %v", keys)
	}
	b.run(t, "sort by last failure", click(`table.records th a.sort[href*="sort=-failed_at"]`), waitURL("sort=-failed_at"),
		sortedBy("Last failed", "descending"), waitText("table.records tbody tr:first-child td.key", "order-000"))
	if keys := cells(t, b, 2); len(keys) != 50 || keys[1] != "order-001" || keys[49] != "order-049" {
		t.Errorf("by last failure, the first page is %d rows: %v…", len(keys), keys[:min(3, len(keys))])
	}

	// Forward to the second page and back.
	b.run(t, "the next page", click("#page-next"), waitText("table.records tbody tr:first-child td.key", "order-050"))
	if n := b.count(t, "table.records tbody tr"); n != 20 {
		t.Errorf("the second page has %d rows, want 20", n)
	}
	b.run(t, "back to the first", click("#page-prev"), waitText("table.records tbody tr:first-child td.key", "order-000"))
	if b.count(t, "#page-prev") != 0 || b.count(t, "#page-next") != 1 {
		t.Errorf("on the first page again: previous %d, next %d links", b.count(t, "#page-prev"), b.count(t, "#page-next"))
	}
	eval[bool](t, b, `window.scrollTo(0, 0), true`)
	b.screenshots(t, "records-day-sorted")

	// A header filter written key=value, as its label says.
	b.run(t, "a header filter", chromedp.Navigate(s.base+"/ui/records"), waitText("#total", "86 matching"),
		click("details.morefilters summary"), setValue(`input[name="header"]`, "tenant=acme:eu"), chromedp.Submit(chromedp.CSS(`form.filters`)),
		waitURL("header=tenant"), waitText("#total", "1 matching"), waitText("table.records", "tenant-rec"))
	if label := b.text(t, `label:has(input[name="header"])`); !strings.Contains(label, "key=value") || !strings.Contains(label, "key:value") {
		t.Errorf("the header filter's label is %q", label)
	}

	// One row retried and one deleted, in place.
	var rec struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	b.run(t, "the dead letters of payments", chromedp.Navigate(s.base+"/ui/records?queue=payments&state=discarded"), waitText("#total", "10 matching"))
	id := eval[string](t, b, `document.querySelector("table.records tbody tr").dataset.id`)
	b.run(t, "retry the first row", click(`table.records tbody tr:first-child button[title^="Retry"]`),
		waitText("#row-status", "Retried"), waitText("table.records tbody tr:first-child td.state", "available"))
	if s.api(t, "GET", "/ojs/v1/dead-letter/"+id, &rec); rec.State == "discarded" {
		t.Errorf("after Retry the API says %s is still %s", id, rec.State)
	}
	id2 := eval[string](t, b, `document.querySelector("table.records tbody tr:nth-child(2)").dataset.id`)
	b.run(t, "delete the second row", click(`table.records tbody tr:nth-child(2) button.danger`),
		waitText("#row-status", "Deleted"), until("the row is gone", fmt.Sprintf(`!document.querySelector('tr[data-id="%s"]')`, id2)))
	if code := s.api(t, "GET", "/ojs/v1/dead-letter/"+id2, nil); code != http.StatusNotFound {
		t.Errorf("after Delete, GET the record: %d", code)
	}

	// Two rows picked and retried, two more picked and purged.
	b.run(t, "the dead letters again", chromedp.Navigate(s.base+"/ui/records?queue=payments&state=discarded"), waitText("#total", "8 matching"))
	picked := eval[[]string](t, b, `[...document.querySelectorAll("table.records tbody tr")].slice(0, 2).map((tr) => tr.dataset.id)`)
	b.run(t, "pick two", click(`table.records tbody tr:nth-child(1) input.pick`), click(`table.records tbody tr:nth-child(2) input.pick`),
		waitText("#picked-n", "2 records selected"))
	b.run(t, "retry the two", click("#picked-retry"), waitText("#picked-count", "2 records would be retried"))
	eval[bool](t, b, `window.scrollTo(0, 0), true`)
	b.screenshots(t, "records-day-picked")
	b.run(t, "confirm", click("#picked-confirm"), waitURL("/ui/tasks/"), waitText("#task-state", "completed"), waitText("#task-progress", "2 of 2 records"))
	for _, id := range picked {
		if s.api(t, "GET", "/ojs/v1/dead-letter/"+id, &rec); rec.State == "discarded" {
			t.Errorf("picked %s is still %s after the retry", id, rec.State)
		}
	}
	b.run(t, "the dead letters once more", chromedp.Navigate(s.base+"/ui/records?queue=payments&state=discarded"), waitText("#total", "6 matching"))
	b.run(t, "pick every row of the page", click("#pick-all"), waitText("#picked-n", "6 records selected"),
		click(`table.records tbody tr:nth-child(1) input.pick`), waitText("#picked-n", "5 records selected"))
	if !eval[bool](t, b, `document.querySelector("#pick-all").indeterminate`) {
		t.Error("with 5 of 6 rows picked, the header checkbox is not indeterminate")
	}
	b.run(t, "purge the five", click("#picked-purge"), waitText("#picked-count", "5 records would be deleted"),
		click("#picked-confirm"), waitURL("/ui/tasks/"), waitText("#task-state", "completed"))
	s.waitTotal(t, "queue=payments&state=discarded", 1)

	// A purge of a whole queue waits for its name; of everything, for the count.
	b.run(t, "purge all of payments", chromedp.Navigate(s.base+"/ui/records?queue=payments"), waitText("#total", "5 matching"),
		click("#bulk-purge"), waitText("#bulk-count", "5 records would be deleted"), chromedp.WaitVisible(chromedp.CSS("#bulk-typed")))
	if !eval[bool](t, b, `document.querySelector("#bulk-confirm").disabled`) || !strings.Contains(b.text(t, "#bulk"), "type the queue's name, payments") {
		t.Errorf("a purge of a whole queue does not wait for its name: %q", b.text(t, "#bulk"))
	}
	b.run(t, "a wrong name", setValue("#bulk-typed", "orders"))
	if !eval[bool](t, b, `document.querySelector("#bulk-confirm").disabled`) {
		t.Error("the purge is enabled for the wrong queue name")
	}
	b.run(t, "the name", setValue("#bulk-typed", "payments"), until("enabled", `!document.querySelector("#bulk-confirm").disabled`))
	b.run(t, "purge everything", chromedp.Navigate(s.base+"/ui/records"), waitText("#total", "80 matching"),
		click("#bulk-purge"), waitText("#bulk-count", "80 records would be deleted"), chromedp.WaitVisible(chromedp.CSS("#bulk-typed")),
		waitText("#bulk", "No filter"))
	b.screenshots(t, "records-day-purge-all")
	b.run(t, "a wrong count", setValue("#bulk-typed", "79"))
	if !eval[bool](t, b, `document.querySelector("#bulk-confirm").disabled`) {
		t.Error("the purge of everything is enabled for the wrong count")
	}
	b.run(t, "the count", setValue("#bulk-typed", "80"), until("enabled", `!document.querySelector("#bulk-confirm").disabled`),
		click("#bulk-confirm"), waitURL("/ui/tasks/"), waitText("#task-state", "completed"))
	s.waitTotal(t, "", 0)
}
