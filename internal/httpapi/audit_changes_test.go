package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

type auditChange struct {
	Action string          `json:"action"`
	Target string          `json:"target"`
	Status int             `json:"status"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// A configuration change is audited with what it changed: a topic's API
// config and a replay rule before and after the call (null where there was
// none). An empty config on a topic no POST created drops its API layer, so
// that the topic says where its policy comes from again.
func TestAuditShowsConfigBeforeAndAfter(t *testing.T) {
	b := setup(t)
	b.seed(t, rec{queue: "orders"})
	put := func(cfg any) {
		t.Helper()
		wantStatus(t, b.send(t, http.MethodPut, "/ojs/v1/queues/orders/config", cfg, nil), http.StatusOK)
	}
	put(map[string]any{"retry": map[string]any{"max_attempts": 2}})
	put(map[string]any{"retry": map[string]any{"max_attempts": 5}})
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues/orders/pause", nil, nil), http.StatusOK)
	wantStatus(t, b.send(t, http.MethodPut, "/ojs/v1/queues/orders/config", map[string]any{"retry": map[string]any{"backoff_strategy": "sometimes"}}, nil), http.StatusUnprocessableEntity)
	put(map[string]any{})
	var q struct {
		Source    string          `json:"source"`
		APIConfig json.RawMessage `json:"api_config"`
	}
	wantStatus(t, b.get(t, "/ojs/v1/queues/orders", &q), http.StatusOK)
	if q.Source != "implicit" || string(q.APIConfig) != "null" {
		t.Errorf("after PUT {}: source %s, api_config %s; want implicit and null (no API layer)", q.Source, q.APIConfig)
	}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues", map[string]any{"name": "invoices", "config": map[string]any{"retry": map[string]any{"max_attempts": 4}}}, nil), http.StatusCreated)
	put2 := b.send(t, http.MethodPut, "/ojs/v1/queues/invoices/config", map[string]any{}, nil)
	wantStatus(t, put2, http.StatusOK)
	wantStatus(t, b.get(t, "/ojs/v1/queues/invoices", &q), http.StatusOK)
	if q.Source != "api" || string(q.APIConfig) != "{}" {
		t.Errorf("a created queue after PUT {}: source %s, api_config %s; want api and {} (it was created: it stays)", q.Source, q.APIConfig)
	}
	wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/queues/invoices", nil, nil), http.StatusOK)
	rule := map[string]any{"name": "nightly", "filter": map[string]any{"queue": "orders"}, "delay": "PT1H", "max_replays": 1}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/replay-rules", rule, nil), http.StatusCreated)
	rule["delay"] = "PT2H"
	wantStatus(t, b.send(t, http.MethodPut, "/ojs/v1/dead-letter/replay-rules/nightly", rule, nil), http.StatusOK)
	wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/dead-letter/replay-rules/nightly", nil, nil), http.StatusOK)

	var log struct {
		Items []auditChange `json:"items"`
	}
	wantStatus(t, b.get(t, "/ojs/v1/audit?limit=50", &log), http.StatusOK)
	var got []string
	for i := len(log.Items) - 1; i >= 0; i-- {
		e := log.Items[i]
		got = append(got, e.Action+" "+e.Target+" "+compact(t, e.Before)+" → "+compact(t, e.After))
	}
	want := []string{
		`queue.config orders null → {"retry":{"max_attempts":2}}`,
		`queue.config orders {"retry":{"max_attempts":2}} → {"retry":{"max_attempts":5}}`,
		`queue.pause orders {"retry":{"max_attempts":5}} → {"retry":{"max_attempts":5},"state":"paused"}`,
		`queue.config orders null → null`, // refused (422): nothing changed
		`queue.config orders {"retry":{"max_attempts":5},"state":"paused"} → null`,
		`queue.create invoices null → {"retry":{"max_attempts":4}}`,
		`queue.config invoices {"retry":{"max_attempts":4}} → {}`,
		`queue.delete invoices {} → null`,
		`replay_rule.create nightly null → {"delay":"PT1H"}`,
		`replay_rule.update nightly {"delay":"PT1H"} → {"delay":"PT2H"}`,
		`replay_rule.delete nightly {"delay":"PT2H"} → null`,
	}
	if len(got) != len(want) {
		t.Fatalf("audit log:\n%s\nwant:\n%s", join(got), join(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("audit entry %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

// compact shows audited JSON briefly: a replay rule by its delay.
func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("audited %s: %v", raw, err)
	}
	if v == nil {
		return "null"
	}
	if d, ok := v["delay"]; ok {
		v = map[string]any{"delay": d}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func join(lines []string) string {
	out := ""
	for _, l := range lines {
		out += "  " + l + "\n"
	}
	return out
}
