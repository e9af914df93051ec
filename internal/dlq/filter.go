package dlq

import (
	"fmt"
	"slices"
	"strings"
)

// MaxFilterPathSegments bounds the depth of a record filter's path (the
// dot-separated keys of "path"): a path is matched as a document nested that
// deep, and Postgres refuses a deep enough one ("stack depth limit exceeded").
const MaxFilterPathSegments = 32

// filterFieldBytes bounds the text fields of a record filter, in bytes.
// Names (topics, types) are far shorter in practice: ingest caps them at 255
// bytes and Kafka topic names at 249 characters.
var filterFieldBytes = map[string]int{
	"queue":      1024,
	"type":       1024,
	"error_type": 1024,
	"state":      64,
	"exhaustion": 64,
	"since":      64,
	"until":      64,
	"incident":   64,
	"key":        16 << 10,
	"q":          1024,
	"path":       1024,
	"value":      4096,
	"header":     4096,
}

// FilterFieldProblem says what is wrong with value as the record-filter
// field name (longer than the field's bound; a path that is too deep or has
// an empty segment), or "" when nothing is. Every parser of a record filter
// uses it: the list query, the bulk, task and replay-rule filters of the
// API, and the replay rules of policy files. Fields it does not know are
// not bounded here.
func FilterFieldProblem(name, value string) string {
	if name == "path" && value != "" {
		if segs := strings.Count(value, ".") + 1; segs > MaxFilterPathSegments {
			return fmt.Sprintf("must have at most %d dot-separated keys, got %d", MaxFilterPathSegments, segs)
		}
	}
	if limit, ok := filterFieldBytes[name]; ok && len(value) > limit {
		return fmt.Sprintf("must be at most %d bytes, got %d", limit, len(value))
	}
	if name == "path" && value != "" && slices.Contains(strings.Split(value, "."), "") {
		return "must be dot-separated keys like customer.id, without empty segments"
	}
	return ""
}
