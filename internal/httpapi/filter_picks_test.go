package httpapi_test

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// A header filter is key, key:value or key=value: the key ends at the
// first ':' or '=' and the value is the rest, separators and all; a key
// holding ':' or '=' escapes them with a backslash. The list and the bulk
// filter read it alike.
func TestHeaderFiltersTakeColonOrEquals(t *testing.T) {
	b := setup(t)
	ids := b.seed(t,
		rec{headers: map[string]string{"tenant": "acme"}},
		rec{headers: map[string]string{"tenant": "acme:eu=1"}},
		rec{headers: map[string]string{"trace=id": "7", "a:b": "c"}},
		rec{headers: map[string]string{"tenant": "other"}},
		rec{headers: map[string]string{`back\slash`: "x"}},
	)
	for _, c := range []struct {
		header string
		want   []int
	}{
		{"tenant", []int{0, 1, 3}},
		{"tenant:acme", []int{0}},
		{"tenant=acme", []int{0}},
		{"tenant=acme:eu=1", []int{1}},
		{"tenant:acme:eu=1", []int{1}},
		{`trace\=id=7`, []int{2}},
		{`trace\=id:7`, []int{2}},
		{`trace\=id`, []int{2}},
		{"trace=id", nil}, // the key is "trace"
		{`a\:b=c`, []int{2}},
		{`back\slash`, []int{4}},  // a backslash before anything else is itself
		{`back\\slash`, []int{4}}, // the same key, escaped
		{"tenant=", nil},          // an empty value
	} {
		var l listJSON
		wantStatus(t, b.get(t, "/ojs/v1/dead-letter?header="+url.QueryEscape(c.header), &l), http.StatusOK)
		got, want := l.itemIDs(), pick(ids, c.want)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("header=%s: %d records %v, want %v", c.header, len(got), got, c.want)
		}
		var dry bulkAnswer
		wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/dead-letter", map[string]any{"filter": map[string]any{"header": []string{c.header}}}, &dry), http.StatusOK)
		if dry.WouldAffect != int64(len(want)) {
			t.Errorf("bulk filter header %s: would affect %d, want %d", c.header, dry.WouldAffect, len(want))
		}
	}
	for _, bad := range []string{":x", "=x"} {
		wantError(t, "header="+bad, b.get(t, "/ojs/v1/dead-letter?header="+url.QueryEscape(bad), nil), http.StatusBadRequest, "invalid_request", "header")
	}
}

// A bulk filter's ids pick records (ANDed with the other fields): at most
// 1,000, each a record id; a retry or purge of them touches only them.
func TestBulkOperationsTakePickedIDs(t *testing.T) {
	b := setup(t)
	// Paused: retried records stay available (a redelivery would complete them).
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues/orders/pause", nil, nil), http.StatusOK)
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues/billing/pause", nil, nil), http.StatusOK)
	ids := b.seed(t, rec{}, rec{}, rec{}, rec{}, rec{queue: "billing"})
	var a bulkAnswer
	pick := map[string]any{"ids": []string{ids[0], ids[2], ids[4]}}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry", map[string]any{"filter": pick}, &a), http.StatusOK)
	if a.WouldAffect != 3 {
		t.Errorf("dry run of 3 picked ids: %d", a.WouldAffect)
	}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry",
		map[string]any{"filter": map[string]any{"ids": pick["ids"], "queue": "orders"}}, &a), http.StatusOK)
	if a.WouldAffect != 2 {
		t.Errorf("dry run of 3 picked ids within queue orders: %d, want 2", a.WouldAffect)
	}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry", map[string]any{"filter": pick, "confirm": true}, &a), http.StatusAccepted)
	b.waitTask(t, a.Task.ID, "completed", 30*time.Second)
	if n := b.count(t, "state = 'available' AND id = ANY($1::uuid[])", []string{ids[0], ids[2], ids[4]}); n != 3 {
		t.Errorf("%d of the 3 picked records retried", n)
	}
	if n := b.count(t, "state = 'discarded'"); n != 2 {
		t.Errorf("%d records left discarded, want the 2 not picked", n)
	}
	purge := map[string]any{"filter": map[string]any{"ids": []string{ids[1]}}, "confirm": true}
	wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/dead-letter", purge, &a), http.StatusAccepted)
	b.waitTask(t, a.Task.ID, "completed", 30*time.Second)
	if n := b.count(t, "true"); n != 4 || b.count(t, "id = $1", ids[1]) != 0 {
		t.Errorf("after purging one picked id: %d records, the picked one %d", n, b.count(t, "id = $1", ids[1]))
	}

	many := make([]string, 1001)
	for i := range many {
		many[i] = uuid.NewString()
	}
	for what, f := range map[string]any{
		"1,001 ids":   map[string]any{"ids": many},
		"no ids":      map[string]any{"ids": []string{}},
		"not an id":   map[string]any{"ids": []string{ids[0], "order-17"}},
		"a short one": map[string]any{"ids": []string{strings.ReplaceAll(ids[0], "-", "")}},
	} {
		wantError(t, what, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry", map[string]any{"filter": f}, nil),
			http.StatusBadRequest, "invalid_request", "filter.ids")
	}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry", map[string]any{"filter": map[string]any{"ids": many[:1000]}}, &a), http.StatusOK)
	rule := map[string]any{"name": "picked", "filter": map[string]any{"ids": []string{ids[0]}}, "delay": "PT1H", "max_replays": 1}
	wantError(t, "a replay rule with ids", b.send(t, http.MethodPost, "/ojs/v1/dead-letter/replay-rules", rule, nil),
		http.StatusBadRequest, "invalid_request", "filter.ids")
}

// The error types to pick from: those of the stored records, most records
// first, within a queue or containing a search, bounded by limit.
func TestErrorTypesListsWhatIsStored(t *testing.T) {
	b := setup(t)
	var rs []rec
	for range 3 {
		rs = append(rs, rec{errType: "db.timeout"})
	}
	rs = append(rs, rec{errType: "DB.Refused"}, rec{errType: "db.refused"}, rec{errType: "card.declined", queue: "billing"})
	b.seed(t, rs...)
	type answer struct {
		Items []struct {
			ErrorType string `json:"error_type"`
			Count     int    `json:"count"`
		} `json:"items"`
		Pagination struct {
			Total   int  `json:"total"`
			HasMore bool `json:"has_more"`
		} `json:"pagination"`
	}
	var a answer
	var got string
	show := func() string {
		var parts []string
		for _, it := range a.Items {
			parts = append(parts, it.ErrorType+"="+strconv.Itoa(it.Count))
		}
		return strings.Join(parts, " ")
	}
	for path, want := range map[string]string{
		"":                     "db.timeout=3 DB.Refused=1 card.declined=1 db.refused=1",
		"?queue=billing":       "card.declined=1",
		"?q=REF":               "DB.Refused=1 db.refused=1",
		"?q=refused&queue=nil": "",
		"?limit=2":             "db.timeout=3 DB.Refused=1",
	} {
		wantStatus(t, b.get(t, "/ojs/v1/dead-letter/error-types"+path, &a), http.StatusOK)
		if got = show(); got != want {
			t.Errorf("error-types%s: %q, want %q", path, got, want)
		}
	}
	if wantStatus(t, b.get(t, "/ojs/v1/dead-letter/error-types?limit=2", &a), http.StatusOK); a.Pagination.Total != 4 || !a.Pagination.HasMore {
		t.Errorf("limit=2: pagination %+v, want total 4 and more", a.Pagination)
	}
	wantError(t, "q too long", b.get(t, "/ojs/v1/dead-letter/error-types?q="+strings.Repeat("x", 256), nil), http.StatusBadRequest, "invalid_request", "q")
	wantError(t, "limit 0", b.get(t, "/ojs/v1/dead-letter/error-types?limit=0", nil), http.StatusBadRequest, "invalid_request", "limit")
	wantError(t, "unknown parameter", b.get(t, "/ojs/v1/dead-letter/error-types?state=x", nil), http.StatusBadRequest, "invalid_request", "state")
}
