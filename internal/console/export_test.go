package console_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/eventually"
)

// A filtered list offers its records as an export: a link to the export of
// the same filter, fetched with the console's key (a read key will do) and
// saved under the server's file name, holding exactly the matching records
// and the trailer; the page says how many it saved.
func TestAFilteredListExportsItsRecords(t *testing.T) {
	t.Parallel()
	readKey, readDigest, err := auth.Generate()
	if err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(t.TempDir(), "keys.yaml")
	if err := os.WriteFile(keys, fmt.Appendf(nil, "keys:\n  - {name: ops-read, scope: read, sha256: %s}\n", readDigest), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "REDRIVE_AUTH_DISABLED", "false", "REDRIVE_API_KEYS_FILE", keys)
	var recs []dlq.Record
	want := map[string]bool{}
	for i := range 40 {
		queue := []string{"orders", "payments"}[i%2]
		r := failure(queue, fmt.Sprintf("k-%d", i), fmt.Appendf(nil, `{"n":%d,"amount":12345678901234567890.5}`, i), i%4 < 2)
		if queue == "payments" {
			want[r.ID] = true
		}
		recs = append(recs, r)
	}
	s.storeRecords(t, recs)

	b := newBrowser(t)
	dir := b.saveDownloadsIn(t)
	b.run(t, "the payments list with a read key", chromedp.Navigate(s.base+"/ui/records?queue=payments"), chromedp.WaitVisible(chromedp.CSS("#key")),
		setValue("#key", readKey), click("#key-form button"), waitText("#who", "key: ops-read (read)"),
		waitText("#total", "20 matching"), waitText("#export", "Export matching"))
	if href := eval[string](t, b, `document.querySelector("#export").getAttribute("href")`); href != "/ojs/v1/dead-letter/export?queue=payments" {
		t.Errorf("the export links to %q", href)
	}
	b.run(t, "export", click("#export"), waitText("#export-status", "Exported 20 records as redrive-export-"))
	b.screenshots(t, "records-export")
	name := strings.TrimSuffix(strings.SplitN(strings.TrimPrefix(b.text(t, "#export-status"), "Exported 20 records as "), ":", 2)[0], ".")
	var body []byte
	eventually.True(t, "the export "+name+" is saved", func() bool {
		body, err = os.ReadFile(filepath.Join(dir, name))
		return err == nil && strings.HasSuffix(string(body), "}}\n") && strings.Contains(string(body), `{"export":`)
	}, eventually.Within(30*time.Second))
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if len(lines) != 21 || lines[20] != `{"export":{"count":20,"complete":true,"filter":{"queue":"payments"}}}` {
		t.Fatalf("the file holds %d lines, the last %q", len(lines), lines[len(lines)-1])
	}
	for _, l := range lines[:20] {
		var r struct {
			ID    string          `json:"id"`
			Queue string          `json:"queue"`
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil || !want[r.ID] || r.Queue != "payments" || !strings.Contains(string(r.Value), "12345678901234567890.5") {
			t.Errorf("exported line %s (%v): not one of the matching records as stored", l, err)
		}
	}

	// Without a filter, the list exports every record.
	b.run(t, "the whole list", chromedp.Navigate(s.base+"/ui/records"), waitText("#total", "40 matching"), waitText("#export", "Export all"))
	if href := eval[string](t, b, `document.querySelector("#export").getAttribute("href")`); href != "/ojs/v1/dead-letter/export" {
		t.Errorf("the unfiltered export links to %q", href)
	}
}
