package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

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

// createImportTables are the staging tables an import copies its batches
// into, one per record table, dropped at the end of the transaction.
// The lifecycle's first: the order every statement locks the record tables in.
var createImportTables = []string{
	"CREATE TEMP TABLE redrive_import_lifecycle (LIKE redrive_lifecycle INCLUDING DEFAULTS) ON COMMIT DROP",
	"CREATE TEMP TABLE redrive_import_data (LIKE redrive_record_data INCLUDING DEFAULTS) ON COMMIT DROP",
}

// importRecordsSQL moves the staged records into the record tables in the
// order every writer takes them (coordinates, lifecycles, wide rows): their
// DLQ coordinates (redrive_record_coord, which refuses coordinates stored
// already, whatever partition their record is in), then the lifecycle and
// the wide row of each record whose coordinates were taken and whose id is
// not stored yet. Repeats within the import are left out the same way.
var importRecordsSQL = "WITH c AS (INSERT INTO redrive_record_coord (" + strings.Join(coordColumns, ", ") + ") SELECT " +
	"i." + strings.Join(coordColumns, ", i.") + " FROM redrive_import_data i " +
	"WHERE NOT EXISTS (SELECT 1 FROM redrive_lifecycle r WHERE r.id = i.id) ORDER BY i.id ON CONFLICT DO NOTHING RETURNING id), " +
	"l AS (INSERT INTO redrive_lifecycle (" + strings.Join(lifecycleColumns, ", ") + ") SELECT DISTINCT ON (l.id) l." +
	strings.Join(lifecycleColumns, ", l.") + " FROM redrive_import_lifecycle l JOIN c ON c.id = l.id ORDER BY l.id ON CONFLICT DO NOTHING RETURNING id) " +
	"INSERT INTO redrive_record_data (" + strings.Join(dataColumns, ", ") + ") SELECT DISTINCT ON (i.id) i." +
	strings.Join(dataColumns, ", i.") + " FROM redrive_import_data i JOIN l ON l.id = i.id ORDER BY i.id"

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
		for _, create := range createImportTables {
			if _, err := tx.Exec(ctx, create); err != nil {
				return fmt.Errorf("create staging table: %w", err)
			}
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
			n, err := tx.CopyFrom(ctx, pgx.Identifier{"redrive_import_data"}, dataColumns, newRecordSource(batch, nil, asJSON))
			if err != nil {
				return fmt.Errorf("copy records: %w", err)
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"redrive_import_lifecycle"}, lifecycleColumns, &lifecycleSource{records: batch, i: -1}); err != nil {
				return fmt.Errorf("copy records' lifecycles: %w", err)
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
