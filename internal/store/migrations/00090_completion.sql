-- +goose NO TRANSACTION
-- +goose Up
-- Completion (docs/redelivery.md#completion). A redelivered record is
-- completed either when it is produced (policy completion: redelivered, the
-- default) or by the consumer's acknowledgement (completion: ack), which it
-- waits for until ack_due_at; past it, the scheduler marks it unacknowledged.
-- Every step can be run again; indexes are built CONCURRENTLY so that
-- upgrading a large table never blocks ingest.
ALTER TABLE redrive_record
    -- What completed the record: 'redelivered' or 'ack'. NULL while it is not
    -- completed; completed rows stored before this migration were all
    -- acknowledged, and are read as 'ack'.
    ADD COLUMN IF NOT EXISTS completed_by text CHECK (completed_by IN ('redelivered', 'ack')),
    -- Under completion: ack, when the acknowledgement of the latest
    -- redelivery is due; NULL when none is awaited.
    ADD COLUMN IF NOT EXISTS ack_due_at timestamptz,
    -- When the record was marked unacknowledged: redelivered, and no
    -- acknowledgement came by ack_due_at. NULL otherwise.
    ADD COLUMN IF NOT EXISTS unacknowledged_at timestamptz;

-- The scheduler marks records whose acknowledgement is overdue, in due order.
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_ack_due
    ON redrive_record (ack_due_at) WHERE state = 'available' AND ack_due_at IS NOT NULL AND unacknowledged_at IS NULL;
-- Unacknowledged records per queue (GET /ojs/v1/queues).
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_unacknowledged
    ON redrive_record (queue) WHERE state = 'available' AND unacknowledged_at IS NOT NULL;

-- Records redelivered before this migration that are still available were
-- never acknowledged (before completion policies, nothing else completed a
-- record): their acknowledgement is overdue since their redelivery, and the
-- scheduler marks them unacknowledged at its first pass, so that an operator
-- sees them and may retry them. Records being produced right now (their
-- claim is open) or queued for redelivery are left alone.
UPDATE redrive_record SET ack_due_at = coalesce(redelivered_at, updated_at)
WHERE state = 'available' AND next_retry_at IS NULL AND ack_due_at IS NULL AND unacknowledged_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM redrive_claim c WHERE c.token = redrive_record.claim_token);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_unacknowledged;
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_ack_due;
ALTER TABLE redrive_record
    DROP COLUMN IF EXISTS unacknowledged_at,
    DROP COLUMN IF EXISTS ack_due_at,
    DROP COLUMN IF EXISTS completed_by;
