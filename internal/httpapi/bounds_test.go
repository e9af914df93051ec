package httpapi_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/task"
)

// A path filter deeper than 32 keys, or any filter field beyond its bound, is
// a 400 naming the field wherever a filter is read: the list, the bulk
// operations, replay rules and stored task filters. A 20,000-key path used
// to reach Postgres and answer 503 ("stack depth limit exceeded").
func TestFilterBoundsAre400NamingTheField(t *testing.T) {
	b := setup(t)
	b.seed(t, rec{})
	deep := strings.Repeat("a.", 19_999) + "a"
	deepQ := url.Values{"path": {deep}, "value": {"1"}}.Encode()

	cases := []struct {
		r     req
		field string
	}{
		{req{method: "GET", path: "/ojs/v1/dead-letter?" + deepQ}, "path"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?" + url.Values{"path": {strings.Repeat("a.", 32) + "a"}, "value": {"1"}}.Encode()}, "path"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?queue=" + strings.Repeat("o", 1025)}, "queue"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?type=" + strings.Repeat("t", 1025)}, "type"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?key=" + strings.Repeat("k", 16<<10+1)}, "key"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?path=a&value=" + strings.Repeat("1", 4097)}, "value"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?header=" + strings.Repeat("h", 4097)}, "header"},
		{req{method: "POST", path: "/ojs/v1/dead-letter/retry", body: map[string]any{"filter": map[string]any{"path": deep, "value": 1}}}, "filter.path"},
		{req{method: "DELETE", path: "/ojs/v1/dead-letter", body: map[string]any{"filter": map[string]any{"path": deep, "value": 1}}}, "filter.path"},
		{req{method: "POST", path: "/ojs/v1/dead-letter/retry", body: map[string]any{"filter": map[string]any{"error_type": strings.Repeat("e", 1025)}}}, "filter.error_type"},
		{req{method: "POST", path: "/ojs/v1/dead-letter/replay-rules", body: map[string]any{"name": "deep",
			"filter": map[string]any{"path": deep, "value": 1}, "delay": "PT1M", "max_replays": 1}}, "filter.path"},
		{req{method: "PUT", path: "/ojs/v1/dead-letter/replay-rules/deep", body: map[string]any{
			"filter": map[string]any{"path": deep, "value": 1}, "delay": "PT1M", "max_replays": 1}}, "filter.path"},
		{req{method: "POST", path: "/ojs/v1/dead-letter/replay-rules", body: map[string]any{"name": "crawl",
			"filter": map[string]any{"queue": "orders"}, "delay": "PT1M", "max_replays": 1, "rate_limit": 1e-9}}, "rate_limit"},
		{req{method: "PUT", path: "/ojs/v1/queues/orders/config", body: map[string]any{"replay_rules": []any{map[string]any{"name": "deep",
			"filter": map[string]any{"path": deep, "value": 1}, "delay": "PT1M", "max_replays": 1}}}}, "replay_rules[0].filter.path"},
	}
	for _, c := range cases {
		c.r.key = writeKey
		r := b.do(t, c.r)
		status, code := http.StatusBadRequest, "invalid_request"
		if strings.HasPrefix(c.field, "replay_rules") {
			status, code = http.StatusUnprocessableEntity, "validation_error"
		}
		wantError(t, c.r.method+" "+c.field, r, status, code, c.field)
	}
	if n := b.count(t, "TRUE"); n != 1 {
		t.Errorf("%d records after refused bulk calls, want the 1 seeded", n)
	}

	// A task filter stored before the bound existed is refused when read back.
	raw, _ := json.Marshal(map[string]any{"path": deep, "value": 1})
	_, _, err := task.Selection(&store.Task{Kind: store.TaskRetry, Filter: raw}, nil)
	var fe *filter.Error
	if !errors.As(err, &fe) || fe.Field != "filter.path" {
		t.Errorf("task.Selection(deep path) = %v, want an error naming filter.path", err)
	}
}
