package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/store/internal/dbsqlc"
)

// ListParams selects a page of records, newest first unless Sort says
// otherwise.
type ListParams struct {
	filter.Filter
	// Limit is the page size (must be > 0).
	Limit int
	// Sort orders the listing (zero: newest first).
	Sort Sort
	// After is the keyset cursor: the page starts after this position (or,
	// Backward, ends before it).
	After *Position
	// Backward reads the page before After instead of the one after it.
	Backward bool
	// BeforeID is the keyset cursor of the default sort: only records with
	// a smaller id (older) are listed. After supersedes it.
	BeforeID string
	// Offset skips that many records; used only without a cursor, and only
	// by sorts read in one index scan (not next_retry_at or failed_at).
	Offset int
	// Scope narrows the listing and its total beyond the filter (the
	// queues the caller may read); zero: not narrowed.
	Scope filter.Scope
}

// Page is one page of a listing.
type Page struct {
	Records []dlq.Record
	Total   int64 // records matching the filter, across all pages
	// TotalCapped says Total is a lower bound (countCap) rather than exact.
	TotalCapped bool
	// TotalEstimated says Total is the planner's estimate: counting exceeded
	// its time budget.
	TotalEstimated bool
	// HasMore says another page follows in the direction read (an earlier
	// one, for a Backward listing).
	HasMore bool
}

// countCap bounds exact counting for filters the count table cannot answer:
// beyond it a listing reports the cap and TotalCapped.
const countCap = 10000

// List returns a page of records matching the filter, newest first.
func (s *Store) List(ctx context.Context, p *ListParams) (*Page, error) {
	records, total, err := listRows(ctx, s, p, readSQL, scanShown)
	if err != nil {
		return nil, err
	}
	page := &Page{Records: records, Total: total.n, TotalCapped: total.capped, TotalEstimated: total.estimated}
	if len(records) > p.Limit {
		page.Records, page.HasMore = records[:p.Limit], true
	}
	return page, nil
}

// listTotal is what countFor found.
type listTotal struct {
	n                 int64
	capped, estimated bool
}

// dense says the filter matches more than payloadMatchCap records, as far
// as the count knows. The planner's estimate (counting ran out of time)
// counts only far past that: one sampled payload makes a week's estimate
// 1% of the week, 3,300 records in one of 5M records' 14 weeks.
func (t listTotal) dense() bool {
	if t.estimated {
		return t.n > countCap
	}
	return t.capped || t.n > payloadMatchCap
}

// listRows reads the page p selects (and one row more, which tells whether
// another page follows in the direction read) as columns, with scan, in
// listing order; and the filter's total.
func listRows[T any](ctx context.Context, s *Store, p *ListParams, columns string, scan pgx.RowToFunc[T]) ([]T, listTotal, error) {
	var total listTotal
	var err error
	total.n, total.capped, total.estimated, err = s.countFor(ctx, &p.Filter, &p.Scope)
	if err != nil {
		return nil, total, err
	}
	rows, err := sortedRows(ctx, s, p, p.Limit+1, columns, scan, total.dense())
	if err != nil {
		return nil, total, err
	}
	if p.Backward {
		// Read nearest first; the page shows them in listing order, and the
		// extra row (if any) is the one before them.
		slices.Reverse(rows)
		if len(rows) > p.Limit {
			rows = append(rows[1:], rows[0])
		}
	}
	return rows, total, nil
}

// countBudget bounds the time spent counting for a filter the count table
// cannot answer; past it, a listing shows the planner's estimate instead.
const countBudget = 25 * time.Millisecond

// setCountBudget bounds a counting transaction's statements to countBudget.
var setCountBudget = "SET LOCAL statement_timeout = " + strconv.FormatInt(countBudget.Milliseconds(), 10)

// countFor counts the records matching f narrowed by sc: exactly from the
// count table when they use only its dimensions, else by scanning at most
// countCap+1 rows within countBudget; beyond the budget it returns the
// planner's estimate (estimated).
func (s *Store) countFor(ctx context.Context, f *filter.Filter, sc *filter.Scope) (n int64, capped, estimated bool, err error) {
	if countable(f, sc) {
		n, err = s.countDims(ctx, f, sc)
		return n, false, false, err
	}
	args := pgx.NamedArgs{"count_cap": countCap + 1}
	cond := where(f, sc, "", args)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, setCountBudget); err != nil {
			return err
		}
		return tx.QueryRow(ctx, countScanSQL(recordsFrom(f, sc), cond), args).Scan(&n)
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "57014" && ctx.Err() == nil { // query_canceled: over budget
		est, err := s.estimate(ctx, "SELECT 1 FROM "+recordsFrom(f, sc)+" WHERE "+cond, args)
		return est, false, true, err
	}
	if err != nil {
		return 0, false, false, fmt.Errorf("count records: %w", err)
	}
	if n > countCap {
		return countCap, true, false, nil
	}
	return n, false, false, nil
}

// countScanSQL counts at most @count_cap records of from (recordsFrom)
// matching cond. A queue and a time range (the list's queue+since) are
// counted from the (queue, created_at) index (migration 00171) of the wide
// rows alone.
func countScanSQL(from, cond string) string {
	return "SELECT count(*) FROM (SELECT 1 FROM " + from + " WHERE " + cond + " LIMIT @count_cap) c"
}

// estimate is the planner's row estimate for a query.
func (s *Store) estimate(ctx context.Context, query string, args pgx.NamedArgs) (int64, error) {
	var plan []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		} `json:"Plan"`
	}
	var raw []byte
	if err := s.pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+query, args).Scan(&raw); err != nil {
		return 0, fmt.Errorf("estimate records: %w", err)
	}
	if err := json.Unmarshal(raw, &plan); err != nil {
		return 0, fmt.Errorf("estimate records: unreadable plan: %w", err)
	}
	if len(plan) == 0 {
		return 0, errors.New("estimate records: empty plan")
	}
	return int64(plan[0].Plan.Rows), nil
}

// countDims sums the count table over the dimensions of f and sc.
func (s *Store) countDims(ctx context.Context, f *filter.Filter, sc *filter.Scope) (int64, error) {
	args := pgx.NamedArgs{}
	cond := countWhere(f, sc, args)
	var n int64
	if err := s.pool.QueryRow(ctx, "SELECT coalesce(sum(n), 0) FROM redrive_record_count WHERE "+cond, args).Scan(&n); err != nil {
		return 0, fmt.Errorf("count records: %w", err)
	}
	return n, nil
}

// Get returns one record by id, or ErrNotFound. It says whether the record
// is in flight (InFlight): claimed by a scheduler that has not settled the
// claim yet (every read does: inflight.go).
func (s *Store) Get(ctx context.Context, id string) (*dlq.Record, error) {
	row, err := s.q.RecordGet(ctx, s.pool, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get record %s: %w", id, err)
	}
	r, err := recordOf(&row)
	if err == nil {
		err = showInFlight(&r, row.ClaimPrior)
	}
	if err != nil {
		return nil, fmt.Errorf("get record %s: %w", id, err)
	}
	return &r, nil
}

// inFlightSQL is true for a record a scheduler has claimed and not settled
// yet: it is being produced right now (or, if its scheduler died, until the
// claim is rescued, within its lease). Settling and rescuing delete the claim.
const inFlightSQL = "EXISTS (SELECT 1 FROM redrive_claim c WHERE c.token = claim_token)"

// inFlightIDsSQL is the records of open claims: with a record's claim
// token, the same as inFlightSQL, found from the (small) claim table.
const inFlightIDsSQL = "(id, claim_token) IN (SELECT unnest(c.ids), c.token FROM redrive_claim c)"

// Count returns how many records match the filter, exactly.
func (s *Store) Count(ctx context.Context, f *filter.Filter) (int64, error) {
	return s.count(ctx, f, nil)
}

// CountScoped returns how many records match f narrowed by sc, exactly.
func (s *Store) CountScoped(ctx context.Context, f *filter.Filter, sc filter.Scope) (int64, error) {
	return s.count(ctx, f, &sc)
}

// count returns how many records match f narrowed by sc, exactly.
func (s *Store) count(ctx context.Context, f *filter.Filter, sc *filter.Scope) (int64, error) {
	if countable(f, sc) {
		return s.countDims(ctx, f, sc)
	}
	args := pgx.NamedArgs{}
	cond := where(f, sc, "", args)
	var n int64
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM "+recordsFrom(f, sc)+" WHERE "+cond, args).Scan(&n); err != nil {
		return 0, fmt.Errorf("count records: %w", err)
	}
	return n, nil
}

// storedRecord is a record's row as read: readColumns (scanRecord, in every
// listing), or the same columns and whether the record is in flight
// (RecordGet). recordOf decodes it.
type storedRecord = dbsqlc.RecordGetRow

func scanRecord(row pgx.CollectableRow) (dlq.Record, error) {
	var sr storedRecord
	err := row.Scan(
		&sr.ID, &sr.Queue, &sr.Type, &sr.State, &sr.Exhaustion, &sr.Attempt, &sr.MaxAttempts,
		&sr.SourcePartition, &sr.SourceOffset, &sr.SourceTimestamp, &sr.SourceGroup,
		&sr.DlqTopic, &sr.DlqPartition, &sr.DlqOffset, &sr.DlqTimestamp, &sr.Format,
		&sr.Key, &sr.Value, &sr.Headers, &sr.Errors, &sr.Retry, &sr.Meta,
		&sr.CreatedAt, &sr.EnqueuedAt, &sr.NextRetryAt, &sr.DiscardedAt, &sr.CompletedAt, &sr.UpdatedAt,
		&sr.ArchiveState, &sr.Fingerprint, &sr.PayloadOmitted,
		&sr.ValueSchema, &sr.KeySchema, &sr.KeyPayload, &sr.DecodeError, &sr.DecodePending,
		&sr.RedeliveredAt, &sr.Redelivery, &sr.ArchivedAt, &sr.RedeliveryFailure, &sr.ArchiveReason, &sr.ArchiveFailure,
		&sr.CompletedBy, &sr.AckDueAt, &sr.UnacknowledgedAt, &sr.Payload, &sr.ClaimPrior,
	)
	if err != nil {
		return dlq.Record{}, err
	}
	return recordOf(&sr)
}

// recordOf decodes a record's row.
func recordOf(sr *storedRecord) (dlq.Record, error) {
	r := dlq.Record{
		ID: sr.ID, Queue: sr.Queue, Type: sr.Type, State: dlq.State(sr.State), Attempt: int(sr.Attempt), MaxAttempts: int(sr.MaxAttempts),
		Source: dlq.Source{Partition: sr.SourcePartition, Offset: sr.SourceOffset, Group: sr.SourceGroup},
		DLQ:    dlq.Coord{Topic: sr.DlqTopic, Partition: sr.DlqPartition, Offset: sr.DlqOffset},
		Format: dlq.Format(sr.Format), Key: sr.Key, Value: sr.Value, Retry: sr.Retry, Meta: sr.Meta,
		CreatedAt: sr.CreatedAt, EnqueuedAt: sr.EnqueuedAt, NextRetryAt: sr.NextRetryAt, DiscardedAt: sr.DiscardedAt,
		CompletedAt: sr.CompletedAt, UpdatedAt: sr.UpdatedAt, Fingerprint: sr.Fingerprint,
		RedeliveredAt: sr.RedeliveredAt, ArchivedAt: sr.ArchivedAt, AckDueAt: sr.AckDueAt, UnacknowledgedAt: sr.UnacknowledgedAt,
	}
	if sr.PayloadOmitted != nil {
		r.PayloadOmitted = *sr.PayloadOmitted
	}
	r.KeyPayload, r.Payload, r.DecodePending = sr.KeyPayload, sr.Payload, sr.DecodePending
	if sr.DecodeError != nil {
		r.DecodeError = *sr.DecodeError
	}
	var err error
	if r.ValueSchema, err = schemaRefOf(sr.ValueSchema); err != nil {
		return r, err
	}
	if r.KeySchema, err = schemaRefOf(sr.KeySchema); err != nil {
		return r, err
	}
	if r.Format != dlq.FormatUnparseable {
		r.Source.Topic = r.Queue
	}
	if sr.Exhaustion != nil {
		r.Exhaustion = dlq.Exhaustion(*sr.Exhaustion)
	}
	switch {
	case sr.CompletedBy != nil:
		r.CompletedBy = dlq.CompletedBy(*sr.CompletedBy)
	case r.State == dlq.StateCompleted:
		// Stored before completion policies (migration 00090), when only an
		// acknowledgement completed a record.
		r.CompletedBy = dlq.CompletedByAck
	}
	if sr.SourceTimestamp != nil {
		r.Source.Timestamp = *sr.SourceTimestamp
	}
	if r.Headers, err = decodeHeaders(sr.Headers); err != nil {
		return r, err
	}
	if r.Redelivery, err = decodeRedelivery(sr.Redelivery); err != nil {
		return r, err
	}
	if err := json.Unmarshal(sr.Errors, &r.Errors); err != nil {
		return r, fmt.Errorf("decode errors: %w", err)
	}
	if sr.DlqTimestamp.InfinityModifier == pgtype.Finite {
		r.DLQ.Timestamp = sr.DlqTimestamp.Time
	}
	if r.RedeliveryFailure, err = decodeFailure(sr.RedeliveryFailure); err != nil {
		return r, fmt.Errorf("decode redelivery failure: %w", err)
	}
	if sr.ArchiveState != nil {
		r.Archive = &dlq.ArchiveStatus{State: dlq.ArchiveState(*sr.ArchiveState)}
		if sr.ArchiveReason != nil {
			r.Archive.Reason = *sr.ArchiveReason
		}
		if r.Archive.Failure, err = decodeFailure(sr.ArchiveFailure); err != nil {
			return r, fmt.Errorf("decode archive failure: %w", err)
		}
	}
	r.InFlight = sr.ClaimPrior != nil
	return r, nil
}

// scanShown is scanRecord for a read shown to people (Get, List,
// ListPreviews): a record in flight is shown as it was before its claim
// (inflight.go). Statements that read to change a record (UpdateLocked, the
// retries) must see it as stored: they use scanRecord.
func scanShown(row pgx.CollectableRow) (dlq.Record, error) {
	var prior []byte
	r, err := scanRecord(claimPriorRow{row, &prior})
	if err != nil {
		return r, err
	}
	return r, showInFlight(&r, prior)
}

// claimPriorRow keeps the claim_prior column (the last of readColumns) of the
// row it scans.
type claimPriorRow struct {
	pgx.CollectableRow
	prior *[]byte
}

func (r claimPriorRow) Scan(dest ...any) error {
	if err := r.CollectableRow.Scan(dest...); err != nil {
		return err
	}
	b, ok := dest[claimPriorAt].(*json.RawMessage)
	if !ok {
		return fmt.Errorf("claim_prior scanned into %T", dest[claimPriorAt])
	}
	*r.prior = *b
	return nil
}

// claimPriorAt is where claim_prior is among readColumns.
var claimPriorAt = slices.Index(strings.Split(readColumns, ", "), "claim_prior")

// decodeFailure reads a delivery failure column; NULL is none.
func decodeFailure(b []byte) (*dlq.DeliveryFailure, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var f dlq.DeliveryFailure
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	return &f, nil
}
