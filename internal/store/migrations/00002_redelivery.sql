-- +goose Up
-- Redelivery: the scheduler claims due records under a lease, produces them to
-- their source topic, then marks them available. Invariant: next_retry_at is
-- set exactly when a record waits to be (re)delivered — retryable records at
-- their backoff time, available ones queued by an operator or a replay rule.
ALTER TABLE redrive_record
    ADD COLUMN lease_until     timestamptz, -- a scheduler holds the record until then
    ADD COLUMN lease_token     uuid,        -- which claim holds it; marking checks it
    ADD COLUMN redelivered_at  timestamptz, -- when it was last produced to its topic
    -- Operator changes for the next redelivery, the original kept untouched:
    -- {"topic": "...", "headers": [{"key","value","encoding"}], "value": "...", "value_encoding": "utf8|base64"}
    ADD COLUMN redelivery      jsonb,
    ADD COLUMN archive_pending boolean NOT NULL DEFAULT false, -- to be copied to the archive topic
    ADD COLUMN archived_at     timestamptz;

DROP INDEX redrive_record_due;
CREATE INDEX redrive_record_due ON redrive_record (next_retry_at) WHERE next_retry_at IS NOT NULL;
CREATE INDEX redrive_record_archive_pending ON redrive_record (id) WHERE archive_pending;

-- +goose Down
DROP INDEX redrive_record_archive_pending;
DROP INDEX redrive_record_due;
CREATE INDEX redrive_record_due ON redrive_record (next_retry_at) WHERE state = 'retryable';
ALTER TABLE redrive_record
    DROP COLUMN lease_until, DROP COLUMN lease_token, DROP COLUMN redelivered_at,
    DROP COLUMN redelivery, DROP COLUMN archive_pending, DROP COLUMN archived_at;
