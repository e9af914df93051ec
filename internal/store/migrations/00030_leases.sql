-- +goose NO TRANSACTION
-- +goose Up
-- Poison-proof processing (internal/redeliver): committed claims with a lease,
-- per-record failure isolation, one archiver, and DLQ identity that survives a
-- recreated topic. Indexes are built CONCURRENTLY so that upgrading a large
-- table never blocks ingest; every step can be run again.

-- A redelivery claim is committed at once and recorded here, one row per
-- claimed batch: the lease. The claiming statement marks its records
-- available (attempt + 1) and stamps them with the token; the scheduler then
-- produces them and ends the claim by deleting this row (one tiny write per
-- batch, so the records are written once, as before). A claim whose owner
-- died is found by its expiry and its records are put back as they were.
CREATE TABLE IF NOT EXISTS redrive_claim (
    token        uuid        PRIMARY KEY,
    owner        text        NOT NULL,   -- host/pid of the scheduler holding it
    queue        text        NOT NULL,
    claimed_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    ids          uuid[]      NOT NULL,   -- the claimed records
    prior_states text[]      NOT NULL    -- their states before the claim, to put them back
);
CREATE INDEX IF NOT EXISTS redrive_claim_expires ON redrive_claim (expires_at);

ALTER TABLE redrive_record
    -- The redelivery claim that last took the record; settling or rescuing a
    -- claim only touches records that still carry its token.
    ADD COLUMN IF NOT EXISTS claim_token uuid,
    -- Set while producing the record keeps failing: {reason, message,
    -- failed_at, failures, next_attempt_at}. The record waits on this backoff,
    -- apart from its retry policy's attempts.
    ADD COLUMN IF NOT EXISTS redelivery_failure jsonb,
    -- The archive outbox: pending → done, or failed (tried again at
    -- archive_retry_at, with archive_failure saying why). NULL: nothing to archive.
    ADD COLUMN IF NOT EXISTS archive_state text CHECK (archive_state IN ('pending', 'failed', 'done')),
    -- Why the last archive attempt failed, or why a done copy is only a
    -- reference copy (too_large).
    ADD COLUMN IF NOT EXISTS archive_reason text,
    ADD COLUMN IF NOT EXISTS archive_failure jsonb,
    -- When the archiver may take the record next: its backoff after a
    -- failure, or its lease while an archiver holds it (an expired lease makes
    -- the copy due again). NULL: now.
    ADD COLUMN IF NOT EXISTS archive_retry_at timestamptz,
    -- The archive claim holding the record; settling checks it.
    ADD COLUMN IF NOT EXISTS archive_token uuid,
    -- The DLQ record's own timestamp, part of its identity: a recreated DLQ
    -- topic restarts at offset 0, and its new records must not look like
    -- duplicates of the old rows. Rows stored before this migration have none.
    ADD COLUMN IF NOT EXISTS dlq_timestamp timestamptz NOT NULL DEFAULT '-infinity';

UPDATE redrive_record SET archive_state = CASE WHEN archived_at IS NULL THEN 'pending' ELSE 'done' END
WHERE state = 'discarded' AND archive_state IS NULL;

CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_dlq_identity
    ON redrive_record (dlq_topic, dlq_partition, dlq_offset, dlq_timestamp);
ALTER TABLE redrive_record DROP CONSTRAINT IF EXISTS redrive_record_dlq_coord;

-- The archiver takes due copies in due order: pending ones at once, failed
-- ones after their backoff.
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_archive_due
    ON redrive_record ((coalesce(archive_retry_at, '-infinity'::timestamptz))) WHERE archive_state IN ('pending', 'failed');
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_archive_pending;
-- Blocked records per queue (GET /ojs/v1/queues).
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_blocked
    ON redrive_record (queue) WHERE redelivery_failure IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_blocked;
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_archive_pending
    ON redrive_record (id) WHERE state = 'discarded' AND archived_at IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_archive_due;
-- Records of a recreated topic may share coordinates; the older copy wins.
DELETE FROM redrive_record a USING redrive_record b
WHERE a.dlq_topic = b.dlq_topic AND a.dlq_partition = b.dlq_partition AND a.dlq_offset = b.dlq_offset AND a.id > b.id;
ALTER TABLE redrive_record ADD CONSTRAINT redrive_record_dlq_coord UNIQUE (dlq_topic, dlq_partition, dlq_offset);
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_dlq_identity;
ALTER TABLE redrive_record
    DROP COLUMN IF EXISTS dlq_timestamp,
    DROP COLUMN IF EXISTS archive_token,
    DROP COLUMN IF EXISTS archive_retry_at,
    DROP COLUMN IF EXISTS archive_failure,
    DROP COLUMN IF EXISTS archive_reason,
    DROP COLUMN IF EXISTS archive_state,
    DROP COLUMN IF EXISTS redelivery_failure,
    DROP COLUMN IF EXISTS claim_token;
DROP TABLE IF EXISTS redrive_claim;
