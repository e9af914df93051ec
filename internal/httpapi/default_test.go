package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// _default names the default layer (OJS queue-config spec §7.1), in the API
// as in policy files. A Kafka topic named _default follows the layer and
// cannot be configured or paused on its own; its records are records like
// any other. The layer's view is the layer's alone: never the policy of a
// glob that matches a topic named _default, nor that topic's records.
func TestDefaultIsTheLayerNotATopic(t *testing.T) {
	t.Parallel()
	b := start(t, options{policy: filePolicy + "  \"*\":\n    retry: {max_attempts: 9}\n"})
	ids := b.seed(t, rec{queue: "_default"}, rec{queue: "_default"}, rec{queue: "orders"})

	type queueView struct {
		Name   string `json:"name"`
		Config struct {
			Retry struct {
				MaxAttempts int `json:"max_attempts"`
			} `json:"retry"`
		} `json:"config"`
		Layers []string `json:"layers"`
		Stats  struct {
			Total int `json:"total"`
		} `json:"stats"`
	}
	var layer, cfg, orders queueView
	wantStatus(t, b.get(t, "/ojs/v1/queues/_default", &layer), http.StatusOK)
	wantStatus(t, b.get(t, "/ojs/v1/queues/_default/config", &cfg), http.StatusOK)
	wantStatus(t, b.get(t, "/ojs/v1/queues/orders", &orders), http.StatusOK)
	if layer.Config.Retry.MaxAttempts != 3 || cfg.Config.Retry.MaxAttempts != 3 || layer.Stats.Total != 0 ||
		strings.Contains(strings.Join(layer.Layers, ","), `"*"`) {
		t.Errorf("the layer shows max_attempts %d (config %d), %d records, layers %v; want the system default 3 and no records",
			layer.Config.Retry.MaxAttempts, cfg.Config.Retry.MaxAttempts, layer.Stats.Total, layer.Layers)
	}
	if orders.Config.Retry.MaxAttempts != 9 {
		t.Errorf("orders follows the glob: max_attempts %d, want 9", orders.Config.Retry.MaxAttempts)
	}

	// A change to the layer applies to the layer; the topic _default is not addressed.
	wantStatus(t, b.send(t, http.MethodPut, "/ojs/v1/queues/_default/config", map[string]any{"retry": map[string]any{"max_attempts": 5}}, nil), http.StatusOK)
	wantStatus(t, b.get(t, "/ojs/v1/queues/_default/config", &cfg), http.StatusOK)
	if cfg.Config.Retry.MaxAttempts != 5 {
		t.Errorf("the layer after PUT: max_attempts %d, want 5", cfg.Config.Retry.MaxAttempts)
	}
	for _, path := range []string{"/ojs/v1/queues/_default/pause", "/ojs/v1/queues/_default/resume", "/ojs/v1/queues/_default/drain"} {
		r := b.send(t, http.MethodPost, path, nil, nil)
		wantError(t, path, r, http.StatusBadRequest, "invalid_request", "name")
		if msg := r.err(t).Error.Message; !strings.Contains(msg, "default layer") || !strings.Contains(msg, "topic named _default") {
			t.Errorf("%s: %q does not explain the layer and the topic", path, msg)
		}
	}
	r := b.send(t, http.MethodPost, "/ojs/v1/queues", map[string]any{"name": "_default", "config": map[string]any{}}, nil)
	wantError(t, "create _default", r, http.StatusBadRequest, "invalid_request", "name")
	if msg := r.err(t).Error.Message; !strings.Contains(msg, "topic named _default") {
		t.Errorf("create _default: %q does not explain the topic", msg)
	}

	// The topic's records: listed, counted and retried like any.
	var l listJSON
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter?queue=_default", &l), http.StatusOK)
	var st struct {
		ByQueue map[string]int `json:"by_queue"`
	}
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter/stats", &st), http.StatusOK)
	if len(l.Items) != 2 || st.ByQueue["_default"] != 2 {
		t.Errorf("records of topic _default: %d listed, %d counted", len(l.Items), st.ByQueue["_default"])
	}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+ids[0]+"/retry", nil, nil), http.StatusOK)
}
