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
// row, skipping rows whose DLQ record (coordinates and timestamp) is already stored.
var insertIgnoringDuplicates = fmt.Sprintf(
	"INSERT INTO redrive_record (%s) VALUES (%s) ON CONFLICT (dlq_topic, dlq_partition, dlq_offset, dlq_timestamp) DO NOTHING",
	insertColumns, placeholders(len(recordColumns)))

// InsertResult says which records of a batch InsertRecords stored.
type InsertResult struct {
	// N is how many records were stored; the others had been stored before.
	N int
	// duplicate marks, by index, the records that were already stored.
	duplicate map[int]bool
}

// New reports whether records[i] was stored by this call (not before).
func (r InsertResult) New(i int) bool { return !r.duplicate[i] }

func (r *InsertResult) add(i int, stored bool) {
	if stored {
		r.N++
		return
	}
	if r.duplicate == nil {
		r.duplicate = map[int]bool{}
	}
	r.duplicate[i] = true
}

func placeholders(n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = fmt.Sprintf("$%d", i+1)
	}
	return strings.Join(ps, ", ")
}

// InsertRecords stores new records and says which were inserted. It is
// idempotent on the records' DLQ identity (coordinates and timestamp): records
// already stored are skipped.
//
// The fast path is a single COPY, which is all-or-nothing. Duplicates happen
// only when a batch is consumed again (after a crash or rebalance between the
// insert and the offset commit); then COPY fails on the unique constraint and
// the batch is written again with ON CONFLICT DO NOTHING. A value Postgres
// rejects (JSON that jsonb cannot hold) must not block ingest either: then the
// rows are written one by one, and a row that is rejected again is stored with
// its JSON kept as text (see asText).
func (s *Store) InsertRecords(ctx context.Context, records []dlq.Record) (InsertResult, error) {
	if len(records) == 0 {
		return InsertResult{}, nil
	}
	// Rows are encoded lazily: pgx encodes in a goroutine while Postgres is
	// already ingesting the rows sent before, so encoding overlaps the COPY.
	n, err := s.pool.CopyFrom(ctx, pgx.Identifier{"redrive_record"}, recordColumns, &recordSource{records: records, i: -1})
	return s.afterCopy(ctx, records, n, err)
}

// afterCopy finishes a COPY of records: done when it succeeded, else the
// records are written again the slow way that suits the error.
func (s *Store) afterCopy(ctx context.Context, records []dlq.Record, n int64, err error) (InsertResult, error) {
	if err == nil {
		return InsertResult{N: int(n)}, nil
	}
	if isUniqueViolation(err) {
		res, err := s.insertSkippingDuplicates(ctx, records)
		if err == nil || !isDataException(err) {
			return res, err
		}
	} else if !isDataException(err) {
		return InsertResult{}, fmt.Errorf("copy records: %w", err)
	}
	return s.insertOneByOne(ctx, records)
}

// insertOneByOne stores records one statement each, skipping duplicates, and
// falls back to asText for a row Postgres rejects.
func (s *Store) insertOneByOne(ctx context.Context, records []dlq.Record) (InsertResult, error) {
	var res InsertResult
	for i := range records {
		n, err := s.insertRow(ctx, &records[i], asJSON)
		if isDataException(err) {
			n, err = s.insertRow(ctx, &records[i], asText)
		}
		if err != nil {
			return InsertResult{}, fmt.Errorf("insert record %s: %w", records[i].ID, err)
		}
		res.add(i, n > 0)
	}
	return res, nil
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

func (s *Store) insertSkippingDuplicates(ctx context.Context, records []dlq.Record) (InsertResult, error) {
	var res InsertResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res = InsertResult{}
		batch := &pgx.Batch{}
		for i := range records {
			vals, err := rowValues(&records[i], asJSON)
			if err != nil {
				return fmt.Errorf("encode record %s: %w", records[i].ID, err)
			}
			batch.Queue(insertIgnoringDuplicates, vals...).Exec(func(tag pgconn.CommandTag) error {
				res.add(i, tag.RowsAffected() > 0)
				return nil
			})
		}
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return InsertResult{}, fmt.Errorf("insert records skipping duplicates: %w", err)
	}
	return res, nil
}
