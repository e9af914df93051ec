-- +goose Up
-- The enqueue options of a job published over HTTP that Redrive acts on
-- (OJS HTTP binding §9.1, worker protocol §5): its priority (a fetch takes
-- the highest first within a queue), its own visibility timeout (the lease a
-- fetch grants when the fetch names none), its execution timeout (an attempt
-- still held past its deadline fails with a timeout error, heartbeats or
-- not), and the length of its current lease (a heartbeat extends the lease by
-- it). A column with a constant default, or none, changes only the catalog:
-- no partition is rewritten.
ALTER TABLE redrive_lifecycle
    ADD COLUMN IF NOT EXISTS priority smallint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS visibility_ms bigint,
    ADD COLUMN IF NOT EXISTS timeout_ms bigint,
    ADD COLUMN IF NOT EXISTS lease_ms bigint,
    ADD COLUMN IF NOT EXISTS deadline_at timestamptz;

-- A fetch reads a queue's waiting jobs highest priority first, then oldest
-- due: only jobs waiting for a fetch (fetch_at set) are in it, so it stays
-- small whatever the records kept.
CREATE INDEX IF NOT EXISTS redrive_lifecycle_fetch_priority
    ON redrive_lifecycle (queue, priority DESC, fetch_at) WHERE fetch_at IS NOT NULL;

-- +goose Down
DROP INDEX IF EXISTS redrive_lifecycle_fetch_priority;
ALTER TABLE redrive_lifecycle
    DROP COLUMN IF EXISTS priority,
    DROP COLUMN IF EXISTS visibility_ms,
    DROP COLUMN IF EXISTS timeout_ms,
    DROP COLUMN IF EXISTS lease_ms,
    DROP COLUMN IF EXISTS deadline_at;
