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
// the batch is written again row by row with ON CONFLICT DO NOTHING.
func (s *Store) InsertRecords(ctx context.Context, records []dlq.Record) (int, error) {
	if len(records) == 0 {
		return 0, nil
	}
	rows := make([][]any, len(records))
	for i := range records {
		vals, err := rowValues(&records[i])
		if err != nil {
			return 0, fmt.Errorf("encode record %s: %w", records[i].ID, err)
		}
		rows[i] = vals
	}
	n, err := s.pool.CopyFrom(ctx, pgx.Identifier{"redrive_record"}, recordColumns, pgx.CopyFromRows(rows))
	if err == nil {
		return int(n), nil
	}
	if !isUniqueViolation(err) {
		return 0, fmt.Errorf("copy records: %w", err)
	}
	return s.insertSkippingDuplicates(ctx, rows)
}

func (s *Store) insertSkippingDuplicates(ctx context.Context, rows [][]any) (int, error) {
	inserted := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		batch := &pgx.Batch{}
		for _, vals := range rows {
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
