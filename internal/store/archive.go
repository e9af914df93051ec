package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/dlq"
)

// The archive outbox. A record whose archive copy is due has archive_state
// pending (or failed, after a failed attempt, due again at archive_retry_at).
// The archiver claims due copies by pushing archive_retry_at to the end of its
// lease and stamping archive_token, and commits at once; it then produces the
// copies and settles each record with the token check. If it dies, the lease
// passes and the copies are due again: a crash re-sends, never skips.
//
// One copy per record and state, whatever imports happen: each copy made is
// noted in redrive_archive_copy (the record, and the state, attempt, number
// of errors and latest error's time it was copied with: what tells one
// discard of a record from the next), and the note outlives the record.
// A record due for a copy it has had already, as it is — stored again by
// an import after a purge — is marked done from its note instead of being
// copied again (ClaimArchive). The notes of the DLQ topics of an archive
// topic deleted and created again go with its copies (ArchiveTopicSeen):
// those are made again.

// ArchiveClaim is a committed claim of records whose archive copy is due.
type ArchiveClaim struct {
	Token   string
	Records []dlq.Record
	// Copied counts the due records marked done without a claim: their
	// copy, as they are, was made already.
	Copied int
}

// claimedReadColumns are readColumns of a claimed lifecycle (claimed) and
// its wide row (d).
var claimedReadColumns = readSelectOf("d", "claimed", false)

// ClaimArchive claims up to limit records whose archive copy is due at now,
// oldest due first, for lease. Records whose copy, as they are, was made
// already (redrive_archive_copy) are marked done instead, as that copy left
// them, and not claimed; Copied counts them.
func (s *Store) ClaimArchive(ctx context.Context, now time.Time, limit int, lease time.Duration) (*ArchiveClaim, error) {
	token := uuid.Must(uuid.NewV7()).String()
	c := &ArchiveClaim{}
	for {
		copied, recs, err := s.claimArchive(ctx, now, limit, token, lease)
		if err != nil {
			return nil, fmt.Errorf("claim archive copies: %w", err)
		}
		c.Copied += copied
		if len(recs) > 0 {
			c.Token, c.Records = token, recs
			return c, nil
		}
		if copied == 0 {
			return c, nil // nothing due
		}
		// Every due record taken had its copy: the next ones may not.
	}
}

// archiveCopy is the identity of an archive copy: what tells one copy of a
// record from another (redrive_archive_copy's key, less the id).
type archiveCopy struct {
	state       string
	attempt     int
	errors      int
	lastErrorAt time.Time // the latest error's time (zero: none), to the microsecond, rounded as Postgres does
}

// archiveCopyOf is the copy the archiver makes of r as it is.
func archiveCopyOf(r *dlq.Record) archiveCopy {
	c := archiveCopy{state: string(r.State), attempt: r.Attempt, errors: len(r.Errors)}
	if len(r.Errors) > 0 {
		c.lastErrorAt = r.LastError().OccurredAt.UTC().Round(time.Microsecond)
	}
	return c
}

// madeCopy is a copy noted in redrive_archive_copy: when it was made, and
// the reason of a reference copy.
type madeCopy struct {
	at     time.Time
	reason *string
}

// claimArchive is one attempt of ClaimArchive, in one transaction: it locks
// up to limit records whose copy is due, oldest due first, marks done those
// whose copy as they are was made already, claims the others with token
// and returns how many it marked and the records it claimed.
func (s *Store) claimArchive(ctx context.Context, now time.Time, limit int, token string, lease time.Duration) (int, []dlq.Record, error) {
	var copied int
	var claimed []dlq.Record
	err := s.WithTx(ctx, func(ctx context.Context, tx *Tx) error {
		recs, err := collect(ctx, tx.tx, "read due copies", scanRecord, `
			WITH due AS (
				SELECT id FROM redrive_lifecycle
				WHERE archive_state IN ('pending', 'failed') AND coalesce(archive_retry_at, '-infinity'::timestamptz) <= $1
				ORDER BY coalesce(archive_retry_at, '-infinity'::timestamptz) LIMIT $2 FOR UPDATE SKIP LOCKED),
			claimed AS (SELECT l.* FROM redrive_lifecycle l JOIN due ON l.id = due.id)
			SELECT `+claimedReadColumns+` FROM claimed JOIN redrive_record_data d ON d.id = claimed.id`, now, limit)
		if err != nil || len(recs) == 0 {
			return err
		}
		ids := make([]string, len(recs))
		for i := range recs {
			ids[i] = recs[i].ID
		}
		made := map[string]map[archiveCopy]madeCopy{}
		rows, err := tx.tx.Query(ctx, `SELECT id::text, state, attempt, errors, last_error_at, reason, archived_at
			FROM redrive_archive_copy WHERE id = ANY($1::uuid[])`, ids)
		if err != nil {
			return fmt.Errorf("read the copies made: %w", err)
		}
		var id string
		var k archiveCopy
		var m madeCopy
		if _, err := pgx.ForEachRow(rows, []any{&id, &k.state, &k.attempt, &k.errors, &k.lastErrorAt, &m.reason, &m.at}, func() error {
			if made[id] == nil {
				made[id] = map[archiveCopy]madeCopy{}
			}
			k.lastErrorAt = k.lastErrorAt.UTC()
			made[id][k] = m
			return nil
		}); err != nil {
			return fmt.Errorf("read the copies made: %w", err)
		}
		var doneIDs, claimIDs []string
		var doneReasons []*string
		var doneAt []time.Time
		for i := range recs {
			r := &recs[i]
			if m, ok := made[r.ID][archiveCopyOf(r)]; ok {
				doneIDs, doneReasons, doneAt = append(doneIDs, r.ID), append(doneReasons, m.reason), append(doneAt, m.at)
				continue
			}
			claimIDs, claimed = append(claimIDs, r.ID), append(claimed, *r)
		}
		if len(doneIDs) > 0 {
			if _, err := tx.tx.Exec(ctx, `UPDATE redrive_lifecycle r SET archive_state = 'done', archive_reason = m.reason,
				archive_failure = NULL, archive_retry_at = NULL, archive_token = NULL, archived_at = m.archived_at
				FROM unnest($1::uuid[], $2::text[], $3::timestamptz[]) AS m(id, reason, archived_at) WHERE r.id = m.id`,
				doneIDs, doneReasons, doneAt); err != nil {
				return fmt.Errorf("mark the copies made already: %w", err)
			}
			copied = len(doneIDs)
		}
		if len(claimIDs) > 0 {
			if _, err := tx.tx.Exec(ctx, `UPDATE redrive_lifecycle SET archive_token = $2,
				archive_retry_at = $1::timestamptz + $3 * interval '1 millisecond' WHERE id = ANY($4::uuid[])`,
				now, token, lease.Milliseconds(), claimIDs); err != nil {
				return fmt.Errorf("claim: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	return copied, claimed, nil
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
// touching only records that still carry the claim's token, and notes each
// copy made as the claim read its record (redrive_archive_copy). It returns
// how many were settled; fewer than asked means the lease passed and another
// archiver took them.
func (s *Store) SettleArchive(ctx context.Context, c *ArchiveClaim, outcomes []ArchiveOutcome, now time.Time) (int, error) {
	if c.Token == "" || len(outcomes) == 0 {
		return 0, nil
	}
	n := len(outcomes)
	ids, states, reasons := make([]string, n), make([]string, n), make([]*string, n)
	failures, retryAt := make([][]byte, n), make([]*time.Time, n)
	// The copies made, as their records were claimed (the copy shows that).
	claimed := make(map[string]*dlq.Record, len(c.Records))
	for i := range c.Records {
		claimed[c.Records[i].ID] = &c.Records[i]
	}
	var madeIDs, madeStates, madeTopics []string
	var madeAttempts, madeErrors []int32
	var madeLastErrorAt []time.Time
	for i, o := range outcomes {
		if r := claimed[o.ID]; r != nil && o.Failure == nil {
			k := archiveCopyOf(r)
			madeIDs, madeStates, madeTopics = append(madeIDs, r.ID), append(madeStates, k.state), append(madeTopics, r.DLQ.Topic)
			madeAttempts, madeErrors = append(madeAttempts, int32(k.attempt)), append(madeErrors, int32(k.errors))
			madeLastErrorAt = append(madeLastErrorAt, k.lastErrorAt)
		}
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
	var settled int
	err := s.pool.QueryRow(ctx, `
		WITH settled AS (
			UPDATE redrive_lifecycle r
			SET archive_state = o.state, archive_reason = o.reason, archive_failure = o.failure,
			    archive_retry_at = o.retry_at, archive_token = NULL,
			    archived_at = CASE WHEN o.state = 'done' THEN $7 ELSE r.archived_at END
			FROM unnest($2::uuid[], $3::text[], $4::text[], $5::jsonb[], $6::timestamptz[]) AS o(id, state, reason, failure, retry_at)
			WHERE r.id = o.id AND r.archive_token = $1
			RETURNING r.id, r.archive_state, r.archive_reason),
		made AS (
			INSERT INTO redrive_archive_copy (id, state, attempt, errors, last_error_at, dlq_topic, reason, archived_at)
			SELECT m.id, m.state, m.attempt, m.errors, m.last_error_at, m.dlq_topic, settled.archive_reason, $7
			FROM settled JOIN unnest($8::uuid[], $9::text[], $10::int[], $11::int[], $12::timestamptz[], $13::text[])
				AS m(id, state, attempt, errors, last_error_at, dlq_topic) ON m.id = settled.id
			WHERE settled.archive_state = 'done'
			ON CONFLICT DO NOTHING)
		SELECT count(*)::int FROM settled`, c.Token, ids, states, reasons, failures, retryAt, now,
		madeIDs, madeStates, madeAttempts, madeErrors, madeLastErrorAt, madeTopics).Scan(&settled)
	if err != nil {
		return 0, fmt.Errorf("settle archive claim %s: %w", c.Token, err)
	}
	return settled, nil
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
