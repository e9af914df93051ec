-- +goose Up
-- The vertical split (docs/performance.md#redelivery). A record was one wide
-- row, and every redelivery rewrote all of it: the claim changes indexed
-- columns (state, attempt, next_retry_at, completed_at), so no update was
-- HOT, and each one wrote a new version of the key, value, headers, errors
-- and payload and an entry in 13 of the table's 21 indexes.
--
-- Now a record is two rows with the same id:
-- - redrive_record_data, the wide row: what failed and why (key, value,
--   headers, payload, errors, source and DLQ coordinates, policy, meta),
--   written at ingest and by operators (a repeat failure joining it, an
--   edit, a backfill), and only read by a redelivery;
-- - redrive_lifecycle, the narrow row: where the record stands (state,
--   attempt, due time, completion, claim, redelivery failure, archive copy,
--   worker lease), with the indexes of the scheduler, the archiver, the
--   workers, the pruner and the listings by state, and the statistics
--   triggers. It also keeps copies of the dimensions the statistics group
--   by (queue, type, error_type, fingerprint, and the key and value bytes),
--   and of format, so that a change of state is counted from this row
--   alone; statements that change them on the wide row change them here
--   too, in the same statement.
-- redrive_record becomes a view joining the two, column for column what the
-- table was: every read (the API, the console, an operator's own SQL) reads
-- it unchanged; writes go to the table that holds the column.
--
-- One transaction: the record tables are locked (ingest, the scheduler and
-- the API wait) while every row's lifecycle is copied and its indexes are
-- built. docs/operations.md gives the duration measured at 200,000 and
-- 1,000,000 records. Dropped columns free no space in the wide rows already
-- stored (a later VACUUM FULL or pg_repack would); new rows are narrower.

ALTER TABLE redrive_record RENAME TO redrive_record_data;

CREATE TABLE redrive_lifecycle (
    id                 uuid        PRIMARY KEY,  -- the record's id (redrive_record_data.id)
    queue              text        NOT NULL,     -- copies of the wide row's dimensions, kept in step
    type               text        NOT NULL,
    error_type         text        NOT NULL,
    fingerprint        text        NOT NULL,
    format             text        NOT NULL,
    bytes              bigint      NOT NULL,     -- octet_length(key) + octet_length(value): queue capacity
    state              text        NOT NULL CHECK (state IN ('retryable', 'available', 'completed', 'discarded')),
    exhaustion         text        CHECK (exhaustion IN ('dead_letter', 'discard', 'cancelled')),
    attempt            integer     NOT NULL,
    enqueued_at        timestamptz,
    next_retry_at      timestamptz,
    discarded_at       timestamptz,
    completed_at       timestamptz,
    completed_by       text        CHECK (completed_by IN ('redelivered', 'ack')),
    redelivered_at     timestamptz,
    redelivery_failure jsonb,
    claim_token        uuid,
    ack_due_at         timestamptz,
    unacknowledged_at  timestamptz,
    archive_state      text        CHECK (archive_state IN ('pending', 'failed', 'done')),
    archive_reason     text,
    archive_failure    jsonb,
    archive_retry_at   timestamptz,
    archive_token      uuid,
    archived_at        timestamptz,
    fetch_at           timestamptz,
    lease_until        timestamptz,
    worker_id          text,
    result             jsonb,
    updated_at         timestamptz NOT NULL,
    CONSTRAINT redrive_lifecycle_ojs_not_kafka CHECK (format <> 'ojs' OR next_retry_at IS NULL)
);

INSERT INTO redrive_lifecycle (id, queue, type, error_type, fingerprint, format, bytes, state, exhaustion, attempt,
    enqueued_at, next_retry_at, discarded_at, completed_at, completed_by, redelivered_at, redelivery_failure, claim_token,
    ack_due_at, unacknowledged_at, archive_state, archive_reason, archive_failure, archive_retry_at, archive_token,
    archived_at, fetch_at, lease_until, worker_id, result, updated_at)
SELECT id, queue, type, error_type, fingerprint, format,
    octet_length(coalesce(key, ''::bytea)) + octet_length(coalesce(value, ''::bytea)), state, exhaustion, attempt,
    enqueued_at, next_retry_at, discarded_at, completed_at, completed_by, redelivered_at, redelivery_failure, claim_token,
    ack_due_at, unacknowledged_at, archive_state, archive_reason, archive_failure, archive_retry_at, archive_token,
    archived_at, fetch_at, lease_until, worker_id, result, updated_at
FROM redrive_record_data;

-- The lifecycle's indexes: the same as the wide table had, by the same
-- statements. A claim writes an entry in the primary key, (state, id),
-- (queue, attempt, id) and one partial index (completed, or ack_due).
CREATE INDEX redrive_lifecycle_state_id ON redrive_lifecycle (state, id);
CREATE INDEX redrive_lifecycle_exhaustion_id ON redrive_lifecycle (exhaustion, id) WHERE exhaustion IS NOT NULL;
CREATE INDEX redrive_lifecycle_attempt ON redrive_lifecycle (queue, attempt, id);
CREATE INDEX redrive_lifecycle_next_retry ON redrive_lifecycle (queue, next_retry_at, id) WHERE next_retry_at IS NOT NULL;
CREATE INDEX redrive_lifecycle_waiting ON redrive_lifecycle (queue, id) WHERE state = 'retryable';
CREATE INDEX redrive_lifecycle_discarded ON redrive_lifecycle (queue, exhaustion, discarded_at) WHERE state = 'discarded';
CREATE INDEX redrive_lifecycle_completed ON redrive_lifecycle (queue, completed_at) WHERE state = 'completed';
CREATE INDEX redrive_lifecycle_ack_due ON redrive_lifecycle (ack_due_at)
    WHERE state = 'available' AND ack_due_at IS NOT NULL AND unacknowledged_at IS NULL;
CREATE INDEX redrive_lifecycle_unacknowledged ON redrive_lifecycle (queue) WHERE state = 'available' AND unacknowledged_at IS NOT NULL;
CREATE INDEX redrive_lifecycle_blocked ON redrive_lifecycle (queue) WHERE redelivery_failure IS NOT NULL;
CREATE INDEX redrive_lifecycle_archive_due ON redrive_lifecycle ((coalesce(archive_retry_at, '-infinity'::timestamptz)))
    WHERE archive_state IN ('pending', 'failed');
CREATE INDEX redrive_lifecycle_fetch_due ON redrive_lifecycle (queue, fetch_at) WHERE fetch_at IS NOT NULL;
CREATE INDEX redrive_lifecycle_lease ON redrive_lifecycle (lease_until) WHERE lease_until IS NOT NULL;

-- The statistics follow the lifecycle: its inserts, deletes and updates
-- (a change of state, or of a dimension copied to it) are what they count.
DROP TRIGGER redrive_record_count_ins ON redrive_record_data;
DROP TRIGGER redrive_record_count_del ON redrive_record_data;
DROP TRIGGER redrive_record_count_upd ON redrive_record_data;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_record_count_ins() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count_delta (queue, type, error_type, state, exhaustion, fingerprint, n, bytes)
    SELECT queue, type, error_type, state, coalesce(exhaustion, ''), fingerprint, count(*), sum(bytes)
    FROM new_rows GROUP BY 1, 2, 3, 4, 5, 6;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_record_count_del() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count_delta (queue, type, error_type, state, exhaustion, fingerprint, n, bytes)
    SELECT queue, type, error_type, state, coalesce(exhaustion, ''), fingerprint, -count(*), -sum(bytes)
    FROM old_rows GROUP BY 1, 2, 3, 4, 5, 6;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_record_count_upd() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count_delta (queue, type, error_type, state, exhaustion, fingerprint, n, bytes)
    SELECT queue, type, error_type, state, exhaustion, fingerprint, sum(d), sum(b)
    FROM (SELECT queue, type, error_type, state, coalesce(exhaustion, '') AS exhaustion, fingerprint, -1 AS d, -bytes AS b FROM old_rows
          UNION ALL
          SELECT queue, type, error_type, state, coalesce(exhaustion, ''), fingerprint, 1, bytes FROM new_rows) c
    GROUP BY 1, 2, 3, 4, 5, 6
    HAVING sum(d) <> 0 OR sum(b) <> 0;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER redrive_record_count_ins AFTER INSERT ON redrive_lifecycle
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION redrive_record_count_ins();
CREATE TRIGGER redrive_record_count_del AFTER DELETE ON redrive_lifecycle
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION redrive_record_count_del();
CREATE TRIGGER redrive_record_count_upd AFTER UPDATE ON redrive_lifecycle
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION redrive_record_count_upd();

-- The moved columns leave the wide table, with their indexes and checks.
DROP INDEX redrive_record_state_id;
DROP INDEX redrive_record_exhaustion_id;
DROP INDEX redrive_record_attempt;
DROP INDEX redrive_record_next_retry;
DROP INDEX redrive_record_waiting;
DROP INDEX redrive_record_discarded;
DROP INDEX redrive_record_completed;
DROP INDEX redrive_record_ack_due;
DROP INDEX redrive_record_unacknowledged;
DROP INDEX redrive_record_blocked;
DROP INDEX redrive_record_archive_due;
DROP INDEX redrive_record_fetch_due;
DROP INDEX redrive_record_lease;
ALTER TABLE redrive_record_data DROP CONSTRAINT redrive_record_ojs_not_kafka;
ALTER TABLE redrive_record_data
    DROP COLUMN state, DROP COLUMN exhaustion, DROP COLUMN attempt, DROP COLUMN enqueued_at,
    DROP COLUMN next_retry_at, DROP COLUMN discarded_at, DROP COLUMN completed_at, DROP COLUMN completed_by,
    DROP COLUMN redelivered_at, DROP COLUMN redelivery_failure, DROP COLUMN claim_token,
    DROP COLUMN ack_due_at, DROP COLUMN unacknowledged_at,
    DROP COLUMN archive_state, DROP COLUMN archive_reason, DROP COLUMN archive_failure,
    DROP COLUMN archive_retry_at, DROP COLUMN archive_token, DROP COLUMN archived_at,
    DROP COLUMN fetch_at, DROP COLUMN lease_until, DROP COLUMN worker_id, DROP COLUMN result,
    DROP COLUMN updated_at;

-- The record as it was: the wide row and its lifecycle, column for column
-- in the table's old order (then lifecycle_queue). Reads only; the planner
-- starts from whichever side's index serves the filter. SELECT … FOR UPDATE
-- on it locks each record's lifecycle, then its wide row (the order of
-- FROM): every statement that changes both rows writes the lifecycle first,
-- so two of them never wait on each other crosswise.
CREATE VIEW redrive_record AS
SELECT d.id, d.queue, d.type, l.state, l.exhaustion, l.attempt, d.max_attempts,
    d.source_partition, d.source_offset, d.source_timestamp, d.source_group,
    d.dlq_topic, d.dlq_partition, d.dlq_offset, d.format, d.key, d.value, d.headers, d.payload,
    d.error_type, d.errors, d.retry, d.meta, d.created_at, l.enqueued_at, l.next_retry_at,
    l.discarded_at, l.completed_at, l.updated_at, l.redelivered_at, d.redelivery, l.archived_at,
    l.claim_token, l.redelivery_failure, l.archive_state, l.archive_reason, l.archive_failure,
    l.archive_retry_at, l.archive_token, d.dlq_timestamp, d.fingerprint, d.payload_omitted, d.failed_at,
    l.completed_by, l.ack_due_at, l.unacknowledged_at, d.value_schema, d.key_schema, d.key_payload,
    d.decode_error, d.decode_pending, l.fetch_at, l.lease_until, l.worker_id, l.result,
    -- The lifecycle's copy of queue (the same value), for the statements
    -- that read the lifecycle's indexes starting with the queue.
    l.queue AS lifecycle_queue
FROM redrive_lifecycle l JOIN redrive_record_data d ON d.id = l.id;

ANALYZE redrive_lifecycle;

-- +goose Down
DROP VIEW redrive_record;
ALTER TABLE redrive_record_data
    ADD COLUMN state text, ADD COLUMN exhaustion text, ADD COLUMN attempt integer, ADD COLUMN enqueued_at timestamptz,
    ADD COLUMN next_retry_at timestamptz, ADD COLUMN discarded_at timestamptz, ADD COLUMN completed_at timestamptz,
    ADD COLUMN completed_by text, ADD COLUMN redelivered_at timestamptz, ADD COLUMN redelivery_failure jsonb,
    ADD COLUMN claim_token uuid, ADD COLUMN ack_due_at timestamptz, ADD COLUMN unacknowledged_at timestamptz,
    ADD COLUMN archive_state text, ADD COLUMN archive_reason text, ADD COLUMN archive_failure jsonb,
    ADD COLUMN archive_retry_at timestamptz, ADD COLUMN archive_token uuid, ADD COLUMN archived_at timestamptz,
    ADD COLUMN fetch_at timestamptz, ADD COLUMN lease_until timestamptz, ADD COLUMN worker_id text,
    ADD COLUMN result jsonb, ADD COLUMN updated_at timestamptz;
UPDATE redrive_record_data d SET state = l.state, exhaustion = l.exhaustion, attempt = l.attempt,
    enqueued_at = l.enqueued_at, next_retry_at = l.next_retry_at, discarded_at = l.discarded_at,
    completed_at = l.completed_at, completed_by = l.completed_by, redelivered_at = l.redelivered_at,
    redelivery_failure = l.redelivery_failure, claim_token = l.claim_token, ack_due_at = l.ack_due_at,
    unacknowledged_at = l.unacknowledged_at, archive_state = l.archive_state, archive_reason = l.archive_reason,
    archive_failure = l.archive_failure, archive_retry_at = l.archive_retry_at, archive_token = l.archive_token,
    archived_at = l.archived_at, fetch_at = l.fetch_at, lease_until = l.lease_until, worker_id = l.worker_id,
    result = l.result, updated_at = l.updated_at
FROM redrive_lifecycle l WHERE l.id = d.id;
ALTER TABLE redrive_record_data
    ALTER COLUMN state SET NOT NULL, ALTER COLUMN attempt SET NOT NULL, ALTER COLUMN updated_at SET NOT NULL,
    ADD CONSTRAINT redrive_record_state_check CHECK (state IN ('retryable', 'available', 'completed', 'discarded')),
    ADD CONSTRAINT redrive_record_exhaustion_check CHECK (exhaustion IN ('dead_letter', 'discard', 'cancelled')),
    ADD CONSTRAINT redrive_record_completed_by_check CHECK (completed_by IN ('redelivered', 'ack')),
    ADD CONSTRAINT redrive_record_archive_state_check CHECK (archive_state IN ('pending', 'failed', 'done')),
    ADD CONSTRAINT redrive_record_ojs_not_kafka CHECK (format <> 'ojs' OR next_retry_at IS NULL) NOT VALID;
DROP TABLE redrive_lifecycle;
ALTER TABLE redrive_record_data RENAME TO redrive_record;
CREATE INDEX redrive_record_state_id ON redrive_record (state, id);
CREATE INDEX redrive_record_exhaustion_id ON redrive_record (exhaustion, id) WHERE exhaustion IS NOT NULL;
CREATE INDEX redrive_record_attempt ON redrive_record (queue, attempt, id);
CREATE INDEX redrive_record_next_retry ON redrive_record (queue, next_retry_at, id) WHERE next_retry_at IS NOT NULL;
CREATE INDEX redrive_record_waiting ON redrive_record (queue, id) WHERE state = 'retryable';
CREATE INDEX redrive_record_discarded ON redrive_record (queue, exhaustion, discarded_at) WHERE state = 'discarded';
CREATE INDEX redrive_record_completed ON redrive_record (queue, completed_at) WHERE state = 'completed';
CREATE INDEX redrive_record_ack_due ON redrive_record (ack_due_at)
    WHERE state = 'available' AND ack_due_at IS NOT NULL AND unacknowledged_at IS NULL;
CREATE INDEX redrive_record_unacknowledged ON redrive_record (queue) WHERE state = 'available' AND unacknowledged_at IS NOT NULL;
CREATE INDEX redrive_record_blocked ON redrive_record (queue) WHERE redelivery_failure IS NOT NULL;
CREATE INDEX redrive_record_archive_due ON redrive_record ((coalesce(archive_retry_at, '-infinity'::timestamptz)))
    WHERE archive_state IN ('pending', 'failed');
CREATE INDEX redrive_record_fetch_due ON redrive_record (queue, fetch_at) WHERE fetch_at IS NOT NULL;
CREATE INDEX redrive_record_lease ON redrive_record (lease_until) WHERE lease_until IS NOT NULL;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_record_count_ins() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count_delta (queue, type, error_type, state, exhaustion, fingerprint, n, bytes)
    SELECT queue, type, error_type, state, coalesce(exhaustion, ''), fingerprint, count(*),
           sum(octet_length(coalesce(key, ''::bytea)) + octet_length(coalesce(value, ''::bytea)))
    FROM new_rows GROUP BY 1, 2, 3, 4, 5, 6;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_record_count_del() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count_delta (queue, type, error_type, state, exhaustion, fingerprint, n, bytes)
    SELECT queue, type, error_type, state, coalesce(exhaustion, ''), fingerprint, -count(*),
           -sum(octet_length(coalesce(key, ''::bytea)) + octet_length(coalesce(value, ''::bytea)))
    FROM old_rows GROUP BY 1, 2, 3, 4, 5, 6;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_record_count_upd() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO redrive_record_count_delta (queue, type, error_type, state, exhaustion, fingerprint, n, bytes)
    SELECT queue, type, error_type, state, exhaustion, fingerprint, sum(d), sum(b)
    FROM (SELECT queue, type, error_type, state, coalesce(exhaustion, '') AS exhaustion, fingerprint, -1 AS d,
                 -(octet_length(coalesce(key, ''::bytea)) + octet_length(coalesce(value, ''::bytea)))::bigint AS b FROM old_rows
          UNION ALL
          SELECT queue, type, error_type, state, coalesce(exhaustion, ''), fingerprint, 1,
                 (octet_length(coalesce(key, ''::bytea)) + octet_length(coalesce(value, ''::bytea)))::bigint FROM new_rows) c
    GROUP BY 1, 2, 3, 4, 5, 6
    HAVING sum(d) <> 0 OR sum(b) <> 0;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER redrive_record_count_ins AFTER INSERT ON redrive_record
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION redrive_record_count_ins();
CREATE TRIGGER redrive_record_count_del AFTER DELETE ON redrive_record
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION redrive_record_count_del();
CREATE TRIGGER redrive_record_count_upd AFTER UPDATE ON redrive_record
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION redrive_record_count_upd();
