-- +goose NO TRANSACTION
-- +goose Up
-- Workers over HTTP (docs/api.md#workers): records published as OJS jobs
-- (format 'ojs') and records of queues whose policy says redelivery.mode:
-- pull are fetched by workers with a lease, then acked or nacked, instead of
-- being produced back to Kafka. Every step can be run again; indexes are
-- built CONCURRENTLY so that upgrading a large table never blocks ingest.
ALTER TABLE redrive_record
    -- A job published over HTTP waits for a worker's fetch until fetch_at,
    -- never on next_retry_at: the Kafka scheduler only ever reads
    -- next_retry_at, so it cannot produce such a job (the constraint below
    -- keeps it that way).
    ADD COLUMN IF NOT EXISTS fetch_at timestamptz,
    -- While a worker holds the record: until when, and which worker. An
    -- expired lease is a failed attempt (OJS retry spec §9.2).
    ADD COLUMN IF NOT EXISTS lease_until timestamptz,
    ADD COLUMN IF NOT EXISTS worker_id text,
    -- The result a worker acked the record with (any JSON), if any.
    ADD COLUMN IF NOT EXISTS result jsonb;

-- +goose StatementBegin
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'redrive_record_ojs_not_kafka') THEN
        -- NOT VALID: rows stored before (none of format ojs) are not scanned;
        -- every insert and update is checked.
        ALTER TABLE redrive_record ADD CONSTRAINT redrive_record_ojs_not_kafka
            CHECK (format <> 'ojs' OR next_retry_at IS NULL) NOT VALID;
    END IF;
END $$;
-- +goose StatementEnd

-- The sequence that numbers jobs published over HTTP (their dlq_offset: they
-- were read from no DLQ topic, and a record's DLQ coordinates are unique).
CREATE SEQUENCE IF NOT EXISTS redrive_ojs_job_seq;

-- A fetch takes the due jobs of its queues, oldest due first.
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_fetch_due
    ON redrive_record (queue, fetch_at) WHERE fetch_at IS NOT NULL;
-- The lease sweep finds expired leases in expiry order.
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_lease
    ON redrive_record (lease_until) WHERE lease_until IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_lease;
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_fetch_due;
DROP SEQUENCE IF EXISTS redrive_ojs_job_seq;
ALTER TABLE redrive_record DROP CONSTRAINT IF EXISTS redrive_record_ojs_not_kafka;
ALTER TABLE redrive_record
    DROP COLUMN IF EXISTS result,
    DROP COLUMN IF EXISTS worker_id,
    DROP COLUMN IF EXISTS lease_until,
    DROP COLUMN IF EXISTS fetch_at;
