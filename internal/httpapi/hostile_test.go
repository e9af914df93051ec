package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
)

// Every text query parameter and path segment, given a NUL byte or invalid
// UTF-8, is a 400 naming it, in the error envelope — never a 5xx from
// Postgres refusing the text. key and q match bytes and take anything.
func TestHostileTextIsA400NamingTheParameter(t *testing.T) {
	b := setup(t)
	type call struct {
		method, path, field string
	}
	var calls []call
	for _, bad := range []string{"%00", "a%00b", "%C3%28", "%FF"} {
		for _, p := range []string{"queue", "type", "error_type", "state", "exhaustion", "since", "until", "header", "incident", "cursor"} {
			calls = append(calls, call{"GET", "/ojs/v1/dead-letter?" + p + "=" + bad, p})
		}
		calls = append(calls,
			call{"GET", "/ojs/v1/dead-letter?path=" + bad + "&value=1", "path"},
			call{"GET", "/ojs/v1/dead-letter?path=a&value=" + bad, "value"},
			call{"GET", "/ojs/v1/dead-letter/stats?queue=" + bad, "queue"},
			call{"GET", "/ojs/v1/dead-letter/" + bad, "id"},
			call{"POST", "/ojs/v1/dead-letter/" + bad + "/retry", "id"},
			call{"DELETE", "/ojs/v1/dead-letter/" + bad, "id"},
			call{"GET", "/ojs/v1/dead-letter/replay-rules/" + bad, "name"},
			call{"DELETE", "/ojs/v1/dead-letter/replay-rules/" + bad, "name"},
			call{"GET", "/ojs/v1/tasks?state=" + bad, "state"},
			call{"GET", "/ojs/v1/tasks/" + bad, "id"},
			call{"POST", "/ojs/v1/tasks/" + bad + "/cancel", "id"},
			call{"GET", "/ojs/v1/queues/" + bad, "name"},
			call{"GET", "/ojs/v1/queues/" + bad + "/config", "name"},
			call{"POST", "/ojs/v1/queues/" + bad + "/pause", "name"},
			call{"POST", "/ojs/v1/queues/" + bad + "/resume", "name"},
			call{"POST", "/ojs/v1/queues/" + bad + "/drain", "name"},
			call{"DELETE", "/ojs/v1/queues/" + bad, "name"},
			call{"GET", "/ojs/v1/incidents?queue=" + bad, "queue"},
			call{"GET", "/ojs/v1/incidents?since=" + bad, "since"},
			call{"GET", "/ojs/v1/incidents/" + bad, "id"},
			call{"GET", "/ojs/v1/audit?key_name=" + bad, "key_name"},
			call{"GET", "/ojs/v1/audit?action=" + bad, "action"},
			call{"GET", "/ojs/v1/audit?target=" + bad, "target"},
			call{"GET", "/ojs/v1/events?type=" + bad, "type"},
			call{"GET", "/ojs/v1/events?topic=" + bad, "topic"},
		)
	}
	for _, c := range calls {
		r := b.do(t, req{method: c.method, path: c.path, key: writeKey})
		wantError(t, c.method+" "+c.path, r, http.StatusBadRequest, "invalid_request", c.field)
	}
	// key and q are matched byte for byte: anything goes.
	for _, path := range []string{"/ojs/v1/dead-letter?key=%00%FF", "/ojs/v1/dead-letter?q=a%00b", "/ojs/v1/dead-letter?q=%C3%28"} {
		if r := b.do(t, req{method: "GET", path: path, key: readKey}); r.status != http.StatusOK {
			t.Errorf("GET %s: %d %s, want 200", path, r.status, r.body)
		}
	}
	// A body filter holding NUL is refused the same way.
	r := b.do(t, req{method: "POST", path: "/ojs/v1/dead-letter/retry", key: writeKey, body: `{"filter":{"queue":"a\u0000b"}}`})
	wantError(t, "bulk filter with NUL", r, http.StatusBadRequest, "invalid_request", "filter.queue")
	// Refused write calls still reach the audit log, their path as sent.
	var n int
	if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM redrive_audit WHERE path = $1 AND status = 400`,
		"/ojs/v1/queues/a%00b/pause").Scan(&n); err != nil || n != 1 {
		t.Errorf("audit rows for the refused pause: %d, %v", n, err)
	}
}

// HEAD answers as GET does on every GET route, without a body.
func TestHeadOnGetRoutes(t *testing.T) {
	b := setup(t)
	id := b.seed(t, rec{})[0]
	for _, path := range []string{"/healthz", "/readyz", "/ojs/v1/dead-letter", "/ojs/v1/dead-letter/" + id,
		"/ojs/v1/dead-letter/stats", "/ojs/v1/queues", "/ojs/v1/tasks", "/ojs/v1/incidents", "/ojs/v1/audit", "/ojs/v1/whoami"} {
		req, _ := http.NewRequest(http.MethodHead, b.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+readKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("HEAD %s: %d, want 200", path, resp.StatusCode)
		}
	}
}

// When a listing has no more pages its total is exact — the records the pages
// held — never an estimate or a capped count (a substring search counts at
// most 10,000); offset paging stops at 10,000 and points to the cursor.
func TestLastPageTotalIsExact(t *testing.T) {
	t.Parallel()
	// More dead letters than the default max_count (10000) keeps: the
	// pruner, whenever its pass runs, would trim them to that.
	b := start(t, options{policy: "topics:\n  orders:\n    dead_letter: {retention: {max_count: 0}}\n"})
	const n = 10_050
	var rs []rec
	for i := range n {
		rs = append(rs, rec{value: fmt.Sprintf(`{"n":%d,"word":"needle"}`, i)})
	}
	b.seed(t, rs...)
	var l listJSON
	b.get(t, "/ojs/v1/dead-letter?q=zzzz", &l)
	if len(l.Items) != 0 || l.Pagination.HasMore || l.Pagination.Total != 0 || l.Pagination.TotalEstimated || l.Pagination.TotalCapped {
		t.Errorf("empty search: %+v", l.Pagination)
	}
	seen, cursor := 0, ""
	for {
		path := "/ojs/v1/dead-letter?q=needle&limit=1000"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		l = listJSON{}
		b.get(t, path, &l)
		seen += len(l.Items)
		if !l.Pagination.HasMore {
			break
		}
		cursor = l.Pagination.NextCursor
	}
	if seen != n || l.Pagination.Total != n || l.Pagination.TotalEstimated || l.Pagination.TotalCapped {
		t.Errorf("last page: seen %d, pagination %+v; want an exact total of %d", seen, l.Pagination, n)
	}
	wantError(t, "deep offset", b.get(t, "/ojs/v1/dead-letter?offset=10001", nil), http.StatusBadRequest, "invalid_request", "offset")
}
