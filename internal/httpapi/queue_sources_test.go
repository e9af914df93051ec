package httpapi_test

import (
	"net/http"
	"path/filepath"
	"testing"
)

type sourceJSON struct {
	Layer string `json:"layer"`
	File  string `json:"file"`
	Entry string `json:"entry"`
}

type queueConfigView struct {
	Config struct {
		Retry     map[string]any    `json:"retry"`
		Retention map[string]string `json:"retention"`
	} `json:"config"`
	Sources map[string]sourceJSON `json:"sources"`
}

// GET /queues/{name}/config says where each field comes from: a field set
// in each layer (system default, policy file _default, policy file topic
// entry, API) names that layer; retention.cancelled is refused over the API
// when it is no positive duration, naming it, and nothing is applied.
func TestQueueConfigSources(t *testing.T) {
	t.Parallel()
	b := start(t, options{policy: `_default:
  retention: {cancelled: P3D}
topics:
  payments:
    retry: {max_attempts: 7}
`})
	file := filepath.Join(b.polDir, "topics.yaml")
	wantStatus(t, b.send(t, http.MethodPut, "/ojs/v1/queues/orders/config",
		map[string]any{"retry": map[string]any{"initial_interval": "PT5S"}, "retention": map[string]any{"completed": "P2D"}}, nil), http.StatusOK)

	var orders queueConfigView
	wantStatus(t, b.get(t, "/ojs/v1/queues/orders/config", &orders), http.StatusOK)
	want := map[string]sourceJSON{
		"retry.initial_interval":          {Layer: "api"},
		"retention.completed":             {Layer: "api"},
		"retention.cancelled":             {Layer: "policy file", File: file, Entry: "_default"},
		"retry.max_attempts":              {Layer: "default"},
		"retention.discarded":             {Layer: "default"},
		"replay_rules":                    {Layer: "default"},
		"dead_letter.retention.max_count": {Layer: "default"},
	}
	for path, w := range want {
		if got := orders.Sources[path]; got != w {
			t.Errorf("orders %s from %+v, want %+v", path, got, w)
		}
	}
	if orders.Config.Retention["cancelled"] != "P3D" || orders.Config.Retry["initial_interval"] != "PT5S" {
		t.Errorf("orders config %+v", orders.Config)
	}
	// Every field of the config has a source, and nothing else does.
	var raw struct {
		Config map[string]any `json:"config"`
	}
	wantStatus(t, b.get(t, "/ojs/v1/queues/orders/config", &raw), http.StatusOK)
	fields := leafPaths("", raw.Config)
	if len(fields) != len(orders.Sources) {
		t.Errorf("%d sources for %d fields: %v", len(orders.Sources), len(fields), orders.Sources)
	}
	for _, f := range fields {
		if _, ok := orders.Sources[f]; !ok {
			t.Errorf("field %s has no source", f)
		}
	}

	var payments queueConfigView
	wantStatus(t, b.get(t, "/ojs/v1/queues/payments/config", &payments), http.StatusOK)
	if got := payments.Sources["retry.max_attempts"]; got != (sourceJSON{Layer: "policy file", File: file, Entry: "topics.payments"}) {
		t.Errorf("payments retry.max_attempts from %+v", got)
	}
	var def queueConfigView
	wantStatus(t, b.get(t, "/ojs/v1/queues/_default/config", &def), http.StatusOK)
	if got := def.Sources["retention.cancelled"]; got.Layer != "policy file" || got.Entry != "_default" {
		t.Errorf("_default retention.cancelled from %+v", got)
	}

	for _, bad := range []any{"PT0S", "P400D", "7d", 7, nil} {
		r := b.send(t, http.MethodPut, "/ojs/v1/queues/orders/config",
			map[string]any{"retry": map[string]any{"max_attempts": 9}, "retention": map[string]any{"cancelled": bad}}, nil)
		if r.status != http.StatusUnprocessableEntity && r.status != http.StatusBadRequest {
			t.Errorf("retention.cancelled %v: status %d: %s", bad, r.status, r.body)
			continue
		}
		e := r.err(t)
		if e.Error.Details["parameter"] != "retention.cancelled" {
			t.Errorf("retention.cancelled %v: error names %v: %s", bad, e.Error.Details["parameter"], e.Error.Message)
		}
	}
	wantStatus(t, b.get(t, "/ojs/v1/queues/orders/config", &orders), http.StatusOK)
	if orders.Config.Retry["max_attempts"] != float64(3) || orders.Sources["retry.max_attempts"].Layer != "default" {
		t.Errorf("after the refused PUTs: max_attempts %v from %+v, want nothing applied", orders.Config.Retry["max_attempts"], orders.Sources["retry.max_attempts"])
	}
	// Set over the API, it says so.
	wantStatus(t, b.send(t, http.MethodPut, "/ojs/v1/queues/orders/config",
		map[string]any{"retention": map[string]any{"cancelled": "PT12H"}}, &orders), http.StatusOK)
	if orders.Config.Retention["cancelled"] != "PT12H" || orders.Sources["retention.cancelled"] != (sourceJSON{Layer: "api"}) {
		t.Errorf("after PUT retention.cancelled PT12H: %v from %+v", orders.Config.Retention, orders.Sources["retention.cancelled"])
	}
}

// leafPaths lists the dotted paths of m's leaves (lists are leaves).
func leafPaths(prefix string, m map[string]any) []string {
	var out []string
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			out = append(out, leafPaths(prefix+k+".", sub)...)
			continue
		}
		out = append(out, prefix+k)
	}
	return out
}
