package console_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/redrive/redrive/internal/app"
	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/testdate"
)

// A canary task shows its phase and its sample's outcomes; an incident is
// marked "resolved, redrive when quiet" from its page, shows the request
// waiting, and withdraws it.
func TestCanaryTaskAndRedriveWhenQuiet(t *testing.T) {
	t.Parallel()
	// The watch never ends by itself: the clock stays where the test set it.
	s := startServerWith(t, app.Options{Clock: clock.NewPinned(testdate.Now().UTC())})
	for i := range 30 {
		s.kcat(t, fmt.Sprintf("order-%d", i), fmt.Sprintf(`{"order_id":%d}`, i), "redrive.source.topic=orders",
			"redrive.error.type=db.connection_refused", fmt.Sprintf("redrive.error.message=dial tcp 10.0.0.%d:5432: connection refused", i))
	}
	var incidents struct {
		Items []struct {
			ID    string `json:"id"`
			Count int    `json:"count"`
		} `json:"items"`
	}
	eventually.True(t, "the incident", func() bool {
		s.api(t, "GET", "/ojs/v1/incidents", &incidents)
		return len(incidents.Items) == 1 && incidents.Items[0].Count == 30
	}, eventually.Within(30*time.Second))
	incident := incidents.Items[0].ID
	var created struct {
		Task struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	s.send(t, "POST", "/ojs/v1/dead-letter/retry", map[string]any{"filter": map[string]any{"incident": incident}, "confirm": true,
		"canary": map[string]any{"sample": "20%", "watch": "PT10M", "abort_if_refail": 0.5}}, &created)

	b := newBrowser(t)
	for _, w := range []int64{1400, 800} {
		b.run(t, fmt.Sprintf("a %d px wide window", w), chromedp.EmulateViewport(w, 900))
		b.load(t, s.base+"/ui/tasks/"+created.Task.ID)
		// Nothing consumes orders: the sample completes by its redelivery.
		b.run(t, "the watch", waitText("#task-canary-phase", "watching the sample"),
			waitText("#task-canary-report", "Completed6 (100%)"))
		if got := b.text(t, "#task-canary"); !strings.Contains(got, "Sample of 6 records (asked: \"20%\"), watched PT10M once redelivered; aborts when 50% of it fails again the same way.") {
			t.Errorf("canary: %q", got)
		}
		b.screenshot(t, fmt.Sprintf("task-canary-%d", w))
	}
	b.load(t, s.base+"/ui/tasks")
	if got := b.text(t, "table"); !strings.Contains(got, "retry (canary: watch)") {
		t.Errorf("tasks list: %q", got)
	}

	path := "/ui/incidents/" + url.PathEscape(incident)
	b.run(t, "800 px", chromedp.EmulateViewport(800, 900))
	b.load(t, s.base+path)
	b.run(t, "mark it resolved", setValue("#quiet-for", "PT30M"), setValue("#quiet-sample", "5%"), click("#quiet-mark"),
		waitText("#quiet-state", "Waiting: no failure of it may arrive for PT30M"))
	b.screenshot(t, "incident-quiet-800")
	var in struct {
		RedriveWhenQuiet *struct {
			State  string `json:"state"`
			Quiet  string `json:"quiet"`
			Canary struct {
				Sample        string  `json:"sample"`
				Watch         string  `json:"watch"`
				AbortIfRefail float64 `json:"abort_if_refail"`
			} `json:"canary"`
		} `json:"redrive_when_quiet"`
	}
	s.api(t, "GET", "/ojs/v1/incidents/"+incident, &in)
	if q := in.RedriveWhenQuiet; q == nil || q.State != "waiting" || q.Quiet != "PT30M" || q.Canary.Sample != "5%" ||
		q.Canary.Watch != "PT10M" || q.Canary.AbortIfRefail != 0.1 {
		t.Fatalf("request: %+v", in.RedriveWhenQuiet)
	}
	b.run(t, "1400 px", chromedp.EmulateViewport(1400, 900))
	b.load(t, s.base+path)
	b.run(t, "the request shows", waitText("#quiet-state", "Waiting"))
	b.screenshot(t, "incident-quiet-1400")
	b.run(t, "withdraw it", click("#quiet-withdraw"), until("the form is back", `!!document.querySelector("#quiet-mark")`))
	in.RedriveWhenQuiet = nil
	s.api(t, "GET", "/ojs/v1/incidents/"+incident, &in)
	if in.RedriveWhenQuiet != nil {
		t.Fatalf("withdrawn, still %+v", in.RedriveWhenQuiet)
	}
	b.load(t, s.base+path)
	b.screenshot(t, "incident-quiet-form-1400")
}
