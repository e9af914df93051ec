package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// `redrive topics show` prints every field of the effective config with the
// layer it comes from; -o json adds the sources to the topic's JSON.
func TestTopicsShowPrintsSources(t *testing.T) {
	t.Parallel()
	base, pool := cliServer(t)
	seedDiscarded(t, pool, "orders", 2)
	cfg := t.TempDir() + "/cfg.json"
	if err := os.WriteFile(cfg, []byte(`{"retry": {"max_attempts": 6}, "retention": {"cancelled": "P2D"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, err := run(t, base, "topics", "set", "orders", "--file", cfg); err != nil {
		t.Fatalf("topics set: %v\n%s", err, out)
	}
	out, _, err := run(t, base, "topics", "show", "orders")
	if err != nil {
		t.Fatalf("topics show: %v\n%s", err, out)
	}
	for _, want := range []string{
		`(?m)^topic\s+orders$`, `(?m)^config\s+api$`, `(?m)^records\s+0 waiting \(0 retryable, 0 available\), 2 dead letters, 0 discards, 0 cancelled, 0 completed$`,
		`(?m)^FIELD\s+VALUE\s+SOURCE$`, `(?m)^retry\.max_attempts\s+6\s+api$`, `(?m)^retention\.cancelled\s+P2D\s+api$`,
		`(?m)^retention\.discarded\s+P30D\s+default$`, `(?m)^retry\.non_retryable_errors\s+\[\]\s+default$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("topics show: no line %s in\n%s", want, out)
		}
	}
	out, _, err = run(t, base, "topics", "show", "orders", "-o", "json")
	if err != nil {
		t.Fatalf("topics show -o json: %v\n%s", err, out)
	}
	var q struct {
		Name    string                       `json:"name"`
		Sources map[string]map[string]string `json:"sources"`
	}
	if err := json.Unmarshal([]byte(out), &q); err != nil || q.Name != "orders" || q.Sources["retry.max_attempts"]["layer"] != "api" {
		t.Errorf("topics show -o json: %v %+v\n%.400s", err, q, out)
	}
	if out, _, err := run(t, base, "topics", "show", "_default"); err != nil || !strings.Contains(out, "retention.cancelled") {
		t.Errorf("topics show _default: %v\n%s", err, out)
	}
}
