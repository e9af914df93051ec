package records

import "context"

// StatsTop counts the records of queue ("": every queue) among the queues
// matching queueGlobs (nil: every queue), as GET /dead-letter/stats shows
// them: the breakdowns by queue and by error type hold their limit largest
// keys, and Stats.OtherQueues and Stats.OtherErrorTypes count the rest.
func (s *Service) StatsTop(ctx context.Context, queue string, queueGlobs []string, limit int) (*Stats, error) {
	return s.store.StatsTop(ctx, queue, queueGlobs, limit)
}
