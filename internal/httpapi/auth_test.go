package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/app"
	"github.com/redrive/redrive/internal/config"
	"github.com/redrive/redrive/internal/pgtest"
)

// Every write route: no key and a wrong key are 401, a read key is 403, the
// write key gets through (whatever the handler then says). Read routes: 401
// without a key, 200 with a read key.
func TestAuthMatrix(t *testing.T) {
	b := setup(t)
	ids := b.seed(t, rec{queue: "orders"}, rec{queue: "orders"})
	const missing = "01a20107-bc72-7d07-a136-944382c24f6e"
	writes := []req{
		{method: http.MethodPost, path: "/ojs/v1/dead-letter/" + ids[0] + "/retry"},
		{method: http.MethodDelete, path: "/ojs/v1/dead-letter/" + ids[1]},
		{method: http.MethodPost, path: "/ojs/v1/dead-letter/retry", body: map[string]any{"filter": map[string]any{"queue": "x"}}},
		{method: http.MethodDelete, path: "/ojs/v1/dead-letter", body: map[string]any{"filter": map[string]any{"queue": "x"}}},
		{method: http.MethodPost, path: "/ojs/v1/tasks/" + missing + "/cancel"},
		{method: http.MethodPost, path: "/ojs/v1/queues", body: map[string]any{"name": "authq"}},
		{method: http.MethodPut, path: "/ojs/v1/queues/authq2/config", body: map[string]any{}},
		{method: http.MethodDelete, path: "/ojs/v1/queues/authq3"},
		{method: http.MethodPost, path: "/ojs/v1/queues/authq4/pause"},
		{method: http.MethodPost, path: "/ojs/v1/queues/authq4/resume"},
		{method: http.MethodPost, path: "/ojs/v1/queues/authq4/drain"},
		{method: http.MethodPost, path: "/api/dlq/requeue/dlq:nothing", header: http.Header{}},
		{method: http.MethodPost, path: "/api/dlq/requeue-all/dlq:nothing", header: http.Header{}},
		{method: http.MethodDelete, path: "/api/dlq/dlq:nothing", header: http.Header{}},
	}
	reads := []string{"/ojs/v1/dead-letter", "/ojs/v1/dead-letter/" + ids[0], "/ojs/v1/dead-letter/stats", "/ojs/v1/tasks",
		"/ojs/v1/queues", "/ojs/v1/queues/orders", "/ojs/v1/queues/_default/config", "/ojs/v1/audit", "/ojs/v1/whoami"}
	compat := func(r req) bool { return strings.HasPrefix(r.path, "/api/") }
	withKey := func(r req, key string) req {
		r.header = http.Header{}
		if compat(r) {
			if key != "" {
				r.header.Set("X-API-Key", key)
			}
			return r
		}
		r.key = key
		return r
	}
	for _, w := range writes {
		what := w.method + " " + w.path
		wantError(t, what+" no key", b.do(t, withKey(w, "")), 401, "unauthorized", "")
		wantError(t, what+" wrong key", b.do(t, withKey(w, "rdk_wrong")), 401, "unauthorized", "")
		wantError(t, what+" read key", b.do(t, withKey(w, readKey)), 403, "forbidden", "")
		if r := b.do(t, withKey(w, writeKey)); r.status == 401 || r.status == 403 || r.status >= 500 {
			t.Errorf("%s write key: %d %s", what, r.status, r.body)
		}
	}
	for _, p := range reads {
		wantError(t, p+" no key", b.do(t, req{method: http.MethodGet, path: p}), 401, "unauthorized", "")
		wantStatus(t, b.do(t, req{method: http.MethodGet, path: p, key: readKey}), http.StatusOK)
		// X-API-Key works as well as Bearer.
		wantStatus(t, b.do(t, req{method: http.MethodGet, path: p, header: http.Header{"X-Api-Key": {readKey}}}), http.StatusOK)
	}
	for _, p := range []string{"/api/dlq/stats", "/api/dlq/jobs/dlq:orders"} {
		wantError(t, p+" no key", b.do(t, req{method: http.MethodGet, path: p}), 401, "unauthorized", "")
		wantStatus(t, b.do(t, req{method: http.MethodGet, path: p, header: http.Header{"X-Api-Key": {readKey}}}), http.StatusOK)
		// The compatibility routes take X-API-Key only.
		wantError(t, p+" bearer", b.do(t, req{method: http.MethodGet, path: p, key: readKey}), 401, "unauthorized", "")
	}
	// Keys never travel in the URL, and a malformed Authorization header is 401.
	wantError(t, "query key", b.do(t, req{method: http.MethodGet, path: "/ojs/v1/dead-letter?api_key=" + readKey}), 400, "invalid_request", "api_key")
	wantError(t, "basic auth", b.do(t, req{method: http.MethodGet, path: "/ojs/v1/dead-letter",
		header: http.Header{"Authorization": {"Basic cmVhZDpyZWFk"}}}), 401, "unauthorized", "")
	// Health, readiness and the document need no key.
	for _, p := range []string{"/healthz", "/readyz", "/ojs/v1/openapi.json"} {
		wantStatus(t, b.do(t, req{method: http.MethodGet, path: p}), http.StatusOK)
	}
}

func TestAuditLogRecordsStateChanges(t *testing.T) {
	b := setup(t)
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues/billing/pause", nil, nil), http.StatusOK)
	id := b.seed(t, rec{queue: "billing"})[0]
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+id+"/retry", nil, nil), http.StatusOK)
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry",
		map[string]any{"filter": map[string]any{"queue": "billing", "error_type": "db.timeout"}}, nil), http.StatusOK)
	wantError(t, "forbidden", b.do(t, req{method: http.MethodDelete, path: "/ojs/v1/dead-letter/" + id, key: readKey}), 403, "forbidden", "")
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter", nil), http.StatusOK) // reads are not audited

	type entry struct {
		KeyName string          `json:"key_name"`
		Action  string          `json:"action"`
		Target  string          `json:"target"`
		Filter  json.RawMessage `json:"filter"`
		Count   *int64          `json:"count"`
		Status  int             `json:"status"`
	}
	var out struct {
		Items      []entry `json:"items"`
		Pagination struct {
			Total      int    `json:"total"`
			NextCursor string `json:"next_cursor"`
		} `json:"pagination"`
	}
	wantStatus(t, b.get(t, "/ojs/v1/audit", &out), http.StatusOK)
	if len(out.Items) != 4 || out.Pagination.Total != 4 {
		t.Fatalf("audit = %+v", out.Items)
	}
	del, bulk, retry, pause := out.Items[0], out.Items[1], out.Items[2], out.Items[3]
	if del.Action != "dead_letter.delete" || del.KeyName != "ops-read" || del.Status != 403 || del.Target != id {
		t.Errorf("refused delete = %+v", del)
	}
	if bulk.Action != "dead_letter.bulk_retry" || bulk.KeyName != "ops-write" || bulk.Count == nil || *bulk.Count != 1 || bulk.Target != "dry_run" ||
		!strings.Contains(string(bulk.Filter), `"error_type":"db.timeout"`) {
		t.Errorf("bulk = %+v %s", bulk, bulk.Filter)
	}
	if retry.Action != "dead_letter.retry" || retry.Target != id || retry.Count == nil || *retry.Count != 1 || retry.Status != 200 {
		t.Errorf("retry = %+v", retry)
	}
	if pause.Action != "queue.pause" || pause.Target != "billing" {
		t.Errorf("pause = %+v", pause)
	}
	wantStatus(t, b.get(t, "/ojs/v1/audit?action=dead_letter.retry&key_name=ops-write", &out), http.StatusOK)
	if len(out.Items) != 1 || out.Items[0].Target != id {
		t.Errorf("filtered audit = %+v", out.Items)
	}
	wantStatus(t, b.get(t, "/ojs/v1/audit?limit=3", &out), http.StatusOK)
	if len(out.Items) != 3 || out.Pagination.NextCursor == "" {
		t.Fatalf("audit page = %+v", out)
	}
	wantStatus(t, b.get(t, "/ojs/v1/audit?limit=3&cursor="+out.Pagination.NextCursor, &out), http.StatusOK)
	if len(out.Items) != 1 || out.Items[0].Action != "queue.pause" {
		t.Errorf("audit page 2 = %+v", out.Items)
	}
	wantStatus(t, b.get(t, "/ojs/v1/audit?target=billing&since=2026-01-01T00:00:00Z", &out), http.StatusOK)
	if len(out.Items) != 1 {
		t.Errorf("audit by target = %+v", out.Items)
	}
	wantError(t, "bad cursor", b.get(t, "/ojs/v1/audit?cursor=abc", nil), 400, "invalid_request", "cursor")
	wantError(t, "bad since", b.get(t, "/ojs/v1/audit?since=now", nil), 400, "invalid_request", "since")
}

func TestServeRefusesToStartWithoutKeysUnlessAuthIsDisabled(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(func(k string) (string, bool) {
		v, ok := map[string]string{"REDRIVE_DATABASE_URL": pgtest.URL(t), "REDRIVE_HTTP_ADDR": "127.0.0.1:0", "REDRIVE_POLICIES_DIR": ""}[k]
		return v, ok
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = app.New(context.Background(), app.Options{Config: cfg, Logger: testLogger()})
	if err == nil || !strings.Contains(err.Error(), "REDRIVE_API_KEYS_FILE") || !strings.Contains(err.Error(), "REDRIVE_AUTH_DISABLED") {
		t.Fatalf("app.New without keys = %v", err)
	}
	cfg.APIKeysFile = t.TempDir() + "/missing.yaml"
	if _, err = app.New(context.Background(), app.Options{Config: cfg, Logger: testLogger()}); err == nil {
		t.Fatal("app.New with a missing keys file started")
	}
}
