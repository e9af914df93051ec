package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/dlq"
)

// ImportResult counts what an import did.
type ImportResult struct {
	// Received is how many records were given.
	Received int
	// Imported is how many were stored by this import.
	Imported int
	// Skipped is how many were already stored: a record with the same id,
	// or with the same DLQ coordinates (the same Kafka record stored under
	// another id), including repeats within the import itself.
	Skipped int
}

// createImportTable is the staging table an import copies its batches into:
// the record table's columns, dropped at the end of the transaction.
const createImportTable = "CREATE TEMP TABLE redrive_import (LIKE redrive_record INCLUDING DEFAULTS) ON COMMIT DROP"

// importRecordsSQL moves the staged records into the record table, leaving
// out every one whose id or DLQ coordinates are stored already.
var importRecordsSQL = "INSERT INTO redrive_record (" + insertColumns + ") SELECT " + insertColumns +
	" FROM redrive_import ORDER BY id ON CONFLICT DO NOTHING"

// ImportRecords stores records from another Redrive all or nothing, in one
// transaction: next gives one batch after another, and a nil batch with no
// error at the end; each batch is
// COPYed into a staging table as it comes, so that memory holds one batch;
// at the end one statement moves them into the record table, skipping those
// already stored (idempotent on the id and on the DLQ coordinates). An
// error from next, or any failure, rolls back everything: nothing of the
// import is stored.
func (s *Store) ImportRecords(ctx context.Context, next func() ([]dlq.Record, error)) (ImportResult, error) {
	var res ImportResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res = ImportResult{}
		if _, err := tx.Exec(ctx, createImportTable); err != nil {
			return fmt.Errorf("create staging table: %w", err)
		}
		for {
			batch, err := next()
			if err != nil {
				return err
			}
			if batch == nil {
				break
			}
			if len(batch) == 0 {
				continue
			}
			n, err := tx.CopyFrom(ctx, pgx.Identifier{"redrive_import"}, recordColumns, newRecordSource(batch, nil, asJSON))
			if err != nil {
				return fmt.Errorf("copy records: %w", err)
			}
			res.Received += int(n)
		}
		tag, err := tx.Exec(ctx, importRecordsSQL)
		if err != nil {
			return fmt.Errorf("store imported records: %w", err)
		}
		res.Imported = int(tag.RowsAffected())
		res.Skipped = res.Received - res.Imported
		return nil
	})
	if err != nil {
		return ImportResult{}, err
	}
	return res, nil
}

// IsRowFault reports whether err is Postgres refusing a row for what it
// holds (a value out of range, a check failed), not Postgres being
// unavailable: an import that hits one is the client's to fix.
func IsRowFault(err error) bool {
	return rowFault(err) && !errors.Is(err, context.Canceled)
}
