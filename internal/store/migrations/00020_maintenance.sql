-- +goose NO TRANSACTION
-- +goose Up
-- Retention, pruning and replay rules (internal/maintenance).
--
-- The pruner and the replay rules walk terminal records per queue, oldest
-- first; these partial indexes keep that a range scan at millions of rows and
-- give the oldest dead letter per queue (a metric) in one index probe. They are
-- built CONCURRENTLY so that upgrading a large table never blocks ingest.
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_discarded
    ON redrive_record (queue, exhaustion, discarded_at) WHERE state = 'discarded';
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_completed
    ON redrive_record (queue, completed_at) WHERE state = 'completed';

-- Replay rules created through the API (rules from policy files are not stored:
-- the files are their source). OJS dead-letter spec §7.1 plus a rate limit and
-- a daily time window.
CREATE TABLE IF NOT EXISTS redrive_replay_rule (
    name         text             PRIMARY KEY,
    filter       jsonb            NOT NULL,           -- bulk-retry filter: queue, type, error_type, since, until
    delay_ms     bigint           NOT NULL CHECK (delay_ms >= 0), -- after discarded_at
    max_replays  integer          NOT NULL CHECK (max_replays >= 1),
    enabled      boolean          NOT NULL DEFAULT true,
    rate_limit   double precision NOT NULL DEFAULT 0 CHECK (rate_limit >= 0), -- replays/s, 0 = unlimited
    window_start text,                                -- "HH:MM", replays only between start and end
    window_end   text,
    time_zone    text             NOT NULL DEFAULT 'UTC',
    created_at   timestamptz      NOT NULL,
    updated_at   timestamptz      NOT NULL
);

-- +goose Down
DROP TABLE IF EXISTS redrive_replay_rule;
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_completed;
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_discarded;
