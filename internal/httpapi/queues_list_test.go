package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/testdate"
)

// listedQueue is what the paging test reads of a listed queue.
type listedQueue struct {
	Name     string         `json:"name"`
	Stats    map[string]int `json:"stats"`
	OldestAt *time.Time     `json:"oldest_at"`
}

type queuePage struct {
	Items      []listedQueue `json:"items"`
	Pagination struct {
		Total      int    `json:"total"`
		Limit      int    `json:"limit"`
		HasMore    bool   `json:"has_more"`
		NextCursor string `json:"next_cursor"`
	} `json:"pagination"`
}

func (p queuePage) names() []string {
	out := make([]string, len(p.Items))
	for i, q := range p.Items {
		out[i] = q.Name
	}
	return out
}

// rawGet is a GET without the OpenAPI check (which would take seconds on a
// page of 1,000 queues); its size and time are returned too.
func (b *bundle) rawGet(t *testing.T, path string, out any) (int, time.Duration) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+readKey)
	start := testdate.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	took := testdate.Since(start)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s %v", path, resp.StatusCode, body, err)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatal(err)
	}
	return len(body), took
}

// GET /queues pages, sorts and searches 20,000 source topics: a page is
// bounded whatever the number of queues, every sort orders as documented,
// q finds queues by part of their name, and a cursor walk returns every
// queue exactly once.
func TestQueueListPagesSortsAndSearches20000Queues(t *testing.T) {
	t.Parallel()
	b := start(t, options{env: map[string]string{"REDRIVE_ARCHIVE_TOPIC": "off"}})
	const n = 20_000
	rs := make([]rec, 0, n+10)
	for i := range n {
		r := rec{queue: fmt.Sprintf("q-%05d", i), state: dlq.StateRetryable}
		if i%2 == 1 {
			r.state = dlq.StateDiscarded
		}
		rs = append(rs, r)
	}
	for range 5 {
		rs = append(rs, rec{queue: "big", state: dlq.StateRetryable})
	}
	for range 3 {
		rs = append(rs, rec{queue: "deadly"})
	}
	rs = append(rs, rec{queue: "ancient", createdAt: testdate.Now().UTC().Add(-240 * time.Hour)})
	b.seed(t, rs...)
	// Every q-NNNNN, big, deadly, ancient and payments (a policy file's).
	const total = n + 4

	// The default page: 50 queues by name, whatever the number of queues.
	var p queuePage
	r := b.get(t, "/ojs/v1/queues", &p)
	wantStatus(t, r, http.StatusOK)
	size, took := b.rawGet(t, "/ojs/v1/queues", &p)
	t.Logf("GET /queues of %d queues: a page of %d in %v, %d bytes", total, len(p.Items), took.Round(time.Millisecond), size)
	if len(p.Items) != 50 || p.Pagination.Total != total || p.Pagination.Limit != 50 || !p.Pagination.HasMore || p.Pagination.NextCursor == "" {
		t.Fatalf("the first page: %d items, pagination %+v; want 50 of %d, more to come", len(p.Items), p.Pagination, total)
	}
	if size > 100_000 {
		t.Errorf("a page of 50 queues is %d bytes, want at most 100 KB", size)
	}
	if got := strings.Join(p.names()[:5], " "); got != "ancient big deadly payments q-00000" {
		t.Errorf("the first page by name starts %s", got)
	}

	// Each sort's first page (checked against the OpenAPI document).
	heads := map[string]string{
		"name":        "ancient big deadly payments q-00000",
		"depth":       "big q-00000 q-00002 q-00004 q-00006",
		"dead_letter": "deadly ancient q-00001 q-00003 q-00005",
		"total":       "big deadly ancient q-00000 q-00001",
		"oldest":      "ancient",
	}
	for sort, want := range heads {
		p = queuePage{}
		wantStatus(t, b.get(t, "/ojs/v1/queues?limit=5&sort="+sort, &p), http.StatusOK)
		if got := strings.Join(p.names(), " "); !strings.HasPrefix(got, want) {
			t.Errorf("sort=%s: the first page is %s, want it to start %s", sort, got, want)
		}
	}

	// q: a case-insensitive substring of the name.
	p = queuePage{}
	wantStatus(t, b.get(t, "/ojs/v1/queues?q=1234", &p), http.StatusOK)
	if got := strings.Join(p.names(), " "); got != "q-01234 q-11234 q-12340 q-12341 q-12342 q-12343 q-12344 q-12345 q-12346 q-12347 q-12348 q-12349" ||
		p.Pagination.Total != 12 || p.Pagination.HasMore {
		t.Errorf("q=1234: %s (%+v)", got, p.Pagination)
	}
	p = queuePage{}
	wantStatus(t, b.get(t, "/ojs/v1/queues?q=Q-1234&sort=depth", &p), http.StatusOK)
	if got := strings.Join(p.names(), " "); got != "q-12340 q-12342 q-12344 q-12346 q-12348 q-12341 q-12343 q-12345 q-12347 q-12349" ||
		p.Pagination.Total != 10 || p.Pagination.HasMore {
		t.Errorf("q=Q-1234&sort=depth: %s (%+v)", got, p.Pagination)
	}
	p = queuePage{}
	wantStatus(t, b.get(t, "/ojs/v1/queues?q=ANC&sort=oldest", &p), http.StatusOK)
	if len(p.Items) != 1 || p.Items[0].Name != "ancient" || p.Items[0].OldestAt == nil {
		t.Errorf("q=ANC: %+v", p.Items)
	}

	// A cursor walk by each sort returns every queue once, in order.
	for _, sort := range []string{"name", "depth", "dead_letter", "total", "oldest"} {
		seen := map[string]bool{}
		var all []listedQueue
		cursor, pages := "", 0
		var slowest time.Duration
		for {
			q := url.Values{"limit": {"1000"}, "sort": {sort}}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			var pg queuePage
			_, took := b.rawGet(t, "/ojs/v1/queues?"+q.Encode(), &pg)
			slowest = max(slowest, took)
			pages++
			for _, it := range pg.Items {
				if seen[it.Name] {
					t.Fatalf("sort=%s: %s listed twice (page %d)", sort, it.Name, pages)
				}
				seen[it.Name] = true
				all = append(all, it)
			}
			if pg.Pagination.Total != total {
				t.Fatalf("sort=%s page %d: total %d, want %d", sort, pages, pg.Pagination.Total, total)
			}
			if !pg.Pagination.HasMore {
				if pg.Pagination.NextCursor != "" {
					t.Errorf("sort=%s: the last page has a next_cursor", sort)
				}
				break
			}
			cursor = pg.Pagination.NextCursor
		}
		t.Logf("sort=%s: %d pages of 1,000, the slowest in %v", sort, pages, slowest.Round(time.Millisecond))
		if len(all) != total || pages != 21 {
			t.Errorf("sort=%s: the walk listed %d queues in %d pages, want %d in 21", sort, len(all), pages, total)
		}
		for i := 1; i < len(all); i++ {
			if !inOrder(sort, all[i-1], all[i]) {
				t.Fatalf("sort=%s: %s (%v) listed before %s (%v)", sort, all[i-1].Name, all[i-1], all[i].Name, all[i])
			}
		}
	}

	// Bad parameters name themselves.
	for _, c := range []struct{ query, field string }{
		{"limit=0", "limit"}, {"limit=1001", "limit"}, {"limit=x", "limit"},
		{"sort=size", "sort"}, {"sort=NAME", "sort"},
		{"q=" + strings.Repeat("a", 250), "q"},
		{"cursor=%21%21", "cursor"}, {"cursor=bm90IGpzb24", "cursor"},
		{"bogus=1", "bogus"},
	} {
		wantError(t, c.query, b.get(t, "/ojs/v1/queues?"+c.query, nil), http.StatusBadRequest, "invalid_request", c.field)
	}
	p = queuePage{}
	wantStatus(t, b.get(t, "/ojs/v1/queues?limit=2&sort=depth", &p), http.StatusOK)
	wantError(t, "a cursor of another sort", b.get(t, "/ojs/v1/queues?sort=total&cursor="+p.Pagination.NextCursor, nil),
		http.StatusBadRequest, "invalid_request", "cursor")
	p = queuePage{}
	wantStatus(t, b.get(t, "/ojs/v1/queues?q="+strings.Repeat("a", 249), &p), http.StatusOK)
	if len(p.Items) != 0 || p.Pagination.Total != 0 || p.Pagination.HasMore {
		t.Errorf("a search matching nothing: %+v", p)
	}
}

// inOrder says whether a may come before b in sort's order.
func inOrder(sort string, a, b listedQueue) bool {
	key := map[string]string{"depth": "depth", "dead_letter": "dead_letter", "total": "total"}[sort]
	switch {
	case key != "":
		if a.Stats[key] != b.Stats[key] {
			return a.Stats[key] > b.Stats[key]
		}
	case sort == "oldest":
		switch {
		case a.OldestAt == nil && b.OldestAt != nil:
			return false
		case a.OldestAt != nil && b.OldestAt == nil:
			return true
		case a.OldestAt != nil && !a.OldestAt.Equal(*b.OldestAt):
			return a.OldestAt.Before(*b.OldestAt)
		}
	}
	return a.Name < b.Name
}
