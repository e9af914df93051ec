package store

import (
	"context"
	"fmt"

	"github.com/redrive/redrive/internal/dlq"
)

// SourceGroups returns the consumer group that failed each of ids (its
// source.group), for the records that name one: who a redelivery targeted
// at the group is for (docs/redelivery.md, Targeting).
func (s *Store) SourceGroups(ctx context.Context, ids []string) (map[string]string, error) {
	rows, err := s.q.SourceGroups(ctx, s.pool, ids)
	if err != nil {
		return nil, fmt.Errorf("read source groups: %w", err)
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.ID] = r.SourceGroup
	}
	return out, nil
}

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
