package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/internal/dlq"
)

// The archive outbox. A record whose archive copy is due has archive_state
// pending (or failed, after a failed attempt, due again at archive_retry_at).
// The archiver claims due copies by pushing archive_retry_at to the end of its
// lease and stamping archive_token, and commits at once; it then produces the
// copies and settles each record with the token check. If it dies, the lease
// passes and the copies are due again: a crash re-sends, never skips.

// ArchiveClaim is a committed claim of records whose archive copy is due.
type ArchiveClaim struct {
	Token   string
	Records []dlq.Record
}

// claimedReadColumns are readColumns of a claimed lifecycle (claimed) and
// its wide row (d).
var claimedReadColumns = readSelectOf("d", "claimed", false)

// ClaimArchive claims up to limit records whose archive copy is due at now,
// oldest due first, for lease.
func (s *Store) ClaimArchive(ctx context.Context, now time.Time, limit int, lease time.Duration) (*ArchiveClaim, error) {
	token := uuid.Must(uuid.NewV7()).String()
	recs, err := collect(ctx, s.pool, "claim archive copies", scanRecord, `
		WITH due AS (
			SELECT id FROM redrive_lifecycle
			WHERE archive_state IN ('pending', 'failed') AND coalesce(archive_retry_at, '-infinity'::timestamptz) <= $1
			ORDER BY coalesce(archive_retry_at, '-infinity'::timestamptz) LIMIT $2 FOR UPDATE SKIP LOCKED),
		claimed AS (
			UPDATE redrive_lifecycle r SET archive_token = $3, archive_retry_at = $1::timestamptz + $4 * interval '1 millisecond'
			FROM due WHERE r.id = due.id
			RETURNING r.*)
		SELECT `+claimedReadColumns+` FROM claimed JOIN redrive_record_data d ON d.id = claimed.id`, now, limit, token, lease.Milliseconds())
	if err != nil {
		return nil, err
	}
	c := &ArchiveClaim{Records: recs}
	if len(recs) > 0 {
		c.Token = token
	}
	return c, nil
}

// ArchiveOutcome is what happened to one claimed record's archive copy.
type ArchiveOutcome struct {
	ID string
	// Failure is set when the copy could not be produced: the record is tried
	// again at Failure.NextAttemptAt.
	Failure *dlq.DeliveryFailure
	// Reason is set for a copy that is done but only a reference copy
	// (dlq.ReasonTooLarge).
	Reason string
}

// SettleArchive records the outcomes of an archive claim, in one statement,
// touching only records that still carry the claim's token. It returns how
// many were settled; fewer than asked means the lease passed and another
// archiver took them.
func (s *Store) SettleArchive(ctx context.Context, c *ArchiveClaim, outcomes []ArchiveOutcome, now time.Time) (int, error) {
	if c.Token == "" || len(outcomes) == 0 {
		return 0, nil
	}
	n := len(outcomes)
	ids, states, reasons := make([]string, n), make([]string, n), make([]*string, n)
	failures, retryAt := make([][]byte, n), make([]*time.Time, n)
	for i, o := range outcomes {
		ids[i], states[i] = o.ID, string(dlq.ArchiveDone)
		if o.Reason != "" {
			reasons[i] = &o.Reason
		}
		if f := o.Failure; f != nil {
			b, err := json.Marshal(f)
			if err != nil {
				return 0, fmt.Errorf("settle archive claim: encode failure: %w", err)
			}
			states[i], reasons[i], failures[i], retryAt[i] = string(dlq.ArchiveFailed), &f.Reason, b, &f.NextAttemptAt
		}
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE redrive_lifecycle r
		SET archive_state = o.state, archive_reason = o.reason, archive_failure = o.failure,
		    archive_retry_at = o.retry_at, archive_token = NULL,
		    archived_at = CASE WHEN o.state = 'done' THEN $7 ELSE r.archived_at END
		FROM unnest($2::uuid[], $3::text[], $4::text[], $5::jsonb[], $6::timestamptz[]) AS o(id, state, reason, failure, retry_at)
		WHERE r.id = o.id AND r.archive_token = $1`, c.Token, ids, states, reasons, failures, retryAt, now)
	if err != nil {
		return 0, fmt.Errorf("settle archive claim %s: %w", c.Token, err)
	}
	return int(tag.RowsAffected()), nil
}

// NextArchiveDue returns when the next archive copy is due (before now when
// one is due at once), zero when none is waiting.
func (s *Store) NextArchiveDue(ctx context.Context, now time.Time) (time.Time, error) {
	at, err := s.q.ArchiveNextDue(ctx, s.pool, now)
	if err != nil {
		return time.Time{}, fmt.Errorf("next archive due: %w", err)
	}
	if t, ok := at.(time.Time); ok {
		return t, nil
	}
	return time.Time{}, nil // none waiting (NULL)
}
