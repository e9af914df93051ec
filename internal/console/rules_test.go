package console_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// A record an ingest filter turned away says so on its page (the rule's
// error entry, its code and the filter's name), and the record list finds
// the records a rule turned away by their error type.
func TestRecordsTurnedAwayByARuleShowTheReason(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rules := policies + `  filters:
    - {name: drop-test-events, match: {key_prefix: "test-"}, action: discard}
`
	if err := os.WriteFile(filepath.Join(dir, "default.yaml"), []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "REDRIVE_POLICIES_DIR", dir)
	for _, key := range []string{"test-1", "order-1"} {
		s.kcat(t, key, `{"n":1}`, "redrive.source.topic=orders", "redrive.error.type=db.timeout", "redrive.error.message=timed out")
	}
	s.waitTotal(t, "", 2)
	s.waitTotal(t, "error_type=filtered", 1)
	id := s.recordID(t, "test-1")
	b := newBrowser(t)
	for _, width := range []int64{1400, 800} {
		b.run(t, "the record page", chromedp.EmulateViewport(width, 900), chromedp.Navigate(s.base+"/ui/records/"+id),
			waitText("h1", "Record test-1"), waitText("#errors", `ingest filter "drop-test-events" matched (action discard)`),
			waitText("#errors", "FILTERED"), waitText("#errors", "filtered"), waitText("#errors", "db.timeout"))
		b.screenshot(t, fmt.Sprintf("rules-record-%d", width))
		b.run(t, "the list filtered by error type", chromedp.Navigate(s.base+"/ui/records?error_type=filtered"),
			waitText("table.records", "test-1"))
		if n := b.count(t, "table.records tbody tr"); n != 1 {
			t.Errorf("%d records listed for error_type=filtered, want 1", n)
		}
		b.screenshot(t, fmt.Sprintf("rules-list-%d", width))
	}
}
