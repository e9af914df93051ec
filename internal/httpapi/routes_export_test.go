package httpapi

import (
	"slices"

	"github.com/redrive/redrive/internal/queue"
)

// RouteKeys lists every authenticated route the server registers, as
// "METHOD /path" with echo's :params, for tests that must cover them all.
func RouteKeys() []string {
	s := New(Config{Queues: &queue.Resolver{}})
	keys := make([]string, 0, len(s.routes))
	for k := range s.routes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
