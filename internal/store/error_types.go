package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
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
func (s *Store) ErrorTypes(ctx context.Context, queue, search string, limit int) ([]ErrorTypeCount, int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT error_type, sum(n)::bigint, count(*) OVER () FROM redrive_record_count
		WHERE ($1 = '' OR queue = $1) AND ($2 = '' OR strpos(lower(error_type), lower($2)) > 0)
		GROUP BY error_type HAVING sum(n) > 0 ORDER BY 2 DESC, 1 LIMIT $3`, queue, search, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("list error types: %w", err)
	}
	var out []ErrorTypeCount
	var total int64
	var e ErrorTypeCount
	_, err = pgx.ForEachRow(rows, []any{&e.ErrorType, &e.Count, &total}, func() error {
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list error types: %w", err)
	}
	return out, total, nil
}
