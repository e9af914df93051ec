package console_test

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/eventually"
)

// A page's event stream ends when the page is left, even by a full
// navigation (Chromium would otherwise keep the old page, stream and all, in
// its back/forward cache): a browser has six connections to one HTTP/1.1
// server, and six forgotten streams hang every later page on "Loading…".
// Each page that follows events holds exactly its own stream; once it is
// left for a page that follows none, no stream is open.
func TestLeavingAPageClosesItsEventStream(t *testing.T) {
	s := startServer(t)
	b := newBrowser(t)
	for i := range 12 {
		page := []string{"/ui/", "/ui/records", "/ui/events"}[i%3]
		b.load(t, s.base+page)
		waitSubscribers(t, s, 1, fmt.Sprintf("load %d: %s holds its own event stream", i+1, page))
		b.load(t, s.base+"/ui/tasks") // follows no events
		waitSubscribers(t, s, 0, fmt.Sprintf("load %d: the stream of %s closed once it was left", i+1, page))
	}
}

// A hidden tab closes its stream and reopens it when shown, so tabs left in
// the background do not use up the browser's connections. (Headless Chromium
// never hides a tab, so the test sets document.hidden and fires the event
// the browser would.)
func TestAHiddenTabPausesItsEventStream(t *testing.T) {
	s := startServer(t)
	b := newBrowser(t)
	b.load(t, s.base+"/ui/")
	b.run(t, "the overview connects", waitText(".live", "live"))
	waitSubscribers(t, s, 1, "the overview's stream")
	setHidden := func(hidden bool) string {
		return fmt.Sprintf(`Object.defineProperty(document, "hidden", {value: %t, configurable: true});
			document.dispatchEvent(new Event("visibilitychange")); true`, hidden)
	}
	eval[bool](t, b, setHidden(true))
	b.run(t, "the hidden overview pauses", waitText(".live", "paused while hidden"))
	waitSubscribers(t, s, 0, "the hidden overview's stream closed")

	// Shown again, it reconnects and refreshes: a failure stored while it
	// was hidden (its event gone by) appears.
	s.kcat(t, "order-99", `{"order_id":99}`, "redrive.source.topic=orders", "redrive.error.type=db.timeout", "redrive.error.message=timed out")
	s.waitTotal(t, "key=order-99", 1)
	eval[bool](t, b, setHidden(false))
	b.run(t, "the shown overview reconnects", waitText(".live", "live"), waitText("main", "order-99"))
	waitSubscribers(t, s, 1, "the shown overview's stream")
}

// waitSubscribers waits until exactly want event streams are open.
func waitSubscribers(t *testing.T, s *server, want int, what string) {
	t.Helper()
	eventually.Nil(t, what, func() error {
		if n := subscribers(t, s); n != want {
			return fmt.Errorf("%d event streams open, want %d", n, want)
		}
		return nil
	}, eventually.Within(5*time.Second))
}

// subscribers reads the redrive_events_subscribers gauge: the open event
// streams.
func subscribers(t *testing.T, s *server) int {
	t.Helper()
	resp, err := http.Get(s.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "redrive_events_subscribers "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("redrive_events_subscribers %q: %v", v, err)
			}
			return int(n)
		}
	}
	t.Fatal("no redrive_events_subscribers in /metrics")
	return 0
}
