package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/dlq"
)

// UpdateLocked locks the records with the given ids (in id order, so that
// concurrent callers cannot deadlock each other), passes them to change, and
// saves the lifecycle fields of the records change returns — all in one
// transaction. Ids that do not exist are simply absent from the map.
//
// The saved fields are those a failure, an acknowledgement or an operator
// changes: state, exhaustion, attempt, max_attempts, errors, retry,
// next_retry_at, discarded_at, completed_at, completed_by, ack_due_at,
// unacknowledged_at, updated_at (and failed_at, from the errors). A record
// that becomes
// discarded is (again) due to be archived, with its longer history.
//
// If Postgres refuses the new error history for what it holds (details that
// jsonb cannot take), the transaction is run again, change included, with
// details kept as text.
func (s *Store) UpdateLocked(ctx context.Context, ids []string,
	change func(records map[string]*dlq.Record) ([]*dlq.Record, error)) (int, error) {
	n, err := s.updateLocked(ctx, ids, change, asJSON)
	if rowFault(err) {
		n, err = s.updateLocked(ctx, ids, change, asText)
	}
	return n, err
}

func (s *Store) updateLocked(ctx context.Context, ids []string,
	change func(records map[string]*dlq.Record) ([]*dlq.Record, error), mode jsonMode) (int, error) {
	saved := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, "SELECT "+storedSQL+" FROM redrive_record WHERE id = ANY($1) ORDER BY id FOR UPDATE", ids)
		if err != nil {
			return fmt.Errorf("lock records: %w", err)
		}
		recs, err := pgx.CollectRows(rows, scanRecord)
		if err != nil {
			return fmt.Errorf("lock records: %w", err)
		}
		byID := make(map[string]*dlq.Record, len(recs))
		for i := range recs {
			byID[recs[i].ID] = &recs[i]
		}
		updates, err := change(byID)
		if err != nil {
			return err
		}
		batch := &pgx.Batch{}
		for _, r := range updates {
			if err := queueLifecycle(batch, r, mode); err != nil {
				return err
			}
		}
		saved = len(updates)
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return 0, fmt.Errorf("update records: %w", err)
	}
	return saved, nil
}

// queueLifecycle queues the UPDATE that saves r's lifecycle fields (see
// UpdateLocked) on batch.
func queueLifecycle(batch *pgx.Batch, r *dlq.Record, mode jsonMode) error {
	errs, err := encodeErrors(r.Errors, mode)
	if err != nil {
		return fmt.Errorf("encode errors of %s: %w", r.ID, err)
	}
	// The lifecycle first, then the wide row (the order every statement
	// changing both takes: migration 00180). The wide row is written only
	// when what it holds changed (a repeat failure's error, a policy): an
	// acknowledgement writes the lifecycle alone. The lifecycle's copies of
	// error_type and fingerprint follow.
	batch.Queue(`WITH l AS (
			UPDATE redrive_lifecycle SET state = $2, exhaustion = $3, attempt = $4,
				error_type = $7, next_retry_at = $9, discarded_at = $10, completed_at = $11,
				updated_at = $12, fingerprint = coalesce(nullif($13, ''), fingerprint),
				completed_by = $15, ack_due_at = $16, unacknowledged_at = $17,
				`+archiveAgainIf(`$2 = 'discarded' AND state <> 'discarded'`)+`
			WHERE id = $1 RETURNING id)
		UPDATE redrive_record_data d SET max_attempts = $5, errors = $6, error_type = $7, retry = $8,
			fingerprint = coalesce(nullif($13, ''), d.fingerprint), failed_at = $14
		FROM l WHERE d.id = l.id AND (d.max_attempts, d.errors, d.error_type, d.retry, d.fingerprint, d.failed_at)
			IS DISTINCT FROM ($5, $6::jsonb, $7, $8::jsonb, coalesce(nullif($13, ''), d.fingerprint), $14::timestamptz)`,
		r.ID, string(r.State), nullIfEmpty(r.Exhaustion), r.Attempt, r.MaxAttempts,
		errs, clean(r.LastError().Type), jsonOr(r.Retry, emptyObject), r.NextRetryAt, r.DiscardedAt, r.CompletedAt,
		r.UpdatedAt, r.Fingerprint, FailedAt(r), nullIfEmptyString(string(r.CompletedBy)), r.AckDueAt, r.UnacknowledgedAt)
	return nil
}

// archiveAgainIf renders SET assignments that make a record's archive copy due
// afresh (pending, no failure, not archived) when cond (a constant condition
// of the statement) holds, and keep the archive columns as they are otherwise.
func archiveAgainIf(cond string) string {
	return strings.ReplaceAll(`archive_state = CASE WHEN {cond} THEN 'pending' ELSE archive_state END,
		archive_reason = CASE WHEN {cond} THEN NULL ELSE archive_reason END,
		archive_failure = CASE WHEN {cond} THEN NULL ELSE archive_failure END,
		archive_retry_at = CASE WHEN {cond} THEN NULL ELSE archive_retry_at END,
		archive_token = CASE WHEN {cond} THEN NULL ELSE archive_token END,
		archived_at = CASE WHEN {cond} THEN NULL ELSE archived_at END`, "{cond}", cond)
}
