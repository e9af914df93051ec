package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// SortField is what a listing is ordered by; ties are broken by id.
type SortField string

// The orders a listing offers. Each is read from an index (migration 00085),
// so a page costs the same however many records come before it.
const (
	// SortCreated is by when the record was stored: its id (UUIDv7). The
	// default, newest first.
	SortCreated SortField = "created_at"
	// SortAttempt is by attempt.
	SortAttempt SortField = "attempt"
	// SortNextRetry is by next_retry_at; records with none (not waiting for
	// a redelivery) come after every record with one, by id.
	SortNextRetry SortField = "next_retry_at"
	// SortFailed is by failed_at, when the latest failure happened; records
	// not yet given one (stored before it existed, until the background
	// fill reaches them) come last, by id.
	SortFailed SortField = "failed_at"
)

// SortFields lists every SortField.
var SortFields = []SortField{SortCreated, SortAttempt, SortNextRetry, SortFailed}

// Sort orders a listing. The zero Sort is newest first.
type Sort struct {
	Field SortField
	// Asc lists from the smallest key up (oldest first for SortCreated,
	// soonest for SortNextRetry); otherwise largest first.
	Asc bool
}

// nullable says records may lack the sort key: they are listed after all
// the others, by id in the same direction.
func (s Sort) nullable() bool { return s.Field == SortNextRetry || s.Field == SortFailed }

// column is the sort key's column; "" for SortCreated (the id alone).
func (s Sort) column() string {
	switch s.Field {
	case SortAttempt, SortNextRetry, SortFailed:
		return string(s.Field)
	}
	return ""
}

// Position is a place in a sorted listing: a row's sort key and id. A
// keyset cursor names the last row of a page (or the first, going back).
type Position struct {
	ID string
	// Null says the row has no sort key (a nullable sort).
	Null bool
	// Attempt is the key of SortAttempt, At of SortNextRetry and SortFailed.
	Attempt int
	At      time.Time
}

// PositionOf is the position of a listed record in sort s.
func PositionOf(s Sort, p *RecordPreview) Position {
	pos := Position{ID: p.Record.ID}
	switch s.Field {
	case SortAttempt:
		pos.Attempt = p.Record.Attempt
	case SortNextRetry:
		if p.Record.NextRetryAt == nil {
			pos.Null = true
		} else {
			pos.At = *p.Record.NextRetryAt
		}
	case SortFailed:
		if p.FailedAt == nil {
			pos.Null = true
		} else {
			pos.At = *p.FailedAt
		}
	}
	return pos
}

// segment is a part of a sorted listing that one index range scan reads:
// the rows with a sort key (ordered by it, then id), or those without (by
// id). Non-nullable sorts have one segment.
type segment struct {
	cond    string // extra condition, "" for none
	orderBy []string
}

// segments are s's parts in listing order.
func (s Sort) segments() []segment {
	col := s.column()
	switch {
	case col == "":
		return []segment{{orderBy: []string{"id"}}}
	case !s.nullable():
		return []segment{{orderBy: []string{col, "id"}}}
	}
	return []segment{
		{cond: col + " IS NOT NULL", orderBy: []string{col, "id"}},
		{cond: col + " IS NULL", orderBy: []string{"id"}},
	}
}

// segmentOf is the index of the segment holding pos.
func (s Sort) segmentOf(pos *Position) int {
	if s.nullable() && pos.Null {
		return 1
	}
	return 0
}

// after renders "rows after pos within its segment, in the order of
// travel" (ascending: greater), binding its values into args.
func (s Sort) after(seg segment, pos *Position, ascending bool, args pgx.NamedArgs) string {
	op := " < "
	if ascending {
		op = " > "
	}
	args["after_id"] = pos.ID
	if len(seg.orderBy) == 1 {
		return "id" + op + "@after_id"
	}
	if s.Field == SortAttempt {
		args["after_key"] = pos.Attempt
	} else {
		args["after_key"] = pos.At
	}
	// A row comparison: Postgres reads it as one range of the (key, id) index.
	return "(" + seg.orderBy[0] + ", id)" + op + "(@after_key, @after_id)"
}

// sortedRows reads up to n rows of a listing in sort order from p.After
// (exclusive; nil: from the start), forward or backward, in as many index
// range scans as the sort has segments from there on; rows come in the
// order of travel.
func sortedRows[T any](ctx context.Context, s *Store, p *ListParams, n int, columns string, scan pgx.RowToFunc[T]) ([]T, error) {
	var out []T
	for _, seg := range p.scans() {
		if len(out) >= n {
			break
		}
		query, args := p.scanQuery(seg, columns, n-len(out))
		var rows []T
		var err error
		if len(p.Filter.Path) > 0 {
			rows, err = serialRows(ctx, s, scan, query, args)
		} else {
			rows, err = collect(ctx, s.pool, "list records", scan, query, args)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

// serialRows runs a listing's scan without parallel workers. A payload
// search reads the GIN index of every week's partition (migration 00211);
// the planner, adding up their pessimistic estimates, runs them as a
// Parallel Append, whose workers take longer to start than the lookups take
// (58 ms p50 at 1M records on 2 cores, 2 ms serially).
func serialRows[T any](ctx context.Context, s *Store, scan pgx.RowToFunc[T], query string, args pgx.NamedArgs) ([]T, error) {
	var rows []T
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL max_parallel_workers_per_gather = 0"); err != nil {
			return fmt.Errorf("list records: %w", err)
		}
		var err error
		rows, err = collect(ctx, tx, "list records", scan, query, args)
		return err
	})
	return rows, err
}

// sortOf is p's sort, the zero Sort made explicit.
func (p *ListParams) sortOf() Sort {
	sort := p.Sort
	if sort.Field == "" {
		sort.Field = SortCreated
	}
	return sort
}

// position is where p starts: After, or BeforeID in the default order.
func (p *ListParams) position() *Position {
	sort := p.sortOf()
	if p.After == nil && p.BeforeID != "" && sort.Field == SortCreated && !sort.Asc && !p.Backward {
		return &Position{ID: p.BeforeID}
	}
	return p.After
}

// scans are the segments p reads, by index, in the order of travel.
func (p *ListParams) scans() []int {
	sort := p.sortOf()
	n := len(sort.segments())
	first, step := 0, 1
	if p.Backward {
		first, step = n-1, -1
	}
	if pos := p.position(); pos != nil {
		first = sort.segmentOf(pos)
	}
	var out []int
	for i := first; i >= 0 && i < n; i += step {
		out = append(out, i)
	}
	return out
}

// scanQuery is the statement reading up to n rows of segment i of p's
// listing, as columns, with its arguments.
func (p *ListParams) scanQuery(i int, columns string, n int) (string, pgx.NamedArgs) {
	sort := p.sortOf()
	segs := sort.segments()
	seg := segs[i]
	ascending := sort.Asc != p.Backward
	args := pgx.NamedArgs{"limit": n}
	// A sort key the lifecycle holds is read from its (queue, key, id)
	// index; the rows without one (by id) from the wide row's (queue, id).
	lifecycleKey := len(seg.orderBy) == 2 && slices.Contains(lifecycleHeld, seg.orderBy[0])
	cond := render(&p.Filter, &p.Scope, "", args, renderOpts{lifecycleQueue: lifecycleKey})
	if !p.Filter.Since.IsZero() {
		// The record tables are partitioned by week of the id, and an id is
		// made when its record is stored, as its created_at is (an imported
		// record keeps both): an id bound a day before since rules out every
		// older week at planning, whose indexes a page would otherwise each
		// read down to their first match. (Not in counts: the id is not in
		// the (queue, created_at) index they read.)
		cond += " AND id >= " + bindTo(args, "")("since_id", idBefore(p.Filter.Since.Add(-24*time.Hour)))
	}
	if seg.cond != "" {
		cond += " AND " + seg.cond
	}
	pos := p.position()
	if pos != nil && i == sort.segmentOf(pos) {
		cond += " AND " + sort.after(seg, pos, ascending, args)
	}
	dir := " DESC"
	if ascending {
		dir = ""
	}
	order := slices.Clone(seg.orderBy)
	for j := range order {
		order[j] += dir
	}
	query := "SELECT " + columns + " FROM redrive_record WHERE " + cond + " ORDER BY " + strings.Join(order, ", ") + " LIMIT @limit"
	if pos == nil && p.Offset > 0 && len(segs) == 1 {
		args["offset"] = p.Offset
		query += " OFFSET @offset"
	}
	return query, args
}

// FillFailedAt gives the records stored before failed_at existed their
// failed_at (as FailedAt computes it, from the latest error), up to limit
// of them with an id after afterID (in id order, so that each call reads
// about limit rows), and says the last id it looked at ("" when none is
// left) and how many it changed: serve calls it in the background until
// it has walked every record. Records stored since have it from the start.
func (s *Store) FillFailedAt(ctx context.Context, afterID string, limit int) (string, int, error) {
	if afterID == "" {
		afterID = "00000000-0000-0000-0000-000000000000"
	}
	r, err := s.q.FillFailedAt(ctx, s.pool, afterID, int32(limit))
	if err != nil {
		return "", 0, fmt.Errorf("fill failed_at: %w", err)
	}
	return r.LastID, int(r.Filled), nil
}
