-- +goose Up
-- The enqueue options of a job published over HTTP that Redrive acts on
-- (OJS HTTP binding §9.1, worker protocol §5): its priority (fetch takes the
-- highest first within a queue), its own visibility timeout (the lease a
-- fetch grants when the fetch names none), its execution timeout (an attempt
-- still held past it fails with a timeout error, heartbeats or not), and the
-- length of its current lease (a heartbeat extends the lease by it).
-- Nullable columns without defaults change only the catalog: no partition is
-- rewritten. priority NULL reads as 0.
ALTER TABLE redrive_lifecycle
    ADD COLUMN IF NOT EXISTS priority smallint,
    ADD COLUMN IF NOT EXISTS visibility_ms bigint,
    ADD COLUMN IF NOT EXISTS timeout_ms bigint,
    ADD COLUMN IF NOT EXISTS lease_ms bigint,
    ADD COLUMN IF NOT EXISTS deadline_at timestamptz;

-- +goose Down
ALTER TABLE redrive_lifecycle
    DROP COLUMN IF EXISTS priority,
    DROP COLUMN IF EXISTS visibility_ms,
    DROP COLUMN IF EXISTS timeout_ms,
    DROP COLUMN IF EXISTS lease_ms,
    DROP COLUMN IF EXISTS deadline_at;
