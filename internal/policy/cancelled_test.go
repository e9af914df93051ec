package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// retention.cancelled: decoded, merged layer over layer, and refused when
// it is no positive duration, the error naming the field (file and API).
func TestRetentionCancelled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(`_default:
  retention: {cancelled: P3D}
topics:
  orders:
    retention: {discarded: P9D}
  refunds:
    retention: {cancelled: PT12H}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	set, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Resolve("orders", "").Retention; got != (Retention{Discarded: 9 * day, Completed: 7 * day, Cancelled: 3 * day}) {
		t.Errorf("orders retention = %+v, want cancelled P3D inherited from _default", got)
	}
	if got := set.Resolve("refunds", "").Retention.Cancelled; got != 12*3600e9 {
		t.Errorf("refunds retention.cancelled = %v, want PT12H", got)
	}
	if got := set.Resolve("other", "").Retention.Cancelled; got != 3*day {
		t.Errorf("other retention.cancelled = %v, want P3D", got)
	}

	for _, tc := range []struct{ body, want string }{
		{`{"retention": {"cancelled": "PT0S"}}`, "retention.cancelled: must be greater than zero, got PT0S"},
		{`{"retention": {"cancelled": "P400D"}}`, "retention.cancelled: must be at most P366D"},
		{`{"retention": {"cancelled": "7d"}}`, `retention.cancelled: invalid ISO 8601 duration "7d"`},
		{`{"retention": {"cancelled": 7}}`, "retention.cancelled"},
		{`{"retention": {"canceled": "P1D"}}`, "retention.canceled: unknown field"},
	} {
		_, err := DecodeTopicSpec([]byte(tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DecodeTopicSpec(%s) = %v, want an error containing %q", tc.body, err, tc.want)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte("_default:\n  retention: {cancelled: PT0S}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDir(dir); err == nil || !strings.Contains(err.Error(), "_default.retention.cancelled: must be greater than zero") {
		t.Errorf("LoadDir with cancelled PT0S = %v, want the field named", err)
	}
}
