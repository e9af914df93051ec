package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
)

// The overview's state columns add up to the queue's total, and each count is
// what its link lists: waiting (retryable), available, unacknowledged,
// completed, dead letters and discards. A record page offers a retry of an
// unacknowledged record, and says why a completed one cannot be retried.
func TestOverviewCountsAgreeWithTheirLinks(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	keys := []string{"wait-1", "wait-2", "acking", "unacked", "done-redelivered", "done-acked", "dead", "discard"}
	for _, k := range keys {
		s.kcat(t, k, `{"k":"`+k+`"}`, "redrive.source.topic=orders", "redrive.error.type=db.timeout", "redrive.error.message=timed out")
	}
	s.waitTotal(t, "queue=orders", len(keys))
	ids := map[string]string{}
	for _, k := range keys {
		ids[k] = s.recordID(t, k)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for k, set := range map[string]string{
		// Redelivered under completion: ack, its ack due in an hour.
		"acking": `state = 'available', next_retry_at = NULL, redelivered_at = now(), ack_due_at = now() + interval '1 hour'`,
		// The same, overdue and marked.
		"unacked": `state = 'available', next_retry_at = NULL, redelivered_at = now() - interval '2 hours',
			ack_due_at = now() - interval '1 hour', unacknowledged_at = now() - interval '1 hour'`,
		"done-redelivered": `state = 'completed', next_retry_at = NULL, completed_at = now(), completed_by = 'redelivered'`,
		"done-acked":       `state = 'completed', next_retry_at = NULL, completed_at = now(), completed_by = 'ack'`,
		"dead":             `state = 'discarded', exhaustion = 'dead_letter', next_retry_at = NULL, discarded_at = now()`,
		"discard":          `state = 'discarded', exhaustion = 'discard', next_retry_at = NULL, discarded_at = now()`,
	} {
		if _, err := conn.Exec(ctx, "UPDATE redrive_lifecycle SET "+set+" WHERE id = $1", ids[k]); err != nil {
			t.Fatal(err)
		}
	}

	b := newBrowser(t)
	b.run(t, "the overview", chromedp.Navigate(s.base+"/ui/"), waitText("table.queues", "orders"))
	type cell struct {
		Head, Text, Href string
	}
	cells := eval[[]cell](t, b, `(() => {
		const t = document.querySelector("table.queues");
		const heads = [...t.querySelectorAll("thead th")].map((th) => th.textContent);
		const row = [...t.querySelectorAll("tbody tr")].find((tr) => tr.querySelector("td").textContent === "orders");
		return [...row.querySelectorAll("td")].map((td, i) => ({Head: heads[i], Text: td.textContent,
			Href: td.querySelector("a") ? td.querySelector("a").getAttribute("href") : ""}));
	})()`)
	want := map[string]int{"Waiting": 2, "Available": 1, "Unacked": 1, "Completed": 2, "Dead letters": 1, "Discards": 1}
	counts := map[string]int{}
	var links []cell
	total := -1
	for _, c := range cells {
		var n int
		if _, err := fmt.Sscan(c.Text, &n); err != nil {
			continue
		}
		switch {
		case c.Head == "Total":
			total = n
		case want[c.Head] > 0:
			counts[c.Head] = n
			links = append(links, c)
		}
	}
	sum := 0
	for h, n := range want {
		if counts[h] != n {
			t.Errorf("overview column %s shows %d, want %d (row %+v)", h, counts[h], n, cells)
		}
		sum += counts[h]
	}
	if total != len(keys) || sum != total {
		t.Errorf("the state columns add up to %d, the total is %d, want %d", sum, total, len(keys))
	}
	// Each count is what its link lists.
	for _, c := range links {
		if c.Href == "" {
			t.Errorf("column %s has no link", c.Head)
			continue
		}
		b.run(t, "the records of "+c.Head, chromedp.Navigate(s.base+c.Href), waitText("#total", "matching"))
		if got := b.text(t, "#total"); !strings.HasPrefix(got, fmt.Sprintf("%d matching", counts[c.Head])) {
			t.Errorf("%s: the overview says %d, its link %s lists %q", c.Head, counts[c.Head], c.Href, got)
		}
	}

	// The record pages: an unacknowledged record may be retried; a
	// completed one says why it may not.
	b.run(t, "an unacknowledged record", chromedp.Navigate(s.base+"/ui/records/"+ids["unacked"]),
		waitText("#record-state", "available (unacknowledged)"))
	if eval[bool](t, b, `document.querySelector("#retry-now").disabled`) {
		t.Error("an unacknowledged record cannot be retried from its page")
	}
	b.run(t, "a completed record", chromedp.Navigate(s.base+"/ui/records/"+ids["done-redelivered"]),
		waitText("#record-state", "completed (redelivered)"))
	if title := eval[string](t, b, `document.querySelector("#retry-now").disabled ? document.querySelector("#retry-now").title : ""`); !strings.Contains(title, "completed") {
		t.Errorf("a completed record's retry button: %q", title)
	}
	b.run(t, "retry the unacknowledged record", chromedp.Navigate(s.base+"/ui/records/"+ids["unacked"]),
		waitText("#record-state", "unacknowledged"), click("#retry-now"), waitText("main", "Retried"))
	var r map[string]any
	s.api(t, "GET", "/ojs/v1/dead-letter/"+ids["unacked"], &r)
	if r["unacknowledged_at"] != nil {
		b, _ := json.Marshal(r)
		t.Errorf("after the retry: %s", b)
	}
}
