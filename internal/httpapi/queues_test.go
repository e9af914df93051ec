package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/policy"
)

type queueJSON struct {
	Name       string          `json:"name"`
	State      string          `json:"state"`
	Source     string          `json:"source"`
	DeclaredIn *string         `json:"declared_in"`
	Config     map[string]any  `json:"config"`
	APIConfig  json.RawMessage `json:"api_config"`
	Stats      map[string]int  `json:"stats"`
}

func TestQueuesLayeredOverPolicyFiles(t *testing.T) {
	b := setup(t)
	b.seed(t, rec{queue: "orders", state: dlq.StateRetryable}, rec{queue: "orders"}, rec{queue: "orders", exhaustion: dlq.ExhaustionDiscard})

	byName := itemsBy(t, b, "/ojs/v1/queues", func(x queueJSON) string { return x.Name })
	o, p := byName["orders"], byName["payments"]
	if o.Source != "implicit" || o.State != "active" || o.Stats["depth"] != 1 || o.Stats["retryable"] != 1 ||
		o.Stats["dead_letter"] != 1 || o.Stats["discard"] != 1 || o.Stats["total"] != 3 {
		t.Errorf("orders = %+v", o)
	}
	if p.Source != "file" || p.DeclaredIn == nil || !strings.HasSuffix(*p.DeclaredIn, "topics.yaml") {
		t.Errorf("payments = %+v", p)
	}
	if _, ok := byName["legacy.*"]; ok {
		t.Error("a glob is listed as a queue")
	}

	// Create, then configure, an API topic.
	var q queueJSON
	r := b.send(t, http.MethodPost, "/ojs/v1/queues", map[string]any{"name": "invoices",
		"config": map[string]any{"retry": map[string]any{"max_attempts": 9}, "redelivery": map[string]any{"rate_limit": 5}}}, &q)
	wantStatus(t, r, http.StatusCreated)
	if q.Source != "api" || q.Config["retry"].(map[string]any)["max_attempts"] != float64(9) || r.header.Get("Location") != "/ojs/v1/queues/invoices" {
		t.Errorf("created = %+v", q)
	}
	wantError(t, "create twice", b.send(t, http.MethodPost, "/ojs/v1/queues", map[string]any{"name": "invoices"}, nil), 409, "conflict", "")
	if got := b.app.Queues().Resolve("invoices", "").Retry.MaxAttempts; got != 9 {
		t.Errorf("resolver sees max_attempts %d", got)
	}

	// Files win: topics they declare (by name or glob) are read-only here.
	for _, c := range []req{
		{method: http.MethodPost, path: "/ojs/v1/queues", body: map[string]any{"name": "payments"}},
		{method: http.MethodPut, path: "/ojs/v1/queues/payments/config", body: map[string]any{"max_age": "P1D"}},
		{method: http.MethodPut, path: "/ojs/v1/queues/legacy.eu/config", body: map[string]any{"max_age": "P1D"}},
		{method: http.MethodPost, path: "/ojs/v1/queues/payments/pause"},
		{method: http.MethodDelete, path: "/ojs/v1/queues/payments"},
	} {
		c.key = writeKey
		r := b.do(t, c)
		wantError(t, c.method+" "+c.path, r, 409, "conflict", "")
		if e := r.err(t); !strings.Contains(e.Error.Message, "topics.yaml") {
			t.Errorf("%s %s: 409 does not name the file: %s", c.method, c.path, e.Error.Message)
		}
	}

	// PUT replaces the API layer; invalid configs are 422 naming the field.
	var cfg struct {
		Config    map[string]any  `json:"config"`
		APIConfig json.RawMessage `json:"api_config"`
	}
	wantStatus(t, b.send(t, http.MethodPut, "/ojs/v1/queues/invoices/config",
		map[string]any{"retry": map[string]any{"initial_interval": "PT10S", "max_interval": "PT1M"}, "max_age": "P3D"}, &cfg), http.StatusOK)
	if cfg.Config["max_age"] != "P3D" || strings.Contains(string(cfg.APIConfig), "max_attempts") {
		t.Errorf("after PUT = %+v %s", cfg.Config, cfg.APIConfig)
	}
	bad := []struct {
		body  string
		field string
	}{
		{`{"retry":{"max_attempts":-1}}`, "retry.max_attempts"},
		{`{"max_age":"3 days"}`, "max_age"},
		{`{"retry":{"initial_interval":"PT2H"}}`, ""},
		{`{"state":"sleeping"}`, "state"},
		{`{"colour":"red"}`, "colour"},
		{`{"types":{"x":{}}}`, "types"},
		{`{"redelivery":{"rate_limit":-5}}`, "redelivery.rate_limit"},
	}
	for _, c := range bad {
		r := b.do(t, req{method: http.MethodPut, path: "/ojs/v1/queues/invoices/config", key: writeKey, body: c.body})
		if r.status != 422 && r.status != 400 {
			t.Errorf("PUT %s: %d %s", c.body, r.status, r.body)
			continue
		}
		e := r.err(t)
		if c.field != "" && !strings.Contains(e.Error.Message, c.field) {
			t.Errorf("PUT %s: error does not name %s: %s", c.body, c.field, e.Error.Message)
		}
	}
	wantError(t, "bad name", b.send(t, http.MethodPost, "/ojs/v1/queues", map[string]any{"name": "no spaces"}, nil), 400, "invalid_request", "name")
	wantError(t, "bad config", b.send(t, http.MethodPost, "/ojs/v1/queues", map[string]any{"name": "x1", "config": map[string]any{"max_age": "soon"}}, nil),
		422, "validation_error", "config.max_age")

	// _default: read and set through the API when the files have none.
	wantStatus(t, b.send(t, http.MethodPut, "/ojs/v1/queues/_default/config",
		map[string]any{"dead_letter": map[string]any{"retention": map[string]any{"max_count": 500}}}, nil), http.StatusOK)
	wantStatus(t, b.get(t, "/ojs/v1/queues/_default/config", &cfg), http.StatusOK)
	if cfg.Config["dead_letter"].(map[string]any)["retention"].(map[string]any)["max_count"] != float64(500) {
		t.Errorf("_default = %+v", cfg.Config)
	}
	if got := b.app.Queues().Resolve("orders", "").DeadLetter.Retention.MaxCount; got != 500 {
		t.Errorf("orders inherits max_count %d from the API _default", got)
	}
	var st struct {
		Retention map[string]any `json:"retention"`
	}
	b.get(t, "/ojs/v1/dead-letter/stats", &st)
	if st.Retention["max_count"] != float64(500) {
		t.Errorf("stats retention = %v", st.Retention)
	}

	// Delete: strategy reject while records wait for redelivery.
	wantError(t, "delete busy", b.send(t, http.MethodDelete, "/ojs/v1/queues/orders", nil, nil), 409, "conflict", "")
	wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/queues/invoices", nil, nil), http.StatusOK)
	wantError(t, "get deleted", b.get(t, "/ojs/v1/queues/invoices", nil), 404, "not_found", "")
	wantError(t, "delete again", b.send(t, http.MethodDelete, "/ojs/v1/queues/invoices", nil, nil), 404, "not_found", "")
}

// Pause stops redelivery of a topic, resume starts it again; the scheduler
// reads the state through the same resolver.
func TestPauseAndResumeRedelivery(t *testing.T) {
	b := setup(t)
	var q queueJSON
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues/orders/pause", nil, &q), http.StatusOK)
	if q.State != "paused" || q.Source != "api" || b.app.Queues().Resolve("orders", "").State != policy.TopicPaused {
		t.Fatalf("paused = %+v", q)
	}
	id := b.seed(t, rec{queue: "orders", value: `{"paused":true}`})[0]
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+id+"/retry", nil, nil), http.StatusOK)
	if _, err := b.app.Scheduler().RunOnce(t.Context()); err != nil { // a pass over due records
		t.Fatal(err)
	}
	var r recordJSON
	b.get(t, "/ojs/v1/dead-letter/"+id, &r)
	if r.RedeliveredAt != nil {
		t.Fatalf("a paused topic was redelivered: %+v", r)
	}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues/orders/drain", nil, &q), http.StatusOK)
	if q.State != "draining" {
		t.Errorf("drain = %+v", q)
	}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues/orders/resume", nil, &q), http.StatusOK)
	// A pause does not put the topic under the API for good: resumed, it is
	// back to its files and defaults.
	if q.State != "active" || q.Source != "implicit" {
		t.Errorf("resumed = %+v, want active and implicit", q)
	}
	got := kafkatest.Consume(t, b.brokers, "orders", 1, 30*time.Second)[0]
	if string(got.Value) != `{"paused":true}` {
		t.Errorf("redelivered %q", got.Value)
	}
	wantError(t, "pause _default", b.send(t, http.MethodPost, "/ojs/v1/queues/_default/pause", nil, nil), 400, "invalid_request", "name")
	wantError(t, "unknown queue", b.get(t, "/ojs/v1/queues/nothing-here", nil), 404, "not_found", "")
}
