package httpapi_test

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
)

// sortRow is a seeded record's sort keys.
type sortRow struct {
	id        string
	attempt   int
	nextRetry *time.Time
	failedAt  time.Time
}

// Each sort lists every record once, in its order (ties by id), paging
// forward with next_cursor to the end and back with prev_cursor to the
// start; records without a next retry come after those with one, either
// way; the last page's total is exact.
func TestTheListSortsAndPagesBothWays(t *testing.T) {
	b := setup(t)
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues/orders/pause", nil, nil), http.StatusOK)
	var rs []rec
	for i := range 23 {
		r := rec{queue: "orders"}
		if i%3 == 0 {
			r.state = dlq.StateRetryable
		}
		rs = append(rs, r)
	}
	rs = append(rs, rec{queue: "billing"}) // filtered out
	ids := b.seed(t, rs...)[:23]
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rows := make([]sortRow, len(ids))
	for i, id := range ids {
		// Ties on purpose: the id breaks them.
		rows[i] = sortRow{id: id, attempt: 1 + i%4, failedAt: base.Add(time.Duration(i%5) * time.Minute)}
		if i%3 == 0 {
			at := base.Add(time.Duration(10-i%7) * time.Hour)
			rows[i].nextRetry = &at
		}
		if _, err := b.pool.Exec(context.Background(), `WITH d AS (UPDATE redrive_record_data SET failed_at = $3 WHERE id = $1) UPDATE redrive_lifecycle SET attempt = $2, next_retry_at = $4 WHERE id = $1`,
			id, rows[i].attempt, rows[i].failedAt, rows[i].nextRetry); err != nil {
			t.Fatal(err)
		}
	}
	byID := func(a, b sortRow) int { return strings.Compare(a.id, b.id) }
	orders := map[string]func(a, b sortRow) int{
		"created_at": byID,
		"attempt":    func(a, b sortRow) int { return cmp.Or(cmp.Compare(a.attempt, b.attempt), byID(a, b)) },
		"failed_at":  func(a, b sortRow) int { return cmp.Or(a.failedAt.Compare(b.failedAt), byID(a, b)) },
	}
	for name, order := range orders {
		for _, desc := range []bool{false, true} {
			want := slices.Clone(rows)
			slices.SortFunc(want, order)
			if desc {
				slices.Reverse(want)
				name = "-" + name
			}
			checkPaging(t, b, name, idsOf(want))
			name = strings.TrimPrefix(name, "-")
		}
	}
	// next_retry_at: the records with one in its order, then the others by id.
	var with, without []sortRow
	for _, r := range rows {
		if r.nextRetry != nil {
			with = append(with, r)
		} else {
			without = append(without, r)
		}
	}
	byNext := func(a, b sortRow) int { return cmp.Or(a.nextRetry.Compare(*b.nextRetry), byID(a, b)) }
	slices.SortFunc(with, byNext)
	slices.SortFunc(without, byID)
	checkPaging(t, b, "next_retry_at", append(idsOf(with), idsOf(without)...))
	slices.Reverse(with)
	slices.Reverse(without)
	checkPaging(t, b, "-next_retry_at", append(idsOf(with), idsOf(without)...))
}

func idsOf(rows []sortRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.id
	}
	return out
}

type pagedList struct {
	Items      []recordJSON `json:"items"`
	Pagination struct {
		Total      int    `json:"total"`
		HasMore    bool   `json:"has_more"`
		NextCursor string `json:"next_cursor"`
		PrevCursor string `json:"prev_cursor"`
	} `json:"pagination"`
}

// checkPaging pages through queue orders by sort, 5 at a time, forward
// and back, and compares what it saw with want.
func checkPaging(t *testing.T, b *bundle, sort string, want []string) {
	t.Helper()
	page := func(cursor string) pagedList {
		t.Helper()
		q := url.Values{"queue": {"orders"}, "sort": {sort}, "limit": {"5"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var p pagedList
		wantStatus(t, b.get(t, "/ojs/v1/dead-letter?"+q.Encode(), &p), http.StatusOK)
		return p
	}
	var pages []pagedList
	var seen []string
	p := page("")
	if p.Pagination.PrevCursor != "" {
		t.Errorf("sort=%s: the first page has a prev_cursor", sort)
	}
	for {
		pages = append(pages, p)
		for _, r := range p.Items {
			seen = append(seen, r.ID)
		}
		if !p.Pagination.HasMore {
			break
		}
		if len(pages) > 10 {
			t.Fatalf("sort=%s: more pages than records", sort)
		}
		p = page(p.Pagination.NextCursor)
	}
	if !slices.Equal(seen, want) {
		t.Errorf("sort=%s forward:\n got %v\nwant %v", sort, seen, want)
	}
	if last := pages[len(pages)-1]; last.Pagination.Total != len(want) || last.Pagination.NextCursor != "" {
		t.Errorf("sort=%s: the last page says total %d, next_cursor %q; want %d and none", sort, last.Pagination.Total, last.Pagination.NextCursor, len(want))
	}
	// Back from the last page to the first: the same pages, in reverse.
	p = pages[len(pages)-1]
	for i := len(pages) - 2; i >= 0; i-- {
		if p.Pagination.PrevCursor == "" {
			t.Fatalf("sort=%s: page %d has no prev_cursor", sort, i+2)
		}
		p = page(p.Pagination.PrevCursor)
		if got, want := fmt.Sprint(idsOfItems(p.Items)), fmt.Sprint(idsOfItems(pages[i].Items)); got != want {
			t.Errorf("sort=%s: back to page %d:\n got %s\nwant %s", sort, i+1, got, want)
		}
		if !p.Pagination.HasMore || p.Pagination.NextCursor == "" {
			t.Errorf("sort=%s: back on page %d, has_more %t, next_cursor %q", sort, i+1, p.Pagination.HasMore, p.Pagination.NextCursor)
		}
	}
	if p.Pagination.PrevCursor != "" {
		t.Errorf("sort=%s: back on the first page, a prev_cursor", sort)
	}
	// And forward again from a page reached backward.
	if len(pages) > 1 {
		if got := idsOfItems(page(p.Pagination.NextCursor).Items); !slices.Equal(got, idsOfItems(pages[1].Items)) {
			t.Errorf("sort=%s: forward from the first page reached backward: %v, want %v", sort, got, idsOfItems(pages[1].Items))
		}
	}
}

func idsOfItems(items []recordJSON) []string {
	out := make([]string, len(items))
	for i, r := range items {
		out[i] = r.ID
	}
	return out
}

// A sort the list does not offer, a cursor of another sort and offset with
// a sort read in two parts are refused, naming the parameter.
func TestBadSortsAreRefused(t *testing.T) {
	b := setup(t)
	b.seed(t, rec{}, rec{}, rec{})
	for _, s := range []string{"age", "-", "--attempt", "ATTEMPT", "key"} {
		wantError(t, "sort="+s, b.get(t, "/ojs/v1/dead-letter?sort="+url.QueryEscape(s), nil), http.StatusBadRequest, "invalid_request", "sort")
	}
	wantError(t, "sort twice", b.get(t, "/ojs/v1/dead-letter?queue=orders&sort=attempt&sort=-attempt", nil), http.StatusBadRequest, "invalid_request", "sort")
	for _, s := range []string{"attempt", "-attempt", "next_retry_at", "-failed_at"} {
		wantError(t, "sort="+s+" without a queue", b.get(t, "/ojs/v1/dead-letter?error_type=db.timeout&sort="+s, nil), http.StatusBadRequest, "invalid_request", "sort")
	}
	var p pagedList
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter?sort=created_at&error_type=db.timeout&limit=2", &p), http.StatusOK)
	if len(p.Items) != 2 || !p.Pagination.HasMore {
		t.Errorf("sort=created_at across queues: %d items, has_more %t", len(p.Items), p.Pagination.HasMore)
	}
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter?queue=orders&sort=attempt&limit=1", &p), http.StatusOK)
	wantError(t, "an attempt cursor for sort=-attempt", b.get(t, "/ojs/v1/dead-letter?queue=orders&sort=-attempt&cursor="+p.Pagination.NextCursor, nil),
		http.StatusBadRequest, "invalid_request", "cursor")
	wantError(t, "an attempt cursor for the default sort", b.get(t, "/ojs/v1/dead-letter?queue=orders&cursor="+p.Pagination.NextCursor, nil),
		http.StatusBadRequest, "invalid_request", "cursor")
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter?limit=1", &p), http.StatusOK)
	wantError(t, "a default cursor for sort=attempt", b.get(t, "/ojs/v1/dead-letter?queue=orders&sort=attempt&cursor="+p.Pagination.NextCursor, nil),
		http.StatusBadRequest, "invalid_request", "cursor")
	wantError(t, "a cursor that is not one", b.get(t, "/ojs/v1/dead-letter?queue=orders&sort=attempt&cursor=Mnx4", nil),
		http.StatusBadRequest, "invalid_request", "cursor")
	wantError(t, "offset with sort=failed_at", b.get(t, "/ojs/v1/dead-letter?queue=orders&sort=failed_at&offset=1", nil),
		http.StatusBadRequest, "invalid_request", "offset")
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter?queue=orders&sort=-attempt&offset=1", &p), http.StatusOK)
	if len(p.Items) != 2 {
		t.Errorf("sort=-attempt&offset=1: %d items, want 2", len(p.Items))
	}
}
