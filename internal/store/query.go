package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/dlq"
)

// Filter selects records. Zero fields do not filter.
type Filter struct {
	Queue      string
	Type       string
	ErrorType  string
	State      dlq.State
	Exhaustion dlq.Exhaustion
	// Since and Until bound created_at (when Redrive first stored the failure):
	// Since inclusive, Until exclusive.
	Since time.Time
	Until time.Time
}

// where renders the filter as a SQL condition with its arguments, numbering
// placeholders from len(args)+1.
func (f *Filter) where(args []any) (string, []any) {
	var conds []string
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, fmt.Sprintf(cond, len(args)))
	}
	if f.Queue != "" {
		add("queue = $%d", f.Queue)
	}
	if f.Type != "" {
		add("type = $%d", f.Type)
	}
	if f.ErrorType != "" {
		add("error_type = $%d", f.ErrorType)
	}
	if f.State != "" {
		add("state = $%d", string(f.State))
	}
	if f.Exhaustion != "" {
		add("exhaustion = $%d", string(f.Exhaustion))
	}
	if !f.Since.IsZero() {
		add("created_at >= $%d", f.Since)
	}
	if !f.Until.IsZero() {
		add("created_at < $%d", f.Until)
	}
	if len(conds) == 0 {
		return "TRUE", args
	}
	return strings.Join(conds, " AND "), args
}

// ListParams selects a page of records, newest first.
type ListParams struct {
	Filter
	// Limit is the page size (must be > 0).
	Limit int
	// BeforeID is the keyset cursor: only records with a smaller id (older) are listed.
	BeforeID string
	// Offset skips that many records; used only without BeforeID.
	Offset int
}

// Page is one page of a listing.
type Page struct {
	Records []dlq.Record
	Total   int64 // records matching the filter, across all pages
	HasMore bool
}

// List returns a page of records matching the filter, newest first.
func (s *Store) List(ctx context.Context, p *ListParams) (*Page, error) {
	cond, args := p.Filter.where(nil)
	var total int64
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM redrive_record WHERE "+cond, args...).Scan(&total); err != nil {
		return nil, fmt.Errorf("count records: %w", err)
	}
	if p.BeforeID != "" {
		args = append(args, p.BeforeID)
		cond += fmt.Sprintf(" AND id < $%d", len(args))
	}
	// One extra row tells whether another page follows.
	args = append(args, p.Limit+1)
	query := fmt.Sprintf("SELECT %s FROM redrive_record WHERE %s ORDER BY id DESC LIMIT $%d", readColumns, cond, len(args))
	if p.BeforeID == "" && p.Offset > 0 {
		args = append(args, p.Offset)
		query += fmt.Sprintf(" OFFSET $%d", len(args))
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list records: %w", err)
	}
	records, err := pgx.CollectRows(rows, scanRecord)
	if err != nil {
		return nil, fmt.Errorf("list records: %w", err)
	}
	page := &Page{Records: records, Total: total}
	if len(records) > p.Limit {
		page.Records, page.HasMore = records[:p.Limit], true
	}
	return page, nil
}

// Get returns one record by id, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (*dlq.Record, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+readColumns+" FROM redrive_record WHERE id = $1", id)
	if err != nil {
		return nil, fmt.Errorf("get record %s: %w", id, err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanRecord)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get record %s: %w", id, err)
	}
	return &r, nil
}

// Count returns how many records match the filter.
func (s *Store) Count(ctx context.Context, f *Filter) (int64, error) {
	cond, args := f.where(nil)
	var n int64
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM redrive_record WHERE "+cond, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count records: %w", err)
	}
	return n, nil
}

func scanRecord(row pgx.CollectableRow) (dlq.Record, error) {
	var (
		r                      dlq.Record
		state, format          string
		exhaustion             *string
		sourceTS               *time.Time
		headers, errs, redeliv []byte
	)
	err := row.Scan(
		&r.ID, &r.Queue, &r.Type, &state, &exhaustion, &r.Attempt, &r.MaxAttempts,
		&r.Source.Partition, &r.Source.Offset, &sourceTS, &r.Source.Group,
		&r.DLQ.Topic, &r.DLQ.Partition, &r.DLQ.Offset, &format,
		&r.Key, &r.Value, &headers, &errs, &r.Retry, &r.Meta,
		&r.CreatedAt, &r.EnqueuedAt, &r.NextRetryAt, &r.DiscardedAt, &r.CompletedAt, &r.UpdatedAt,
		&r.RedeliveredAt, &redeliv, &r.ArchivedAt,
	)
	if err != nil {
		return r, err
	}
	r.State, r.Format = dlq.State(state), dlq.Format(format)
	if r.Format != dlq.FormatUnparseable {
		r.Source.Topic = r.Queue
	}
	if exhaustion != nil {
		r.Exhaustion = dlq.Exhaustion(*exhaustion)
	}
	if sourceTS != nil {
		r.Source.Timestamp = *sourceTS
	}
	if r.Headers, err = decodeHeaders(headers); err != nil {
		return r, err
	}
	if r.Redelivery, err = decodeRedelivery(redeliv); err != nil {
		return r, err
	}
	if err := json.Unmarshal(errs, &r.Errors); err != nil {
		return r, fmt.Errorf("decode errors: %w", err)
	}
	return r, nil
}
