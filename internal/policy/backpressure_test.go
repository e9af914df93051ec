package policy

import (
	"encoding/json"
	"strings"
	"testing"
)

// A backpressure section refuses its mistakes with an error naming the
// field; the spec's strategies Redrive does not apply (block, drop_oldest)
// and its size bound are refused, not taken silently (backpressure spec
// §5.2, §5.3, §6.1: they are recommended, BP-R001..R003, not required).
func TestBackpressureValidation(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, doc, want string }{
		{"negative depth", "topics:\n  orders:\n    backpressure: {max_depth: -1}\n",
			`p.yaml: topics.orders.backpressure.max_depth: must be >= 0 (0: unbounded), got -1 (line 3)`},
		{"depth not a number", "topics:\n  orders:\n    backpressure: {max_depth: many}\n",
			`p.yaml: topics.orders.backpressure.max_depth: must be an integer, got string "many" (line 3)`},
		{"threshold above 1", "_default:\n  backpressure: {warning_threshold: 1.5}\n",
			`p.yaml: _default.backpressure.warning_threshold: must be a fraction from 0.0 to 1.0, got 1.5 (line 2)`},
		{"block", "_default:\n  backpressure: {strategy: block}\n",
			`p.yaml: _default.backpressure.strategy: block is not supported: Redrive applies reject only (429 QUEUE_FULL with Retry-After) (line 2)`},
		{"drop_oldest", "_default:\n  backpressure: {strategy: drop_oldest}\n",
			`p.yaml: _default.backpressure.strategy: drop_oldest is not supported`},
		{"unknown strategy", "_default:\n  backpressure: {strategy: wait}\n",
			`p.yaml: _default.backpressure.strategy: must be one of reject, block, drop_oldest, got "wait" (line 2)`},
		{"size bound", "_default:\n  backpressure: {max_size_bytes: 1024}\n",
			`p.yaml: _default.backpressure.max_size_bytes: a size bound is not supported: bound the depth with max_depth (0 here: unbounded), got 1024 (line 2)`},
		{"unknown field", "_default:\n  backpressure: {max_dept: 3}\n", `p.yaml: _default.backpressure.max_dept: unknown field`},
		{"per type", "topics:\n  orders:\n    types:\n      t:\n        backpressure: {max_depth: 3}\n",
			`p.yaml: topics.orders.types.t.backpressure: is set per topic, not per type: the bound is on the topic's depth; set it in the topics entry (line 5)`},
	} {
		_, err := load([]source{{"p.yaml", []byte(tt.doc)}})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v\nwant %s", tt.name, err, tt.want)
		}
	}
}

// The default is unbounded, reject, 0.8 (backpressure spec §6.2, §6.3);
// layers merge field by field, and the effective section is written with
// every field, as DecodeTopicSpec reads it back.
func TestBackpressureMergeAndJSON(t *testing.T) {
	t.Parallel()
	if b := DefaultTopic().Backpressure; b.Bounded() || b.Strategy != BackpressureReject || b.WarningThreshold != 0.8 {
		t.Fatalf("default backpressure %+v", b)
	}
	set := loadYAML(t, `
_default:
  backpressure: {max_depth: 100}
topics:
  orders:
    backpressure: {warning_threshold: 0.5}
`)
	got := set.Resolve("orders", "").Backpressure
	if got != (Backpressure{MaxDepth: 100, Strategy: BackpressureReject, WarningThreshold: 0.5}) {
		t.Fatalf("merged backpressure %+v", got)
	}
	api, err := set.Resolve("orders", "").Apply("api", &TopicSpec{Backpressure: &BackpressureSpec{MaxDepth: new(int)}})
	if err != nil || api.Backpressure.MaxDepth != 0 || api.Backpressure.WarningThreshold != 0.5 {
		t.Fatalf("API layer: %+v, %v", api.Backpressure, err)
	}
	b, err := json.Marshal(set.Resolve("orders", ""))
	if err != nil {
		t.Fatal(err)
	}
	var shown struct {
		Backpressure map[string]any `json:"backpressure"`
	}
	if err := json.Unmarshal(b, &shown); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"max_depth": 100.0, "max_size_bytes": 0.0, "strategy": "reject", "warning_threshold": 0.5}
	for k, v := range want {
		if shown.Backpressure[k] != v {
			t.Errorf("backpressure.%s = %v, want %v (%s)", k, shown.Backpressure[k], v, b)
		}
	}
	spec, err := DecodeTopicSpec(b)
	if err != nil {
		t.Fatalf("the effective policy does not read back: %v", err)
	}
	again, err := DefaultTopic().Apply("api", spec)
	if err != nil || again.Backpressure != got {
		t.Fatalf("read back: %+v, %v; want %+v", again.Backpressure, err, got)
	}
}
