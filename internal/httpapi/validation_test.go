package httpapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/redrive/redrive/api"
)

// Client mistakes get a 4xx envelope naming the field, never a 5xx.
func TestClientMistakesAre4xxNamingTheField(t *testing.T) {
	b := setup(t)
	id := b.seed(t, rec{})[0]
	big := `{"override":{"value":"` + strings.Repeat("x", 1<<20) + `"}}`
	cases := []struct {
		r      req
		status int
		field  string
	}{
		{req{method: "GET", path: "/ojs/v1/dead-letter?limit=0"}, 400, "limit"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?limit=1001"}, 400, "limit"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?limit=ten"}, 400, "limit"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?offset=-1"}, 400, "offset"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?state=dead"}, 400, "state"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?exhaustion=x"}, 400, "exhaustion"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?since=yesterday"}, 400, "since"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?until=2026-13-01T00:00:00Z"}, 400, "until"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?cursor=" + url.QueryEscape("!!")}, 400, "cursor"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?cursor=bm90LWEtdXVpZA"}, 400, "cursor"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?cursor=x&offset=2"}, 400, "cursor"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?colour=red"}, 400, "colour"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?path=a"}, 400, "value"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?value=1"}, 400, "path"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?header=" + url.QueryEscape(":x")}, 400, "header"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?queue=a&queue=b"}, 400, "queue"},
		{req{method: "GET", path: "/ojs/v1/dead-letter?q=" + strings.Repeat("q", 1025)}, 400, "q"},
		{req{method: "GET", path: "/ojs/v1/dead-letter/not-a-uuid"}, 400, "id"},
		{req{method: "GET", path: "/ojs/v1/tasks?limit=0"}, 400, "limit"},
		{req{method: "GET", path: "/ojs/v1/tasks?cursor=zz"}, 400, "cursor"},
		{req{method: "GET", path: "/ojs/v1/queues/bad%20name"}, 400, "name"},
		{req{method: "POST", path: "/ojs/v1/dead-letter/" + id + "/retry", body: big}, 413, "body"},
		{req{method: "POST", path: "/ojs/v1/dead-letter/" + id + "/retry", body: `{"override":{}}`, rawBody: true,
			header: http.Header{"Content-Type": {"text/plain"}}}, 415, "Content-Type"},
		{req{method: "POST", path: "/ojs/v1/dead-letter/" + id + "/retry", body: `{"overide":{}}`}, 400, "overide"},
		{req{method: "POST", path: "/ojs/v1/dead-letter/" + id + "/retry", body: `{"override":[]}`}, 400, "override"},
		{req{method: "POST", path: "/ojs/v1/queues", body: `{"name":"q","config":{"retry":{"max_interval":"PT1X"}}}`}, 422, "config.retry.max_interval"},
		{req{method: "PUT", path: "/ojs/v1/queues/q/config", body: `"just a string"`}, 400, "body"},
		{req{method: "PUT", path: "/ojs/v1/queues/q/config", body: ``}, 400, "body"},
	}
	for _, c := range cases {
		c.r.key = writeKey
		r := b.do(t, c.r)
		code := map[int]string{400: "invalid_request", 413: "invalid_request", 415: "invalid_request", 422: "validation_error"}[c.status]
		wantError(t, c.r.method+" "+c.r.path[:min(len(c.r.path), 80)], r, c.status, code, c.field)
	}
	// An unknown route and a wrong method are 4xx envelopes too.
	wantError(t, "unknown route", b.do(t, req{method: "GET", path: "/ojs/v1/nope", key: readKey}), 404, "not_found", "")
	wantError(t, "wrong method", b.do(t, req{method: "PATCH", path: "/ojs/v1/dead-letter", key: writeKey}), 405, "invalid_request", "")
}

func TestOpenAPIDocumentIsServed(t *testing.T) {
	b := setup(t)
	r := b.do(t, req{method: "GET", path: "/ojs/v1/openapi.json"})
	wantStatus(t, r, http.StatusOK)
	var doc map[string]any
	r.json(t, &doc)
	if doc["openapi"] != "3.1.0" {
		t.Errorf("openapi = %v", doc["openapi"])
	}
	paths, _ := doc["paths"].(map[string]any)
	for _, p := range []string{"/ojs/v1/dead-letter", "/ojs/v1/dead-letter/{id}/retry", "/ojs/v1/tasks/{id}/cancel",
		"/ojs/v1/queues/{name}/config", "/ojs/v1/audit", "/api/dlq/requeue-all/{queue}"} {
		if paths[p] == nil {
			t.Errorf("document lacks %s", p)
		}
	}
	if !bytes.Contains(api.OpenAPI, []byte("openapi: 3.1.0")) {
		t.Error("embedded document is not OpenAPI 3.1")
	}
	_ = json.Valid
}
