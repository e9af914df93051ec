package policy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/dlq"
)

// Every new field refuses its mistakes with an error naming the file, the
// field's path and its line, all of them at once.
func TestIngestRulesValidation(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, doc, want string }{
		{"block", "_default:\n  overflow_policy: block\n",
			`p.yaml: _default.overflow_policy: block is not supported: ingest would stop consuming the DLQ partition until the topic has room, and every other topic whose failures share that partition would stall behind it; use reject or drop_oldest (line 2)`},
		{"overflow enum", "topics:\n  orders:\n    overflow_policy: drop_newest\n", `p.yaml: topics.orders.overflow_policy: must be one of reject, drop_oldest, block, got "drop_newest" (line 3)`},
		{"max_size negative", "topics:\n  orders: {max_size: -1}\n", `p.yaml: topics.orders.max_size: must be >= 0 (0: no limit), got -1 (line 2)`},
		{"max_size string", "topics:\n  orders: {max_size: lots}\n", `p.yaml: topics.orders.max_size: must be an integer, got string "lots" (line 2)`},
		{"max_size_bytes negative", "_default: {max_size_bytes: -5}\n", `p.yaml: _default.max_size_bytes: must be >= 0 (0: no limit), got -5 (line 1)`},
		{"max_size per type", "topics:\n  orders:\n    types:\n      t: {max_size: 3}\n", `p.yaml: topics.orders.types.t.max_size: is set per topic, not per type; set it in the topics entry (line 4)`},
		{"allowed empty list", "topics:\n  orders: {allowed_job_types: []}\n", `p.yaml: topics.orders.allowed_job_types: must list at least one type or glob; ["*"] allows every type (line 2)`},
		{"allowed empty item", "topics:\n  orders:\n    allowed_job_types: [a, \"\"]\n", `p.yaml: topics.orders.allowed_job_types[1]: must not be empty (line 3)`},
		{"allowed not a list", "topics:\n  orders: {allowed_job_types: \"*\"}\n", `p.yaml: topics.orders.allowed_job_types: must be a list, got string "*" (line 2)`},
		{"strict in a topic", "topics:\n  orders: {strict_queues: true}\n", `p.yaml: topics.orders.strict_queues: is a _default setting: it says what happens to topics no entry declares, so set it under _default (line 2)`},
		{"strict not a bool", "_default: {strict_queues: yes}\n", `p.yaml: _default.strict_queues: must be a boolean (true or false), got string "yes" (line 1)`},
		{"filter without name", "_default:\n  filters:\n    - {match: {type: t}, action: discard}\n", `p.yaml: _default.filters[0].name: required: every filter needs a name`},
		{"filter bad name", "_default:\n  filters:\n    - {name: \"a b\", match: {type: t}, action: discard}\n", `p.yaml: _default.filters[0].name: must be 1 to 64 letters, digits, '.', '_' or '-', got "a b" (line 3)`},
		{"filter duplicate", "_default:\n  filters:\n    - {name: a, match: {type: t}, action: discard}\n    - {name: a, match: {type: u}, action: discard}\n", `p.yaml: _default.filters[1].name: duplicate filter name "a" (line 4)`},
		{"filter action", "_default:\n  filters:\n    - name: a\n      match: {type: t}\n      action: drop\n", `p.yaml: _default.filters[0].action: must be one of discard, skip_retry, got "drop" (line 5)`},
		{"filter no match", "_default:\n  filters:\n    - {name: a, action: discard}\n", `p.yaml: _default.filters[0]: filter "a" is incomplete: match required, here or in an inherited filter of the same name (line 3)`},
		{"filter no action", "_default:\n  filters:\n    - {name: a, match: {type: t}}\n", `filter "a" is incomplete: action required`},
		{"filter empty match", "_default:\n  filters:\n    - name: a\n      match: {}\n      action: discard\n", `p.yaml: _default.filters[0].match: must set at least one of key_prefix, key_glob, header_present, header_equals, type, payload, source_topic (line 4)`},
		{"filter unknown condition", "_default:\n  filters:\n    - name: a\n      match: {key_prefx: x}\n      action: discard\n", `p.yaml: _default.filters[0].match.key_prefx: unknown field (did you mean key_prefix?) (line 4)`},
		{"filter empty key_prefix", "_default:\n  filters:\n    - {name: a, match: {key_prefix: \"\"}, action: discard}\n", `p.yaml: _default.filters[0].match.key_prefix: must not be empty (line 3)`},
		{"filter header name", "_default:\n  filters:\n    - {name: a, match: {header_equals: {value: x}}, action: discard}\n", `p.yaml: _default.filters[0].match.header_equals.name: required: the header's name`},
		{"filter payload path", "_default:\n  filters:\n    - {name: a, match: {payload: {path: \"a..b\", value: 1}}, action: discard}\n", `p.yaml: _default.filters[0].match.payload.path: "a..b" has an empty key`},
		{"filter payload value missing", "_default:\n  filters:\n    - {name: a, match: {payload: {path: a}}, action: discard}\n", `p.yaml: _default.filters[0].match.payload.value: required: the JSON scalar to compare with`},
		{"filter payload value object", "_default:\n  filters:\n    - {name: a, match: {payload: {path: a, value: {x: 1}}}, action: discard}\n", `p.yaml: _default.filters[0].match.payload.value: must be a JSON scalar (string, number, boolean or null), got a mapping (line 3)`},
		{"filter payload value nan", "_default:\n  filters:\n    - {name: a, match: {payload: {path: a, value: .nan}}, action: discard}\n", `p.yaml: _default.filters[0].match.payload.value: must be a number as JSON writes it (e.g. 42, -1.5, 1e3), got .nan (line 3)`},
		{"filter when_env empty", "_default:\n  filters:\n    - {name: a, match: {type: t}, action: discard, when_env: []}\n", `p.yaml: _default.filters[0].when_env: must list at least one environment (leave when_env out to apply everywhere) (line 3)`},
		{"filter when_env string", "_default:\n  filters:\n    - {name: a, match: {type: t}, action: discard, when_env: production}\n", `p.yaml: _default.filters[0].when_env: must be a list, got string "production" (line 3)`},
		{"filters per type", "topics:\n  orders:\n    types:\n      t:\n        filters: [{name: a, match: {type: t}, action: discard}]\n", `p.yaml: topics.orders.types.t.filters: is set per topic, not per type; set it in the topics entry (line 5)`},
	} {
		_, err := load([]source{{"p.yaml", []byte(tt.doc)}})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v\nwant %s", tt.name, err, tt.want)
		}
	}
}

// Capacity and access are per topic and merge field by field; filters merge
// by name (a topic turns an inherited one off, or changes its action); the
// API may not set filters, nor strict_queues but for _default.
func TestIngestRulesMerge(t *testing.T) {
	t.Parallel()
	set := loadYAML(t, `
_default:
  max_size: 1000
  strict_queues: true
  filters:
    - {name: tests, match: {key_prefix: "test-"}, action: discard, when_env: [production]}
    - {name: manual, match: {header_present: x-manual}, action: skip_retry}
topics:
  "orders.*": {overflow_policy: drop_oldest, allowed_job_types: ["order.*"]}
  orders.eu:
    max_size_bytes: 4096
    filters:
      - {name: tests, enabled: false}
      - {name: manual, action: discard}
`)
	eu := set.Resolve("orders.eu", "order.created")
	if eu.Capacity != (Capacity{MaxSize: 1000, MaxSizeBytes: 4096, Overflow: OverflowDropOldest}) || !eu.StrictQueues ||
		strings.Join(eu.AllowedJobTypes, ",") != "order.*" {
		t.Errorf("orders.eu: %+v %v %v", eu.Capacity, eu.StrictQueues, eu.AllowedJobTypes)
	}
	if len(eu.Filters) != 2 || eu.Filters[0].Enabled || eu.Filters[0].Action != FilterDiscard || *eu.Filters[0].Match.KeyPrefix != "test-" ||
		eu.Filters[1].Action != FilterDiscard || *eu.Filters[1].Match.HeaderPresent != "x-manual" {
		t.Errorf("orders.eu filters: %+v", eu.Filters)
	}
	if !eu.AllowsType("order.created") || eu.AllowsType("user.created") || eu.AllowsType("") {
		t.Error("allowed_job_types globs")
	}
	other := set.Resolve("clicks", "")
	if other.Capacity.Overflow != OverflowReject || !other.AllowsType("") || !other.AllowsType("x") || len(other.Filters) != 2 ||
		!other.Filters[0].Enabled {
		t.Errorf("clicks: %+v", other)
	}
	if !set.Known("orders.eu") || !set.Known("orders.us") || set.Known("clicks") {
		t.Error("Known: a topics entry by name or glob declares a topic")
	}

	// The API: filters never, strict_queues only for _default.
	spec := mustTopicSpec(t, `{"strict_queues":true,"filters":[{"name":"x","match":{"type":"t"},"action":"discard"}]}`)
	if err := spec.CheckAPIConfig(false); err == nil || !strings.Contains(err.Error(), "strict_queues: is a _default setting") ||
		!strings.Contains(err.Error(), "filters: ingest filters are set in policy files only") {
		t.Errorf("CheckAPIConfig: %v", err)
	}
	if err := mustTopicSpec(t, `{"strict_queues":true}`).CheckAPIConfig(true); err != nil {
		t.Errorf("CheckAPIConfig(_default): %v", err)
	}
	// The effective JSON shows every rule and reads back.
	b, _ := json.Marshal(eu)
	for _, want := range []string{`"max_size":1000`, `"max_size_bytes":4096`, `"overflow_policy":"drop_oldest"`, `"allowed_job_types":["order.*"]`,
		`"strict_queues":true`, `{"name":"tests","match":{"key_prefix":"test-"},"action":"discard","when_env":["production"],"enabled":false}`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("JSON %s\nmissing %s", b, want)
		}
	}
}

// A filter matches when every condition it sets holds; payload numbers
// compare by exact decimal value, never through a float64.
func TestFilterMatching(t *testing.T) {
	t.Parallel()
	set := loadYAML(t, `
_default:
  filters:
    - {name: prefix, match: {key_prefix: "test-"}, action: discard}
    - {name: glob, match: {key_glob: "*-smoke-*"}, action: discard}
    - {name: present, match: {header_present: x-test}, action: discard}
    - {name: equals, match: {header_equals: {name: x-env, value: qa}}, action: discard}
    - {name: type, match: {type: "synthetic.*", source_topic: "orders.*"}, action: discard}
    - {name: big, match: {payload: {path: order.id, value: 12345678901234567890}}, action: discard}
    - {name: decimal, match: {payload: {path: amount, value: 1.50}}, action: discard}
    - {name: str, match: {payload: {path: meta.kind, value: "test"}}, action: discard}
    - {name: "null", match: {payload: {path: meta.owner, value: null}}, action: discard}
    - {name: bool, match: {payload: {path: meta.dry_run, value: true}}, action: discard}
`)
	filters := set.Resolve("x", "").Filters
	match := func(f dlq.Failure) []string {
		var out []string
		for i := range filters {
			if filters[i].Matches(&f) {
				out = append(out, filters[i].Name)
			}
		}
		return out
	}
	for _, tt := range []struct {
		name string
		f    dlq.Failure
		want string
	}{
		{"key prefix", dlq.Failure{Key: []byte("test-1")}, "prefix"},
		{"null key", dlq.Failure{Key: nil}, ""},
		{"key glob", dlq.Failure{Key: []byte("eu-smoke-7")}, "glob"},
		{"header present", dlq.Failure{Headers: []dlq.Header{{Key: "x-test", Value: nil}}}, "present"},
		{"header equals", dlq.Failure{Headers: []dlq.Header{{Key: "x-env", Value: []byte("qa")}}}, "equals"},
		{"header differs", dlq.Failure{Headers: []dlq.Header{{Key: "x-env", Value: []byte("prod")}}}, ""},
		{"type and topic", dlq.Failure{Type: "synthetic.ping", Source: dlq.Source{Topic: "orders.eu"}}, "type"},
		{"type, other topic", dlq.Failure{Type: "synthetic.ping", Source: dlq.Source{Topic: "clicks"}}, ""},
		{"big number exact", dlq.Failure{Value: []byte(`{"order":{"id":12345678901234567890}}`)}, "big"},
		// float64 would call these two equal.
		{"big number off by one", dlq.Failure{Value: []byte(`{"order":{"id":12345678901234567891}}`)}, ""},
		{"decimal", dlq.Failure{Value: []byte(`{"amount":1.5}`)}, "decimal"},
		{"decimal exponent", dlq.Failure{Value: []byte(`{"amount":15e-1}`)}, "decimal"},
		{"string, not number", dlq.Failure{Value: []byte(`{"amount":"1.5"}`)}, ""},
		{"string", dlq.Failure{Value: []byte(`{"meta":{"kind":"test"}}`)}, "str"},
		{"null", dlq.Failure{Value: []byte(`{"meta":{"owner":null}}`)}, "null"},
		{"missing is not null", dlq.Failure{Value: []byte(`{"meta":{}}`)}, ""},
		{"bool", dlq.Failure{Value: []byte(`{"meta":{"dry_run":true}}`)}, "bool"},
		{"not JSON", dlq.Failure{Value: []byte(`not json`)}, ""},
		{"object at path", dlq.Failure{Value: []byte(`{"meta":{"kind":{"x":1}}}`)}, ""},
	} {
		if got := strings.Join(match(tt.f), ","); got != tt.want {
			t.Errorf("%s: matched %q, want %q", tt.name, got, tt.want)
		}
	}
}

// when_env globs decide where a filter applies; explain says so.
func TestFilterWhenEnvAndExplain(t *testing.T) {
	t.Parallel()
	set := loadYAML(t, `
_default:
  filters:
    - {name: prod-only, match: {key_prefix: "test-"}, action: discard, when_env: ["prod*"]}
    - {name: everywhere, match: {type: "test.*"}, action: skip_retry}
topics:
  orders: {max_size: 10, overflow_policy: drop_oldest, allowed_job_types: ["order.*"]}
`)
	topic := set.Resolve("orders", "")
	prod, every := &topic.Filters[0], &topic.Filters[1]
	for env, want := range map[string]bool{"production": true, "prod-eu": true, "staging": false, "": false} {
		if prod.AppliesIn(env) != want || !every.AppliesIn(env) {
			t.Errorf("env %q: prod-only applies %v, want %v", env, prod.AppliesIn(env), want)
		}
	}
	var buf bytes.Buffer
	staging := "staging"
	if err := ExplainIn(topic, &staging, &buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"capacity                   max_size 10 records, max_size_bytes no limit, overflow_policy drop_oldest (the oldest retryable records are discarded (overflow) to make room)",
		"allowed_job_types          order.*",
		"filters.prod-only          enabled, discard, when_env prod* (does not apply here: REDRIVE_ENVIRONMENT=staging); match key_prefix \"test-\"",
		"filters.everywhere         enabled, skip_retry, every environment; match type \"test.*\"",
	} {
		// Column widths depend on the longest field name: compare words.
		squeeze := func(s string) string { return strings.Join(strings.Fields(s), " ") }
		if !strings.Contains(squeeze(buf.String()), squeeze(want)) {
			t.Errorf("explain lacks %q:\n%s", want, buf.String())
		}
	}
}
