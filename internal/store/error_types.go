package store

import (
	"context"
	"fmt"

	"github.com/redrive/redrive/internal/store/internal/dbsqlc"
)

// ErrorTypeCount is an error type and how many records' latest error has it.
type ErrorTypeCount struct {
	ErrorType string
	Count     int64
}

// ErrorTypes lists the error types of the stored records' latest errors,
// most records first (ties by name): at most limit of them, of one source
// topic when queue is set, and those containing search (ignoring case)
// when it is set; with how many distinct error types match in all. It reads
// the count table (a row per queue, type, error type, state and
// incident), never the records.
func (s *Store) ErrorTypes(ctx context.Context, queue, search string, limit int, queueGlobs []string) ([]ErrorTypeCount, int64, error) {
	var likes []string
	if queueGlobs != nil {
		likes = LikePatterns(queueGlobs)
	}
	rows, err := s.q.ErrorTypes(ctx, s.pool, dbsqlc.ErrorTypesParams{Queue: queue, Search: search, Max: int32(limit), QueueLikes: likes})
	if err != nil {
		return nil, 0, fmt.Errorf("list error types: %w", err)
	}
	var out []ErrorTypeCount
	var total int64
	for _, r := range rows {
		out = append(out, ErrorTypeCount{ErrorType: r.ErrorType, Count: r.N})
		total = r.Total
	}
	return out, total, nil
}
