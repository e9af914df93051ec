package httpapi_test

import (
	"net/http"
	"testing"
)

// A queue's backpressure bound (OJS backpressure spec §6.2) is set through
// PUT /ojs/v1/queues/{name}/config and its admin alias (§13.1; BP-003),
// validated field by field, kept with the queue's config and shown by GET
// config and the queue's stats (§8: depth and max_depth). The strategies
// Redrive does not apply (block, drop_oldest: §5.2, §5.3) and the size bound
// are refused 422 unsupported, never taken silently.
func TestBackpressureConfig(t *testing.T) {
	b := setup(t)
	type cfg struct {
		Config struct {
			Backpressure map[string]any `json:"backpressure"`
		}
		APIConfig *struct {
			Backpressure map[string]any `json:"backpressure"`
		} `json:"api_config"`
	}
	var got cfg
	wantStatus(t, b.send(t, http.MethodPut, "/ojs/v1/admin/queues/bp-stats/config",
		map[string]any{"backpressure": map[string]any{"max_depth": 10, "strategy": "reject"}}, &got), http.StatusOK)
	want := map[string]any{"max_depth": 10.0, "max_size_bytes": 0.0, "strategy": "reject", "warning_threshold": 0.8}
	check := func(what string, got cfg) {
		t.Helper()
		for k, v := range want {
			if got.Config.Backpressure[k] != v {
				t.Errorf("%s: config.backpressure %v, want %v", what, got.Config.Backpressure, want)
				break
			}
		}
		if got.APIConfig == nil || got.APIConfig.Backpressure["max_depth"] != 10.0 {
			t.Errorf("%s: api_config %+v", what, got.APIConfig)
		}
	}
	check("PUT answer", got)
	wantStatus(t, b.get(t, "/ojs/v1/queues/bp-stats/config", &got), http.StatusOK)
	check("GET config", got)

	for name, tt := range map[string]struct {
		bp          map[string]any
		status      int
		code, field string
	}{
		"block":          {map[string]any{"max_depth": 5, "strategy": "block"}, 422, "unsupported", "backpressure.strategy"},
		"drop_oldest":    {map[string]any{"max_depth": 5, "strategy": "drop_oldest"}, 422, "unsupported", "backpressure.strategy"},
		"size bound":     {map[string]any{"max_size_bytes": 1 << 20}, 422, "unsupported", "backpressure.max_size_bytes"},
		"negative depth": {map[string]any{"max_depth": -1}, 422, "validation_error", "backpressure.max_depth"},
		"threshold":      {map[string]any{"max_depth": 5, "warning_threshold": 1.5}, 422, "validation_error", "backpressure.warning_threshold"},
		"strategy":       {map[string]any{"strategy": "wait"}, 422, "validation_error", "backpressure.strategy"},
		"unknown field":  {map[string]any{"max_dept": 5}, 422, "validation_error", "backpressure.max_dept"},
		"depth a string": {map[string]any{"max_depth": "ten"}, 422, "validation_error", "backpressure.max_depth"},
	} {
		for _, path := range []string{"/ojs/v1/queues/bp-stats/config", "/ojs/v1/admin/queues/bp-stats/config"} {
			r := b.send(t, http.MethodPut, path, map[string]any{"backpressure": tt.bp}, nil)
			wantError(t, name+" "+path, r, tt.status, tt.code, tt.field)
		}
	}
	// Nothing refused was kept.
	wantStatus(t, b.get(t, "/ojs/v1/queues/bp-stats/config", &got), http.StatusOK)
	check("after the refusals", got)

	// The stats say the depth and the bound (§8), and the pressure.
	b.seed(t, rec{queue: "bp-stats", state: "retryable"}, rec{queue: "bp-stats", state: "retryable"}, rec{queue: "bp-stats"})
	var st struct {
		Stats struct {
			Queue    string
			Depth    int64
			MaxDepth *int64   `json:"max_depth"`
			Pressure *float64 `json:"pressure"`
		}
	}
	wantStatus(t, b.get(t, "/ojs/v1/queues/bp-stats/stats", &st), http.StatusOK)
	if st.Stats.Queue != "bp-stats" || st.Stats.Depth != 2 || st.Stats.MaxDepth == nil || *st.Stats.MaxDepth != 10 ||
		st.Stats.Pressure == nil || *st.Stats.Pressure != 0.2 {
		t.Errorf("stats %+v", st.Stats)
	}
}
