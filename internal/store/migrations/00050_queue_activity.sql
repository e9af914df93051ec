-- +goose Up
-- Queue activity for the console: failures stored and records redelivered per
-- queue and minute. Writers only append (ingest one row per queue and batch,
-- the scheduler one per settled claim), so the hot paths never contend on a
-- counter row; the stats compaction loop folds the rows into one per queue
-- and minute and drops minutes older than two hours. Reading a queue's last
-- hour sums at most a few dozen rows, whatever the number of records.
CREATE TABLE IF NOT EXISTS redrive_queue_activity (
    queue   text        NOT NULL,
    minute  timestamptz NOT NULL,   -- the start of the minute
    added   bigint      NOT NULL DEFAULT 0,   -- failures stored (new records and repeat failures)
    retried bigint      NOT NULL DEFAULT 0    -- records produced back to their topic
);
CREATE INDEX IF NOT EXISTS redrive_queue_activity_queue_minute ON redrive_queue_activity (queue, minute);

-- +goose Down
DROP TABLE IF EXISTS redrive_queue_activity;
