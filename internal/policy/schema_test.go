package policy

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"
)

func loadSchema(tb testing.TB) map[string]any {
	tb.Helper()
	b, err := os.ReadFile("../../api/policy.schema.json")
	if err != nil {
		tb.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		tb.Fatalf("api/policy.schema.json: %v", err)
	}
	return s
}

func durationPattern(tb testing.TB) *regexp.Regexp {
	s := loadSchema(tb)
	return regexp.MustCompile(s["$defs"].(map[string]any)["duration"].(map[string]any)["pattern"].(string))
}
