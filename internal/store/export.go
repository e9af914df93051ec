package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
)

// A record read whole may be large: a value of megabytes, and its decoded
// payload. The reads that hold whole records of many (an export, a patch's
// dry run) read them in two steps, so that what they hold is bounded by
// bytes, not by a count of records of any size: first the ids and sizes of
// a page of records (RecordSize: no value is read), then the records of
// that page a few megabytes at a time (records.GroupBytes), by id.

// RecordSize is a record's id and about how many bytes it takes read whole
// (sizeSQL).
type RecordSize struct {
	ID    string
	Bytes int64
}

// sizeSQL is the select list of RecordSize: the record's key and value,
// exactly (octet_length reads a TOASTed value's size from its pointer,
// without fetching it), its headers, errors, pending edit and decoded
// payloads as stored (pg_column_size: compressed when Postgres compressed
// them), and a kilobyte for the rest of the record.
const sizeSQL = "id, (1024 + coalesce(octet_length(key), 0) + coalesce(octet_length(value), 0)" +
	" + coalesce(pg_column_size(headers), 0) + coalesce(pg_column_size(errors), 0)" +
	" + coalesce(pg_column_size(redelivery), 0) + coalesce(pg_column_size(key_payload), 0)" +
	" + CASE WHEN value_schema IS NOT NULL THEN coalesce(pg_column_size(payload), 0) ELSE 0 END)::int8 AS bytes"

var scanSize = pgx.RowToStructByPos[RecordSize]

// exportParams is an export's listing: f narrowed by sc, oldest first (by
// id, which is when each record was stored), after the record afterID
// ("": from the first).
func exportParams(f *filter.Filter, sc filter.Scope, afterID string, limit int) *ListParams {
	p := &ListParams{Filter: *f, Scope: sc, Limit: limit, Sort: Sort{Field: SortCreated, Asc: true}}
	if afterID != "" {
		p.After = &Position{ID: afterID}
	}
	return p
}

// ExportSizes reads the ids and sizes of up to limit records matching f
// narrowed by sc, oldest first, after the record afterID ("": from the
// first): one keyset page of an export, reading no value. Unlike List it
// counts nothing, so that every page of a long export costs the same one
// index range scan.
func (s *Store) ExportSizes(ctx context.Context, f *filter.Filter, sc filter.Scope, afterID string, limit int) ([]RecordSize, error) {
	return sortedRows(ctx, s, exportParams(f, sc, afterID, limit), limit, sizeSQL, scanSize, false)
}

// ExportRecords reads the records of ids (from ExportSizes) whole, oldest
// first, those that still match f narrowed by sc: a record changed or
// deleted since its size was read is left out. Records are shown as people
// see them (a record in flight as it was before its claim).
func (s *Store) ExportRecords(ctx context.Context, f *filter.Filter, sc filter.Scope, ids []string) ([]dlq.Record, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	query, args := exportParams(f, sc, "", len(ids)).scanQueryAmong(0, readSQL, len(ids), ids)
	return collect(ctx, s.pool, "read records to export", scanShown, query, args)
}

// RetryCandidateSizes reads the ids and sizes of up to limit records, in id
// order after afterID, that a bulk retry of f narrowed by sc would retry: a
// patch's dry run then reads them whole a few megabytes at a time
// (RetryCandidatesAmong).
func (s *Store) RetryCandidateSizes(ctx context.Context, f *filter.Filter, sc filter.Scope, afterID string, limit int) ([]RecordSize, error) {
	sc = retryScope(sc)
	args := pgx.NamedArgs{"limit": limit}
	cond := where(f, &sc, "f_", args)
	if afterID != "" {
		args["after_id"] = afterID
		cond += afterCursor
	}
	return collect(ctx, s.pool, "read the sizes of records to retry", scanSize,
		"SELECT "+sizeSQL+" FROM redrive_record WHERE "+cond+" ORDER BY id LIMIT @limit", args)
}

// RetryCandidatesAmong reads the records of ids (from RetryCandidateSizes)
// whole, as stored, in id order: those a bulk retry of f narrowed by sc
// would still retry.
func (s *Store) RetryCandidatesAmong(ctx context.Context, f *filter.Filter, sc filter.Scope, ids []string) ([]dlq.Record, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	sc = retryScope(sc)
	args := pgx.NamedArgs{"ids": ids}
	cond := where(f, &sc, "f_", args)
	return collect(ctx, s.pool, "read records to retry", scanRecord,
		"SELECT "+storedSQL+" FROM redrive_record WHERE "+cond+" AND id = ANY(@ids::uuid[]) ORDER BY id", args)
}
