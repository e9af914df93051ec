package dlq

import (
	"strings"
	"testing"
)

func TestFilterFieldProblemBoundsPathDepthAndSizes(t *testing.T) {
	for _, c := range []struct {
		name, value, want string
	}{
		{"path", "customer.id", ""},
		{"path", strings.Repeat("a.", 31) + "a", ""},
		{"path", strings.Repeat("a.", 32) + "a", "at most 32 dot-separated keys, got 33"},
		{"path", strings.Repeat("a.", 19999) + "a", "at most 32 dot-separated keys, got 20000"},
		{"path", strings.Repeat(strings.Repeat("k", 40)+".", 31) + "k", "at most 1024 bytes"},
		{"path", "a..b", "without empty segments"},
		{"q", strings.Repeat("q", 1024), ""},
		{"q", strings.Repeat("q", 1025), "at most 1024 bytes, got 1025"},
		{"queue", strings.Repeat("o", 5000), "at most 1024 bytes"},
		{"key", strings.Repeat("k", 16<<10+1), "at most 16384 bytes"},
		{"value", strings.Repeat("v", 4097), "at most 4096 bytes"},
		{"header", strings.Repeat("h", 4097), "at most 4096 bytes"},
		{"colour", strings.Repeat("c", 1<<20), ""},
	} {
		got := FilterFieldProblem(c.name, c.value)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("FilterFieldProblem(%s, %.20q…) = %q, want it to say %q", c.name, c.value, got, c.want)
		}
	}
}
