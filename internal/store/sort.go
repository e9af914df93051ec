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
// order of travel. dense says the filter is known to match more than
// payloadMatchCap records (listTotal.dense): a payload search then reads
// in order without looking up its matches first.
func sortedRows[T any](ctx context.Context, s *Store, p *ListParams, n int, columns string, scan pgx.RowToFunc[T], dense bool) ([]T, error) {
	if len(p.Filter.Path) > 0 {
		return payloadRows(ctx, s, p, n, columns, scan, dense)
	}
	var out []T
	for _, seg := range p.scans() {
		if len(out) >= n {
			break
		}
		query, args := p.scanQuery(seg, columns, n-len(out))
		rows, err := collect(ctx, s.pool, "list records", scan, query, args)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

// payloadMatchCap bounds the matches a payload search's page looks up
// first (payloadRows): with more, the filter is dense enough that reading
// in order finds a page soon, and the planner's estimate, made from many
// sampled payloads that match, says so.
const payloadMatchCap = 1000

// payloadRows reads a payload search's page (sortedRows), without parallel
// workers: over the weekly partitions' GIN indexes (migration 00211) the
// planner, adding up their pessimistic estimates, ran them as a Parallel
// Append whose workers took longer to start than the lookups (58 ms p50 at
// 1M records on 2 cores, 2 ms serially).
//
// In the default order it first finds the matches through the payload's
// GIN index (payloadMatchIDs), then reads the page by those ids. The
// planner cannot be left to choose: it estimates a containment from the
// 100 payloads ANALYZE sampled per week, and a value that happens to be
// one of them counts as 1% of its week. With more matches expected than
// the page holds, it read the records in id order (the lifecycle's primary
// key of every week, merged, or the wide rows') to stop at the page, and,
// the value being rare, read all of them: 1.2 s for 11 matches at 1M
// records, in about one search in 70 (the runs are in the git history of
// docs/performance.md).
func payloadRows[T any](ctx context.Context, s *Store, p *ListParams, n int, columns string, scan pgx.RowToFunc[T], dense bool) ([]T, error) {
	var out []T
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out = nil
		if _, err := tx.Exec(ctx, "SET LOCAL max_parallel_workers_per_gather = 0"); err != nil {
			return fmt.Errorf("list records: %w", err)
		}
		if !dense && p.byID() {
			ids, err := p.payloadMatchIDs(ctx, tx)
			if err != nil {
				return err
			}
			if ids != nil {
				out, err = rowsOfIDs(ctx, tx, p, n, columns, scan, ids)
				return err
			}
		}
		for _, seg := range p.scans() {
			if len(out) >= n {
				break
			}
			query, args := p.scanQuery(seg, columns, n-len(out))
			rows, err := collect(ctx, tx, "list records", scan, query, args)
			if err != nil {
				return err
			}
			out = append(out, rows...)
		}
		return nil
	})
	return out, err
}

// byID says p's listing is in id order (the default sort, either way)
// from a cursor or the start, without an offset.
func (p *ListParams) byID() bool {
	return p.sortOf().Field == SortCreated && (p.Offset == 0 || p.position() != nil)
}

// payloadMatchIDs are the ids of the wide rows matching p's filter (its
// conditions on the wide row: the payload's among them) after p's cursor,
// in the order of travel; nil when there are more than payloadMatchCap.
// The statement has no ORDER BY: each week is read by its cheapest plan
// for all its matches (the payload's GIN index, for a rare value), never
// in id order.
func (p *ListParams) payloadMatchIDs(ctx context.Context, tx querier) ([]string, error) {
	query, args := p.payloadMatchQuery()
	ids, err := collect(ctx, tx, "list records: find payload matches", pgx.RowTo[string], query, args)
	if err != nil || len(ids) > payloadMatchCap {
		return nil, err
	}
	// A UUID's text (lowercase hex at fixed places) sorts as its bytes.
	slices.Sort(ids)
	if sort := p.sortOf(); sort.Asc == p.Backward {
		slices.Reverse(ids)
	}
	if ids == nil {
		ids = []string{}
	}
	return ids, nil
}

// payloadMatchQuery is payloadMatchIDs' statement.
func (p *ListParams) payloadMatchQuery() (string, pgx.NamedArgs) {
	args := pgx.NamedArgs{"match_cap": payloadMatchCap + 1}
	cond := render(&p.Filter, &p.Scope, "", args, renderOpts{wideOnly: true}) + p.sinceBound(args)
	if pos := p.position(); pos != nil {
		cond += " AND " + p.sortOf().after(segment{orderBy: []string{"id"}}, pos, p.sortOf().Asc != p.Backward, args)
	}
	return "SELECT id::text FROM redrive_record_data WHERE " + cond + " LIMIT @match_cap", args
}

// rowsOfIDs reads up to n rows of p's listing (in id order) among ids (the
// matches payloadMatchIDs found, in the order of travel), a page's worth
// of ids at a time: each statement looks up that many records by primary
// key, whatever the planner thinks of the payload's condition, which it
// checks again with the rest of the filter (the lifecycle's conditions, a
// record changed or deleted since).
func rowsOfIDs[T any](ctx context.Context, tx pgx.Tx, p *ListParams, n int, columns string, scan pgx.RowToFunc[T], ids []string) ([]T, error) {
	var out []T
	for len(ids) > 0 && len(out) < n {
		chunk := ids[:min(len(ids), n-len(out))]
		ids = ids[len(chunk):]
		query, args := p.scanQueryAmong(0, columns, n-len(out), chunk)
		rows, err := collect(ctx, tx, "list records", scan, query, args)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
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
	return p.scanQueryAmong(i, columns, n, nil)
}

// scanQueryAmong is scanQuery among the records of ids (nil: every record).
func (p *ListParams) scanQueryAmong(i int, columns string, n int, ids []string) (string, pgx.NamedArgs) {
	sort := p.sortOf()
	segs := sort.segments()
	seg := segs[i]
	ascending := sort.Asc != p.Backward
	args := pgx.NamedArgs{"limit": n}
	// A sort key the lifecycle holds is read from its (queue, key, id)
	// index; the rows without one (by id) from the wide row's (queue, id).
	lifecycleKey := len(seg.orderBy) == 2 && slices.Contains(lifecycleHeld, seg.orderBy[0])
	cond := render(&p.Filter, &p.Scope, "", args, renderOpts{lifecycleQueue: lifecycleKey})
	cond += p.sinceBound(args)
	if ids != nil {
		cond += " AND id = ANY(" + bindTo(args, "")("match_ids", ids) + "::uuid[])"
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

// sinceBound is " AND id >= …" for a listing since a time, "" otherwise.
// The record tables are partitioned by week of the id, and an id is made
// when its record is stored, as its created_at is (an imported record
// keeps both): an id bound a day before since rules out every older week
// at planning, whose indexes a page would otherwise each read down to
// their first match. (Not in counts: the id is not in the (queue,
// created_at) index they read.)
func (p *ListParams) sinceBound(args pgx.NamedArgs) string {
	if p.Filter.Since.IsZero() {
		return ""
	}
	return " AND id >= " + bindTo(args, "")("since_id", idBefore(p.Filter.Since.Add(-24*time.Hour)))
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
