-- +goose NO TRANSACTION
-- +goose Up
-- Sorted listings (GET /ojs/v1/dead-letter?sort=…): each order the list
-- offers is read from an index, ties broken by id, so that a page costs the
-- same at a million records as at ten and a cursor continues where the last
-- page ended. Newest or oldest first reads the id indexes that exist.
--
-- failed_at is when the record's latest failure happened (the occurred_at
-- of its latest error; created_at when that is unknown): set on insert and
-- whenever a repeat failure joins the record. Rows stored before this
-- migration have none until serve fills it in the background; a listing by
-- it shows them last meanwhile.
ALTER TABLE redrive_record ADD COLUMN IF NOT EXISTS failed_at timestamptz;
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_failed_at ON redrive_record (failed_at, id);
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_attempt ON redrive_record (attempt, id);
-- Only records waiting for a (re)delivery have a next retry; the others are
-- listed after them, by id.
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_next_retry ON redrive_record (next_retry_at, id) WHERE next_retry_at IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_next_retry;
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_attempt;
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_failed_at;
ALTER TABLE redrive_record DROP COLUMN IF EXISTS failed_at;
