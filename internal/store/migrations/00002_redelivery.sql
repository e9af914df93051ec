-- +goose Up
-- Redelivery: the scheduler claims due records (row locks held by its claiming
-- transaction are the lease), produces them to their source topic, then marks
-- them available. Invariant: next_retry_at is set exactly when a record waits
-- to be (re)delivered — retryable records at their backoff time, available ones
-- queued by an operator or a replay rule.
ALTER TABLE redrive_record
    ADD COLUMN redelivered_at  timestamptz, -- when it was last produced to its topic
    -- Operator changes for the next redelivery, the original kept untouched:
    -- {"topic": "...", "headers": [{"key","value","encoding"}], "value": "...", "value_encoding": "utf8|base64"}
    ADD COLUMN redelivery      jsonb,
    -- When the record was copied to the archive topic; a discarded record with
    -- none is waiting to be archived.
    ADD COLUMN archived_at     timestamptz;

-- The scheduler walks the queues that have records waiting (a loose index scan)
-- and claims each queue's due records separately, so that pausing or
-- rate-limiting one topic never starves another.
DROP INDEX redrive_record_due;
CREATE INDEX redrive_record_due_by_queue ON redrive_record (queue, next_retry_at) WHERE next_retry_at IS NOT NULL;
CREATE INDEX redrive_record_archive_pending ON redrive_record (id) WHERE state = 'discarded' AND archived_at IS NULL;

-- +goose Down
DROP INDEX redrive_record_archive_pending;
DROP INDEX redrive_record_due_by_queue;
CREATE INDEX redrive_record_due ON redrive_record (next_retry_at) WHERE state = 'retryable';
ALTER TABLE redrive_record
    DROP COLUMN redelivered_at,
    DROP COLUMN redelivery, DROP COLUMN archived_at;
