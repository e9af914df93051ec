package console_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The record list's filter form is the server's key table: every key the
// list takes has a field with the table's label, a select of its choices for
// an enum or a boolean; and the bulk panel sends each key as the API reads
// it, a boolean as a boolean.
func TestTheFilterFormIsTheKeyTable(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	workdayRecords(t, s)
	s.waitTotal(t, "", 85)
	var keys struct {
		Items []struct {
			Name    string   `json:"name"`
			Kind    string   `json:"kind"`
			Enum    []string `json:"enum"`
			Label   string   `json:"label"`
			Sources []string `json:"sources"`
		} `json:"items"`
	}
	if code := s.api(t, http.MethodGet, "/ojs/v1/dead-letter/filter-keys", &keys); code != http.StatusOK || len(keys.Items) == 0 {
		t.Fatalf("filter keys: %d %+v", code, keys)
	}
	b := newBrowser(t)
	b.run(t, "the records list", chromedp.Navigate(s.base+"/ui/records"), waitText("#total", "85 matching"))
	fields := 0
	for _, k := range keys.Items {
		sel := fmt.Sprintf(`form.filters [name=%q]`, k.Name)
		list := strings.Contains(strings.Join(k.Sources, ","), "list")
		if n := b.count(t, sel); n != map[bool]int{true: 1, false: 0}[list] {
			t.Errorf("%s: %d fields, want one for each key the list takes", k.Name, n)
			continue
		}
		if !list {
			continue
		}
		fields++
		if label := b.text(t, fmt.Sprintf(`form.filters label:has([name=%q])`, k.Name)); !strings.HasPrefix(label, k.Label) {
			t.Errorf("%s: label %q, want %q", k.Name, label, k.Label)
		}
		want := k.Enum
		if k.Kind == "bool" {
			want = []string{"true", "false"}
		}
		got := eval[[]string](t, b, fmt.Sprintf(`[...document.querySelectorAll('form.filters select[name=%q] option')].map((o) => o.value).filter(Boolean)`, k.Name))
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: choices %q, want %q", k.Name, got, want)
		}
	}
	if fields < 14 {
		t.Errorf("%d filter fields, want every key the list takes", fields)
	}

	// A boolean filter goes into a bulk dry run as a boolean (it was sent
	// as the text "false", which the API refuses).
	b.run(t, "payments, not unacknowledged", chromedp.Navigate(s.base+"/ui/records?queue=payments&unacknowledged=false"),
		waitText("#total", "10 matching"), click("#bulk-retry"), waitText("#bulk-count", "10 records would be retried"))
}
