package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The queue list's row for a Kafka topic named _default leads to the page of
// _default, which the API treats as the default layer: the page says so (and
// that the topic follows the layer), offers no pause, resume or drain (the
// API refuses them for _default), and leads to the topic's records.
func TestTheQueuePageOfDefaultIsTheDefaultLayer(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	s.kcat(t, "default-1", `{"n":1}`, "redrive.source.topic=_default", "redrive.error.type=db.timeout",
		"redrive.error.message=timed out")
	s.waitTotal(t, "queue=_default", 1)
	b := newBrowser(t)

	b.run(t, "the _default row of the queue list",
		chromedp.Navigate(s.base+"/ui/queues"), waitText("table.queues", "_default"),
		click(`table.queues a[href="/ui/queues/_default"]`), waitURL("/ui/queues/_default"),
		waitText("h1", "_default"))
	notice := b.text(t, "#default-layer")
	for _, want := range []string{"default layer that every topic inherits", "A Kafka topic named _default follows it"} {
		if !strings.Contains(notice, want) {
			t.Errorf("the page of _default says %q; want it to say %q", notice, want)
		}
	}
	for _, sel := range []string{"#queue-pause", "#queue-resume", "#queue-drain"} {
		if n := b.count(t, sel); n != 0 {
			t.Errorf("the default layer offers %s, which the API refuses for _default", sel)
		}
	}
	if got, href := b.text(t, "#default-records"), eval[string](t, b, `document.querySelector("#default-records a")?.getAttribute("href") || ""`); !strings.Contains(got, "1 record") || href != "/ui/records?queue=_default" {
		t.Errorf("the records of the topic _default: %q linking to %q, want 1 record at /ui/records?queue=_default", got, href)
	}
	if got := b.text(t, "#policy"); !strings.Contains(got, "retry.max_attempts5") {
		t.Errorf("the default layer's policy shows %q, want the policy file's max_attempts 5", got)
	}
	b.screenshots(t, "queue-default")
}
