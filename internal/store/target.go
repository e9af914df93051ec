package store

import (
	"context"
	"fmt"

	"github.com/redrive/redrive/internal/dlq"
)

// RecordHeaders returns the headers of each of ids that exists (a bulk
// task's spans read the records' trace context from them).
func (s *Store) RecordHeaders(ctx context.Context, ids []string) (map[string][]dlq.Header, error) {
	rows, err := s.q.RecordHeaders(ctx, s.pool, ids)
	if err != nil {
		return nil, fmt.Errorf("read record headers: %w", err)
	}
	out := make(map[string][]dlq.Header, len(rows))
	for _, r := range rows {
		hs, err := decodeHeaders(r.Headers)
		if err != nil {
			return nil, fmt.Errorf("read record headers of %s: %w", r.ID, err)
		}
		out[r.ID] = hs
	}
	return out, nil
}
