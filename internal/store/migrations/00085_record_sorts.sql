-- +goose NO TRANSACTION
-- +goose Up
-- Sorted listings of a queue (GET /ojs/v1/dead-letter?queue=…&sort=…): each
-- order is one range of an index that starts with the queue, ties broken by
-- id, so that a page costs the same at a million records as at ten and a
-- cursor continues where the last page ended. (Newest or oldest first reads
-- the id indexes that exist, for any filter.) An index on the sort key
-- alone would not do: a queue whose records all sort last would have the
-- scan read every other queue's records first.
--
-- failed_at is when the record's latest failure happened (the occurred_at
-- of its latest error; created_at when that is unknown): set on insert and
-- whenever a repeat failure joins the record. Rows stored before this
-- migration have none until serve fills it in the background; a listing by
-- it shows them last meanwhile.
ALTER TABLE redrive_record ADD COLUMN IF NOT EXISTS failed_at timestamptz;
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_failed_at ON redrive_record (queue, failed_at, id);
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_attempt ON redrive_record (queue, attempt, id);
-- Only records waiting for a (re)delivery have a next retry; a listing puts
-- the others after them, by id. The scheduler's due scan (a loose scan of
-- the queues with records waiting, then each queue's due records) reads
-- the same index, which replaces the one it had without the id.
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_next_retry
    ON redrive_record (queue, next_retry_at, id) WHERE next_retry_at IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_due_by_queue;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_due_by_queue
    ON redrive_record (queue, next_retry_at) WHERE next_retry_at IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_next_retry;
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_attempt;
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_failed_at;
ALTER TABLE redrive_record DROP COLUMN IF EXISTS failed_at;
