package store

import (
	"context"
	"fmt"
	"time"
)

// RedeliveryDueCap bounds RedeliveryDue per queue: past it a queue's count
// saturates, which is plenty for an autoscaler's threshold and keeps each
// queue's count an index range of bounded length however large the backlog.
const RedeliveryDueCap = 100_000

// RedeliveryDue counts, per queue, the records whose redelivery is due at now
// and not yet claimed (next_retry_at passed: retryable records, and operator
// retries waiting for the scheduler), at most RedeliveryDueCap per queue.
// Queues with nothing due are absent.
func (s *Store) RedeliveryDue(ctx context.Context, now time.Time) (map[string]int64, error) {
	rows, err := s.q.RedeliveryDue(ctx, s.pool, now, RedeliveryDueCap)
	if err != nil {
		return nil, fmt.Errorf("redeliveries due: %w", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		if r.N > 0 {
			out[r.Queue] = r.N
		}
	}
	return out, nil
}
