package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/redrive/redrive/internal/dlq"
)

// insertIgnoringDuplicates is the slow path of InsertRecords: one statement per
// row, skipping rows whose DLQ coordinates are already stored.
var insertIgnoringDuplicates = fmt.Sprintf(
	"INSERT INTO redrive_record (%s) VALUES (%s) ON CONFLICT ON CONSTRAINT redrive_record_dlq_coord DO NOTHING",
	insertColumns, placeholders(len(recordColumns)))

func placeholders(n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = fmt.Sprintf("$%d", i+1)
	}
	return strings.Join(ps, ", ")
}

// InsertRecords stores new records and returns how many were inserted. It is
// idempotent on the records' DLQ coordinates: records already stored are skipped.
//
// The fast path is a single COPY, which is all-or-nothing. Duplicates happen
// only when a batch is consumed again (after a crash or rebalance between the
// insert and the offset commit); then COPY fails on the unique constraint and
// the batch is written again with ON CONFLICT DO NOTHING. A value Postgres
// rejects (JSON that jsonb cannot hold) must not block ingest either: then the
// rows are written one by one, and a row that is rejected again is stored with
// its JSON kept as text (see asText).
func (s *Store) InsertRecords(ctx context.Context, records []dlq.Record) (int, error) {
	if len(records) == 0 {
		return 0, nil
	}
	// Rows are encoded lazily: pgx encodes in a goroutine while Postgres is
	// already ingesting the rows sent before, so encoding overlaps the COPY.
	n, err := s.pool.CopyFrom(ctx, pgx.Identifier{"redrive_record"}, recordColumns, &recordSource{records: records, i: -1})
	if err == nil {
		return int(n), nil
	}
	if isUniqueViolation(err) {
		n, err := s.insertSkippingDuplicates(ctx, records)
		if err == nil || !isDataException(err) {
			return n, err
		}
	} else if !isDataException(err) {
		return 0, fmt.Errorf("copy records: %w", err)
	}
	return s.insertOneByOne(ctx, records)
}

// insertOneByOne stores records one statement each, skipping duplicates, and
// falls back to asText for a row Postgres rejects.
func (s *Store) insertOneByOne(ctx context.Context, records []dlq.Record) (int, error) {
	inserted := 0
	for i := range records {
		n, err := s.insertRow(ctx, &records[i], asJSON)
		if isDataException(err) {
			n, err = s.insertRow(ctx, &records[i], asText)
		}
		if err != nil {
			return inserted, fmt.Errorf("insert record %s: %w", records[i].ID, err)
		}
		inserted += n
	}
	return inserted, nil
}

func (s *Store) insertRow(ctx context.Context, r *dlq.Record, mode jsonMode) (int, error) {
	vals, err := rowValues(r, mode)
	if err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, insertIgnoringDuplicates, vals...)
	return int(tag.RowsAffected()), err
}

// recordSource feeds records to COPY, encoding each as it is sent.
type recordSource struct {
	records []dlq.Record
	i       int
	err     error
}

func (rs *recordSource) Next() bool {
	rs.i++
	return rs.err == nil && rs.i < len(rs.records)
}

func (rs *recordSource) Values() ([]any, error) {
	vals, err := rowValues(&rs.records[rs.i], asJSON)
	if err != nil {
		rs.err = fmt.Errorf("encode record %s: %w", rs.records[rs.i].ID, err)
	}
	return vals, rs.err
}

func (rs *recordSource) Err() error { return rs.err }

func (s *Store) insertSkippingDuplicates(ctx context.Context, records []dlq.Record) (int, error) {
	inserted := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		batch := &pgx.Batch{}
		for i := range records {
			vals, err := rowValues(&records[i], asJSON)
			if err != nil {
				return fmt.Errorf("encode record %s: %w", records[i].ID, err)
			}
			batch.Queue(insertIgnoringDuplicates, vals...).Exec(func(tag pgconn.CommandTag) error {
				inserted += int(tag.RowsAffected())
				return nil
			})
		}
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return 0, fmt.Errorf("insert records skipping duplicates: %w", err)
	}
	return inserted, nil
}
