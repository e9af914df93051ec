package store

import (
	"context"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
)

// ExportPage reads up to limit whole records matching f, oldest first (by
// id, which is when each was stored), after the record afterID ("": from
// the first): one keyset page of an export. Unlike List it counts nothing,
// so that every page of a long export costs the same one index range scan.
// Records are shown as people see them (a record in flight as it was before
// its claim).
func (s *Store) ExportPage(ctx context.Context, f *filter.Filter, sc filter.Scope, afterID string, limit int) ([]dlq.Record, error) {
	p := &ListParams{Filter: *f, Scope: sc, Limit: limit, Sort: Sort{Field: SortCreated, Asc: true}}
	if afterID != "" {
		p.After = &Position{ID: afterID}
	}
	return sortedRows(ctx, s, p, limit, readSQL, scanShown, false)
}
